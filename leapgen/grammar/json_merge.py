"""Schema algebra for the JSON Schema front-end: local ``$ref`` resolution and
``allOf`` merging.

``allOf`` (and a ``$ref`` or ``anyOf``/``oneOf`` with sibling keywords, which
mean the same conjunction) is compiled by merging the subschemas into one
schema when that is exact:

* ``type``: intersection (``integer`` within ``number``);
* ``required``: union; ``enum``/``const``: intersection of the values;
* lower bounds (``minimum``, ``minLength``, ``minItems``, ...): the largest;
  upper bounds: the smallest;
* ``properties``/``additionalProperties`` and ``prefixItems``/``items``:
  each property (item) gets the conjunction of what each side says about it,
  a side's ``additionalProperties`` (``items``) covering the names (indexes)
  it does not list;
* ``pattern``: both patterns are kept and intersected;
* ``anyOf`` on both sides: the pairwise merges (at most 64);
* equal values: kept; annotations: the first wins.

Anything else that differs raises :class:`SchemaError` naming ``allOf``.
"""

from __future__ import annotations

import urllib.parse

from leapgen.errors import SchemaError

from .json_values import canon_key, json_equal, json_type

MISSING = object()
TYPE_NAMES = ("null", "boolean", "object", "array", "number", "string", "integer")
MAX_ANYOF_PRODUCT = 64


class Patterns(tuple):
    """Several ``pattern`` values that must all match (an allOf merge)."""


def escape_pointer_token(token: str) -> str:
    """RFC 6901 escaping of one reference token."""
    return token.replace("~", "~0").replace("/", "~1")


def join_pointer(ptr: str, *tokens) -> str:
    """``ptr`` extended by reference tokens (escaped)."""
    return ptr + "".join("/" + escape_pointer_token(str(t)) for t in tokens)


def _find_anchor(node, name: str, ptr: str):
    """Depth-first search for ``$anchor: name`` (or draft-07 ``$id: "#name"``)."""
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


def resolve_ref(root, ref, where: str):
    """Resolve a local ``$ref`` against the root document.

    Parameters
    ----------
    root : dict or bool
        The root schema.
    ref : str
        ``#`` + JSON pointer (RFC 6901, percent-decoded first, ``~0``/``~1``
        unescaped), ``#name`` for a ``$anchor``, or the root's ``$id``
        followed by one of those.
    where : str
        JSON pointer of the ``$ref`` keyword (for errors).

    Returns
    -------
    (schema, pointer)
        The target subschema and its canonical JSON pointer.

    Raises
    ------
    SchemaError
        Non-local or dangling reference.
    """
    if not isinstance(ref, str):
        raise SchemaError("$ref must be a string", pointer=where)
    base, hash_, frag = ref.partition("#")
    root_id = root.get("$id") if isinstance(root, dict) else None
    if base and (not isinstance(root_id, str) or base != root_id.partition("#")[0]):
        raise SchemaError(f"$ref {ref!r} is not local: only references into this document ('#/...') are "
                          "supported", pointer=where)
    frag = urllib.parse.unquote(frag)
    if frag and not frag.startswith("/"):
        hit = _find_anchor(root, frag, "")
        if hit is None:
            raise SchemaError(f"$ref {ref!r}: no $anchor {frag!r} in the schema", pointer=where)
        return hit
    node = root
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
    return node, "".join("/" + t for t in tokens)


def close_child(schema, ptr: str):
    """A subschema's ``unevaluatedProperties``/``unevaluatedItems`` only see its
    own keywords: turn them into ``additionalProperties``/``items`` before the
    subschema is merged with a sibling or parent (returns a new dict, or
    ``schema`` itself when there is nothing to do)."""
    if not isinstance(schema, dict) or not ("unevaluatedProperties" in schema or "unevaluatedItems" in schema):
        return schema
    if any(k in schema for k in ("anyOf", "oneOf", "allOf", "$ref")):
        raise SchemaError("unevaluatedProperties/unevaluatedItems next to an applicator, inside a schema that "
                          "is combined with others, is not supported yet", pointer=ptr)
    out = dict(schema)
    for unev, plain in (("unevaluatedProperties", "additionalProperties"), ("unevaluatedItems", "items")):
        if unev in out:
            arg = out.pop(unev)
            out.setdefault(plain, arg)
    return out


def conj(a, b, ptr: str, ignored: frozenset):
    """The conjunction of two (dereferenced) schemas as one schema."""
    if a is True or b is False:
        return b
    if b is True or a is False:
        return a
    return merge(a, b, ptr, ignored)


def _side(schema: dict, key: str):
    """What a schema says about a property/item not listed: its
    ``additionalProperties``/``items`` (missing: anything)."""
    v = schema.get(key, MISSING)
    return True if v is MISSING else v


def merge(a: dict, b: dict, ptr: str, ignored: frozenset) -> dict:
    """Merge two dereferenced schemas into one (see the module docstring).

    Raises
    ------
    SchemaError
        When the two cannot be combined exactly.
    """
    if not isinstance(a, dict) or not isinstance(b, dict):
        raise SchemaError("a schema must be an object or a boolean", pointer=ptr)
    out = dict(a)
    for key, bv in b.items():
        if key not in out:
            out[key] = bv
            continue
        av = out[key]
        if key in ignored or key in ("properties", "additionalProperties", "prefixItems", "items"):
            continue  # annotations: first wins; structure: below
        if key == "type":
            out[key] = _merge_types(av, bv, ptr)
        elif key == "required":
            out[key] = list(dict.fromkeys([*av, *bv]))
        elif key in ("minimum", "minLength", "minItems", "exclusiveMinimum") and _num(av) and _num(bv):
            out[key] = max(av, bv)
        elif key in ("maximum", "maxLength", "maxItems", "exclusiveMaximum") and _num(av) and _num(bv):
            out[key] = min(av, bv)
        elif key == "enum" and isinstance(av, list) and isinstance(bv, list):
            try:
                keys = {canon_key(w) for w in bv}
                out[key] = [v for v in av if canon_key(v) in keys]
            except ValueError as exc:
                raise SchemaError(f"enum holds a value that is not JSON: {exc}", pointer=ptr) from exc
        elif key == "const":
            if not _eq(av, bv):
                out.pop("const")
                out["enum"] = []
        elif key == "pattern" and isinstance(av, (str, Patterns)) and isinstance(bv, (str, Patterns)):
            both = [*(av if isinstance(av, Patterns) else [av]), *(bv if isinstance(bv, Patterns) else [bv])]
            out[key] = Patterns(dict.fromkeys(both))
        elif key == "anyOf" and isinstance(av, list) and isinstance(bv, list):
            if len(av) * len(bv) > MAX_ANYOF_PRODUCT:
                raise SchemaError("allOf of two anyOf lists is too large to expand", pointer=ptr)
            out[key] = [conj(x, y, ptr, ignored) for x in av for y in bv]
        elif not _eq_raw(av, bv):
            raise SchemaError(f"allOf: cannot combine differing {key!r} values", pointer=ptr)
    _merge_structure(out, a, b, "properties", "additionalProperties", ptr, ignored)
    _merge_items(out, a, b, ptr, ignored)
    return out


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _eq(a, b) -> bool:
    try:
        return json_equal(a, b)
    except ValueError:
        return False


def _eq_raw(a, b) -> bool:
    return type(a) is type(b) and a == b


def _merge_types(av, bv, ptr):
    def norm(v):
        if isinstance(v, str):
            return [v]
        if isinstance(v, list):
            return v
        raise SchemaError("type must be a string or a list of strings", pointer=ptr)
    out = []
    for t in norm(av):
        for u in norm(bv):
            if t == u or {t, u} == {"integer", "number"}:
                r = "integer" if "integer" in (t, u) else t
                if r not in out:
                    out.append(r)
    return out


def _merge_structure(out, a, b, props_key, extra_key, ptr, ignored):
    pa, pb = a.get(props_key), b.get(props_key)
    if pa is None and pb is None:
        return
    pa, pb = pa or {}, pb or {}
    if not isinstance(pa, dict) or not isinstance(pb, dict):
        raise SchemaError(f"{props_key} must be an object", pointer=ptr)
    merged = {}
    for name in dict.fromkeys([*pa, *pb]):
        sa = pa[name] if name in pa else _side(a, extra_key)
        sb = pb[name] if name in pb else _side(b, extra_key)
        p = f"{ptr}/{props_key}/{escape_pointer_token(name)}"
        merged[name] = conj(close_child(sa, p), close_child(sb, p), p, ignored)
    out[props_key] = merged
    ea, eb = a.get(extra_key, MISSING), b.get(extra_key, MISSING)
    if ea is MISSING or eb is MISSING:
        if ea is not MISSING or eb is not MISSING:
            out[extra_key] = ea if eb is MISSING else eb
    else:
        out[extra_key] = conj(ea, eb, f"{ptr}/{extra_key}", ignored)


def _merge_items(out, a, b, ptr, ignored):
    pa, pb = a.get("prefixItems"), b.get("prefixItems")
    ia, ib = a.get("items", MISSING), b.get("items", MISSING)
    if pa is None and pb is None:
        if ia is not MISSING and ib is not MISSING:
            out["items"] = conj(ia, ib, f"{ptr}/items", ignored)
        return
    pa, pb = pa or [], pb or []
    if not isinstance(pa, list) or not isinstance(pb, list):
        raise SchemaError("prefixItems must be an array", pointer=ptr)
    merged = []
    for i in range(max(len(pa), len(pb))):
        sa = pa[i] if i < len(pa) else _side(a, "items")
        sb = pb[i] if i < len(pb) else _side(b, "items")
        p = f"{ptr}/prefixItems/{i}"
        merged.append(conj(close_child(sa, p), close_child(sb, p), p, ignored))
    out["prefixItems"] = merged
    if ia is not MISSING and ib is not MISSING:
        out["items"] = conj(ia, ib, f"{ptr}/items", ignored)
    elif ia is not MISSING or ib is not MISSING:
        out["items"] = ia if ib is MISSING else ib


def values_type_names(values) -> set:
    """JSON Schema type names of a list of values (``integer`` also counts as ``number``)."""
    out = set()
    for v in values:
        t = json_type(v)
        out.add(t)
        if t == "integer":
            out.add("number")
    return out


# ---------------------------------------------------------------------------
# oneOf: provable disjointness


def kinds(c, schema, ptr: str, depth: int = 0):
    """What a oneOf branch can be: (possible type names, its finite set of
    values or None, {required property: its finite values}). ``c`` is the
    running compiler (for ``$ref`` and type inference)."""
    schema, ptr, _ = c._deref(schema, ptr, merging=False)
    if schema is True or not isinstance(schema, dict):
        return set(TYPE_NAMES), None, {}
    if schema is False:
        return set(), [], {}
    types = set(c._types(schema, ptr))
    if "integer" in types:
        types.add("number")
    values = None
    if "const" in schema:
        values = [schema["const"]]
    if isinstance(schema.get("enum"), list):
        values = schema["enum"] if values is None else [v for v in values if any(
            _eq(v, e) for e in schema["enum"])]
    if values is not None:
        try:
            types &= values_type_names(values)
        except ValueError:
            pass
    for kw in ("anyOf", "oneOf"):
        if isinstance(schema.get(kw), list) and depth < 4:
            sub = set()
            for b in schema[kw]:
                sub |= kinds(c, b, ptr, depth + 1)[0]
            types &= sub
    tags = {}
    props = schema.get("properties")
    if isinstance(props, dict) and isinstance(schema.get("required"), list) and depth < 4:
        for name in schema["required"]:
            if name in props:
                sub = kinds(c, props[name], ptr, depth + 1)[1]
                if sub is not None:
                    tags[name] = sub
    return types, values, tags


def disjoint(a, b) -> bool:
    """Whether two :func:`kinds` provably share no value."""
    ta, va, tags_a = a
    tb, vb, tags_b = b
    if not (ta & tb):
        return True
    if va is not None and vb is not None:
        return not any(_eq(x, y) for x in va for y in vb)
    for vals, types in ((va, tb), (vb, ta)):
        if vals is not None and not any(_has_any_type(v, types) for v in vals):
            return True
    if ta | tb <= {"object"} or (ta & tb) == {"object"}:
        for name in tags_a.keys() & tags_b.keys():
            if not any(_eq(x, y) for x in tags_a[name] for y in tags_b[name]):
                return (ta & tb) == {"object"}
    return False


def _has_any_type(value, types) -> bool:
    try:
        t = json_type(value)
    except ValueError:
        return True
    return t in types or (t == "integer" and "number" in types)
