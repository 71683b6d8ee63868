"""An instance with its object members in the order a schema-order generator writes them.

leapgen (like xgrammar and outlines-core) writes an object's members in schema
order: the names of ``properties``, then names only in ``required``, then the
other members. Where several subschemas apply, their keywords are merged the
way leapgen merges them (:mod:`leapgen.grammar.json.merge`): first the
conjunction (a schema's own keywords, then its ``$ref`` target, whose
siblings are ignored when the root declares draft 4-7, then its ``allOf``
members in order, recursively), then each alternative the instance takes, in
turn: the ``anyOf``/``oneOf`` branch it matches, ``if`` with ``then`` or
``else`` as it matches ``if`` (``else`` followed by the property names of ``if``, which the
complement of ``if`` declares), the ``dependentSchemas`` and
``dependentRequired`` (draft-07 ``dependencies``) of names present (leapgen rewrites all of these as
``anyOf`` and puts each branch after its siblings). A property named by
several merged schemas keeps its first position and gets all their schemas.

Which branch an instance matches is decided by ``jsonschema`` (the reference
validator, a dev dependency), falling back to the first branch whose declared
type fits when it cannot decide (unknown format, unsupported regex). This
only reorders keys, which never changes the JSON value (RFC 8259 section 4):
it cannot make a wrong instance right.
"""

from __future__ import annotations

import re

LEGACY_DIALECTS = ("draft-03", "draft-04", "draft-06", "draft-07")
MAX_DEPTH = 40


class _Context:
    """The root document, its validator and whether ``$ref`` siblings apply."""

    def __init__(self, root):
        self.root = root
        dialect = root.get("$schema") if isinstance(root, dict) else None
        self.legacy_ref = isinstance(dialect, str) and any(d in dialect for d in LEGACY_DIALECTS)
        self._validator = None

    def resolve(self, ref: str):
        """The target of a local ``#/...`` pointer (None when not local or missing)."""
        if not ref.startswith("#"):
            return None
        target = self.root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            elif isinstance(target, dict) and part in target:
                target = target[part]
            else:
                return None
        return target

    def fits(self, schema, data) -> bool:
        """Whether ``data`` is valid under ``schema`` (a subschema of the root)."""
        if isinstance(schema, bool):
            return schema
        try:
            if self._validator is None:
                import jsonschema

                cls = jsonschema.validators.validator_for(self.root if isinstance(self.root, dict) else {})
                self._validator = cls(self.root if isinstance(self.root, (dict, bool)) else {})
            return self._validator.evolve(schema=schema).is_valid(data)
        except Exception:  # the validator cannot decide (bad regex, unknown reference): guess by type
            return _type_fits(schema, data)


def _type_fits(schema, data) -> bool:
    t = schema.get("type") if isinstance(schema, dict) else None
    if not isinstance(t, (str, list)):
        return True
    names = [t] if isinstance(t, str) else t
    kind = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(data))
    if kind is None:
        kind = "integer" if isinstance(data, int) else "number"
    return kind in names or (kind == "integer" and "number" in names)


def schema_order(schema, data, root=None):
    """``data`` with every object's members in schema order (see the module docstring).

    Parameters
    ----------
    schema : dict or bool
        The schema ``data`` is written under.
    data : any JSON value
    root : dict or bool, optional
        The document ``schema`` belongs to (for ``$ref``); default ``schema``.

    Returns
    -------
    The same JSON value, objects rebuilt in the new key order.
    """
    return _order(schema, data, _Context(schema if root is None else root), 0)


def _order(schema, data, ctx: _Context, depth: int):
    if depth > MAX_DEPTH or not isinstance(data, (dict, list)):
        return data
    flat = _flatten(schema, data, ctx, depth)
    if isinstance(data, dict):
        props = flat["properties"]
        names = [k for k in props if k in data]
        names += [k for k in flat["required"] if k in data and k not in props]
        names += [k for k in data if k not in names]
        out = {}
        for k in names:
            subs = props.get(k) or [ps for p, ps in flat["patternProperties"] if _search(p, k)] or \
                flat["additionalProperties"]
            out[k] = _order({"allOf": subs}, data[k], ctx, depth + 1)
        return out
    prefix, items = flat["prefixItems"], flat["items"]
    return [_order({"allOf": prefix[i] if i < len(prefix) else items}, v, ctx, depth + 1)
            for i, v in enumerate(data)]


def _flatten(schema, data, ctx: _Context, depth: int) -> dict:
    """The ordering keywords of every subschema that applies to ``data``, merged in leapgen's order:
    the conjunction first (own keywords, ``$ref``, ``allOf``), then each chosen alternative in turn."""
    flat = {"properties": {}, "required": [], "patternProperties": [], "additionalProperties": [],
            "prefixItems": [], "items": []}
    chosen: list = []
    _collect(schema, data, ctx, depth, flat, chosen)
    while chosen:
        parts = chosen.pop(0)
        for part in parts:
            _collect(part, data, ctx, depth + 1, flat, chosen)
    return flat


def _collect(schema, data, ctx: _Context, depth: int, flat: dict, chosen: list) -> None:
    """Add the conjunctive parts of ``schema`` to ``flat``; queue the alternatives ``data`` takes."""
    if depth > MAX_DEPTH or not isinstance(schema, dict):
        return
    ref = schema.get("$ref")
    if isinstance(ref, str) and ctx.legacy_ref:  # draft 4-7: the siblings of $ref are ignored
        _collect(ctx.resolve(ref), data, ctx, depth + 1, flat, chosen)
        return
    _add_own(schema, flat)
    if isinstance(ref, str):
        _collect(ctx.resolve(ref), data, ctx, depth + 1, flat, chosen)
    for sub in schema.get("allOf") or []:
        _collect(sub, data, ctx, depth + 1, flat, chosen)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            chosen.append([next((b for b in branches if ctx.fits(b, data)), None)])
    if "if" in schema:  # leapgen's branches: if + then, or else + (not if), which declares if's property names
        fits = ctx.fits(schema["if"], data)
        props = schema["if"].get("properties") if isinstance(schema["if"], dict) else None
        chosen.append([schema["if"], schema.get("then")] if fits else
                      [schema.get("else"), {"properties": props} if isinstance(props, dict) else None])
    if isinstance(data, dict):
        for key in ("dependentSchemas", "dependentRequired", "dependencies"):
            deps = schema.get(key)
            if isinstance(deps, dict):  # a list of names is the branch ``required: [name, *names]``
                chosen.extend([dep if isinstance(dep, dict) else {"required": [name, *dep]}]
                              for name, dep in deps.items() if name in data and isinstance(dep, (dict, list)))


def _add_own(schema: dict, flat: dict) -> None:
    """Append one schema's own ordering keywords to ``flat``."""
    props = schema.get("properties")
    if isinstance(props, dict):
        for k, v in props.items():
            flat["properties"].setdefault(k, []).append(v)
    required = schema.get("required")
    if isinstance(required, list):
        flat["required"] += [r for r in required if isinstance(r, str) and r not in flat["required"]]
    pats = schema.get("patternProperties")
    if isinstance(pats, dict):
        flat["patternProperties"] += list(pats.items())
    if "additionalProperties" in schema:
        flat["additionalProperties"].append(schema["additionalProperties"])
    items, prefix = schema.get("items"), schema.get("prefixItems")
    if isinstance(items, list):  # draft-07 tuple form
        items, prefix = schema.get("additionalItems"), items
    if isinstance(prefix, list):
        for i, p in enumerate(prefix):
            if i == len(flat["prefixItems"]):
                flat["prefixItems"].append([])
            flat["prefixItems"][i].append(p)
    if items is not None:
        flat["items"].append(items)


def _search(pattern, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except (re.error, TypeError):
        return False
