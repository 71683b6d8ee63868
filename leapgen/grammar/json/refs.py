"""``$ref`` resolution within one schema document: JSON pointers, ``$anchor``
and ``$id`` base URIs (draft 2020-12, with the draft-07 ``$id: "#name"`` and
``definitions`` forms).

:class:`RefIndex` walks the document once, following only keywords whose
values are schemas, and records every embedded resource (a subschema with
``$id``, resolved against the enclosing base URI), every ``$anchor`` /
``$dynamicAnchor`` of each resource, and the base URI in force at each JSON
pointer. A ``$ref`` is resolved against the base URI at the pointer of the
schema that holds it (RFC 3986 reference resolution; a fragment-only
reference keeps the base), then looked up among the document's resources.
References to other documents (remote schemas, meta-schemas) raise
:class:`SchemaError`: nothing is fetched.
"""

from __future__ import annotations

import urllib.parse

from leapgen.errors import SchemaError

SCHEMA_KEYWORDS = ("additionalProperties", "additionalItems", "contains", "propertyNames", "not", "if", "then",
                   "else", "unevaluatedItems", "unevaluatedProperties", "items", "contentSchema")
"""Keywords whose argument is one schema."""
SCHEMA_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
"""Keywords whose argument is an array of schemas."""
SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                       "dependencies")
"""Keywords whose argument maps names to schemas."""


def escape_pointer_token(token: str) -> str:
    """RFC 6901 escaping of one reference token."""
    return token.replace("~", "~0").replace("/", "~1")


def join_pointer(ptr: str, *tokens) -> str:
    """``ptr`` extended by reference tokens (escaped)."""
    return ptr + "".join("/" + escape_pointer_token(str(t)) for t in tokens)


def _strip_fragment(uri: str) -> str:
    return uri.partition("#")[0]


def _join(base: str, ref: str) -> str:
    """RFC 3986 resolution of ``ref`` against ``base`` (fragment kept)."""
    if not base or urllib.parse.urlsplit(ref).scheme:
        return ref
    if ref.startswith("#"):
        return _strip_fragment(base) + ref
    try:
        return urllib.parse.urljoin(base, ref)
    except ValueError:
        return ref


class RefIndex:
    """The resources, anchors and base URIs of one schema document.

    Parameters
    ----------
    root : dict or bool
        The root schema (not mutated).
    """

    def __init__(self, root):
        self.root = root
        self.resources: dict[str, tuple[object, str]] = {}  # base URI -> (schema, pointer)
        self.anchors: dict[tuple[str, str], tuple[object, str]] = {}  # (base URI, name) -> (schema, pointer)
        self.bases: dict[str, str] = {}  # pointer of a schema with $id -> its base URI
        root_id = root.get("$id") if isinstance(root, dict) else None
        self.root_base = _strip_fragment(root_id) if isinstance(root_id, str) else ""
        self.resources[self.root_base] = (root, "")
        self.resources.setdefault("", (root, ""))
        self._walk(root, self.root_base, "", 0)

    def _walk(self, node, base: str, ptr: str, depth: int) -> None:
        if not isinstance(node, dict) or depth > 200:
            return
        sid = node.get("$id")
        if isinstance(sid, str):
            full = _join(base, sid)
            uri, _, frag = full.partition("#")
            if uri and uri != base:
                base = uri
                self.resources.setdefault(base, (node, ptr))
                self.bases[ptr] = base
            elif ptr == "" and uri:
                self.bases[ptr] = base
            if frag and not frag.startswith("/"):
                self.anchors.setdefault((base, frag), (node, ptr))
        for key in ("$anchor", "$dynamicAnchor"):
            name = node.get(key)
            if isinstance(name, str):
                self.anchors.setdefault((base, name), (node, ptr))
        for key, arg in node.items():
            if key in SCHEMA_KEYWORDS and isinstance(arg, dict):
                self._walk(arg, base, join_pointer(ptr, key), depth + 1)
            elif key in SCHEMA_LIST_KEYWORDS and isinstance(arg, list):
                for i, sub in enumerate(arg):
                    self._walk(sub, base, join_pointer(ptr, key, i), depth + 1)
            elif key in SCHEMA_MAP_KEYWORDS and isinstance(arg, dict):
                for name, sub in arg.items():
                    self._walk(sub, base, join_pointer(ptr, key, name), depth + 1)

    def base_at(self, ptr: str) -> str:
        """The base URI in force at JSON pointer ``ptr``."""
        while True:
            hit = self.bases.get(ptr)
            if hit is not None:
                return hit
            if not ptr:
                return self.root_base
            ptr = ptr.rpartition("/")[0]

    def resolve(self, ref, where: str, ptr: str = ""):
        """Resolve ``ref`` found in the schema at ``ptr``.

        Parameters
        ----------
        ref : str
            The ``$ref`` value.
        where : str
            JSON pointer of the ``$ref`` keyword (for errors).
        ptr : str
            JSON pointer of the schema holding it (its base URI applies).

        Returns
        -------
        (schema, pointer)
            The target and its canonical JSON pointer from the root.

        Raises
        ------
        SchemaError
            Not a string, a reference to another document, or a dangling one.
        """
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", pointer=where)
        base = self.base_at(ptr)
        full = _join(base, ref)
        uri, _, frag = full.partition("#")
        hit = self.resources.get(uri)
        if hit is None and not uri:
            hit = self.resources.get(base)
        if hit is None:
            raise SchemaError(f"$ref {ref!r} is not local (resolves to {uri!r}): only references into this "
                              "document are supported (no remote schemas)", pointer=where)
        node, rptr = hit
        frag = urllib.parse.unquote(frag)
        if frag and not frag.startswith("/"):
            found = self.anchors.get((uri, frag))
            if found is None and uri == self.root_base:
                found = _find_anchor(self.root, frag, "")
            if found is None:
                raise SchemaError(f"$ref {ref!r}: no $anchor {frag!r} in the schema", pointer=where)
            return found
        tokens = []
        for raw in frag.split("/")[1:]:
            tok = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and tok in node:
                node = node[tok]
            elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
                node = node[int(tok)]
            else:
                raise SchemaError(f"$ref {ref!r} points nowhere (no {tok!r})", pointer=where)
            tokens.append(escape_pointer_token(tok))
        return node, rptr + "".join("/" + t for t in tokens)


def _find_anchor(node, name: str, ptr: str):
    """Depth-first search for ``$anchor: name`` (or draft-07 ``$id: "#name"``)
    anywhere in the document (lenient fallback)."""
    if isinstance(node, dict):
        if node.get("$anchor") == name or node.get("$id") == "#" + name:
            return node, ptr
        items = node.items()
    elif isinstance(node, list):
        items = ((str(i), v) for i, v in enumerate(node))
    else:
        return None
    for k, v in items:
        hit = _find_anchor(v, name, f"{ptr}/{escape_pointer_token(k)}")
        if hit is not None:
            return hit
    return None
