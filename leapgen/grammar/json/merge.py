"""Schema algebra for the JSON Schema front-end: ``allOf`` merging, the
internal keywords (provable disjointness for ``oneOf``: :mod:`.disjoint`).

``allOf`` (and a ``$ref`` or ``anyOf``/``oneOf`` with sibling keywords, which
mean the same conjunction) is compiled by merging the subschemas into one
schema when that is exact:

* ``type``: intersection (``integer`` within ``number``);
* ``required``: union; ``enum``/``const``: intersection of the values;
* lower bounds (``minimum``, ``minLength``, ``minItems``, ``minProperties``,
  ...): the largest; upper bounds: the smallest; ``multipleOf`` (integers):
  the least common multiple;
* ``properties``/``additionalProperties`` and ``prefixItems``/``items``:
  each property (item) gets the conjunction of what each side says about it,
  a side's ``additionalProperties`` (``items``) covering the names (indexes)
  it does not list (names matching its ``patternProperties`` excepted: the
  pattern's schema is applied when the object is compiled);
* ``patternProperties``: the union (the same pattern: conjunction); not next
  to a constraining ``additionalProperties`` of the other side (SchemaError);
* ``propertyNames``: the conjunction; ``uniqueItems``: either;
* ``pattern``: both patterns are kept and intersected;
* ``anyOf`` on both sides: the pairwise merges without the contradictory ones
  (:func:`trivially_unsat`), at most :data:`MAX_ANYOF_PRODUCT`;
* ``allOf`` on both sides: concatenated; a second ``not``, ``if``, ``$ref``,
  ``oneOf`` or dependency keyword: kept as one more ``allOf`` member;
* internal ``$lg:`` keywords (:data:`INTERNAL`, written by
  :mod:`.logic`): unions (``$lg:props``: per name, the conjunction);
* equal values: kept; annotations and unknown keywords: the first wins.

Anything else that differs raises :class:`SchemaError` naming ``allOf``.
"""

from __future__ import annotations

import math

from leapgen.errors import RegexError, SchemaError

from ..regex import parse_regex
from .match import Unsupported, matches
from .refs import escape_pointer_token, join_pointer  # noqa: F401 (join_pointer re-exported)
from .values import canon_key, json_equal

MISSING = object()
TYPE_NAMES = ("null", "boolean", "object", "array", "number", "string", "integer")
MAX_ANYOF_PRODUCT = 64

ABSENT = "$lg:absent"
"""Internal keyword: names that must not be present (an object's)."""
PROPS = "$lg:props"
"""Internal keyword: ``{name: schema}``, a present property must also satisfy the
schema; unlike ``properties`` it does not declare the name (strict mode's default
for unlisted properties is unchanged)."""
NOT_ENUM = "$lg:notEnum"
"""Internal keyword: scalar values the instance must not equal."""
NOT_PATTERNS = "$lg:notPatterns"
"""Internal keyword: patterns a string must not match."""
NOT_FORMATS = "$lg:notFormats"
"""Internal keyword: formats a string must not satisfy."""
NON_INTEGER = "$lg:nonInteger"
"""Internal keyword: a number must not be integer-valued."""
BLIND_ITEMS = "$lg:blindItems"
"""Internal keyword: the array keywords here come from a negation, so they
evaluate no item for ``unevaluatedItems`` (which refuses them)."""
INTERNAL = frozenset({ABSENT, PROPS, NOT_ENUM, NOT_PATTERNS, NOT_FORMATS, NON_INTEGER, BLIND_ITEMS})
DEFERRED = frozenset({"not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies",
                      "oneOf"})
"""Keywords that two merged schemas may both hold: the second is kept as an
``allOf`` member (the logic rewrite turns it into mergeable parts)."""


class Patterns(tuple):
    """Several ``pattern`` values that must all match (an allOf merge)."""


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


def _side(schema: dict, key: str, name=None, ptr: str = ""):
    """What a schema says about a property/item not listed: its
    ``additionalProperties``/``items`` (missing: anything). A property
    ``name`` that matches one of its ``patternProperties`` gets ``true``: the
    pattern's schema is applied to listed names when the object is compiled."""
    if name is not None and isinstance(schema.get("patternProperties"), dict):
        for pattern in schema["patternProperties"]:
            if _name_matches(pattern, name, ptr):
                return True
    v = schema.get(key, MISSING)
    return True if v is MISSING else v


def _name_matches(pattern, name: str, ptr: str) -> bool:
    try:
        return matches(parse_regex(pattern, search=True), name)
    except (RegexError, Unsupported, TypeError) as exc:
        raise SchemaError(f"patternProperties: cannot decide whether {name!r} matches {pattern!r}: {exc}",
                          pointer=ptr) from exc


VALIDATION_KEYWORDS = frozenset({
    "type", "enum", "const", "$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "properties",
    "required", "additionalProperties", "unevaluatedProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies", "items",
    "prefixItems", "additionalItems", "unevaluatedItems", "minItems", "maxItems", "uniqueItems", "contains",
    "minContains", "maxContains", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "$dynamicRef", "$recursiveRef", *INTERNAL})
"""Keywords that constrain instances (others are annotations or unknown)."""

_LOWER = ("minimum", "minLength", "minItems", "exclusiveMinimum", "minProperties", "minContains")
_UPPER = ("maximum", "maxLength", "maxItems", "exclusiveMaximum", "maxProperties", "maxContains")
_UNION = (ABSENT, NOT_ENUM, NOT_PATTERNS, NOT_FORMATS)


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
    deferred = {}
    for key, bv in b.items():
        if key not in out:
            out[key] = bv
            continue
        av = out[key]
        if (key in ignored or key not in VALIDATION_KEYWORDS
                or key in ("properties", "additionalProperties", "prefixItems", "items")):
            continue  # annotations, unknown keywords: first wins; structure: below
        if _eq_raw(av, bv) and key not in ("anyOf",):
            continue
        if key == "type":
            out[key] = _merge_types(av, bv, ptr)
        elif key == "required":
            out[key] = list(dict.fromkeys([*av, *bv]))
        elif key in _LOWER and _num(av) and _num(bv):
            out[key] = max(av, bv)
        elif key in _UPPER and _num(av) and _num(bv):
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
            out[key] = product(av, bv, ptr, ignored)
        elif key == "allOf" and isinstance(av, list) and isinstance(bv, list):
            out[key] = [*av, *bv]
        elif key in _UNION and isinstance(av, list) and isinstance(bv, list):
            out[key] = [*av, *(v for v in bv if not any(_eq(v, w) for w in av))]
        elif key == PROPS and isinstance(av, dict) and isinstance(bv, dict):
            out[key] = {n: conj(av[n], bv[n], ptr, ignored) if n in av and n in bv else av.get(n, bv.get(n))
                        for n in dict.fromkeys([*av, *bv])}
        elif key == "propertyNames":
            out[key] = conj(av, bv, f"{ptr}/{key}", ignored)
        elif key == "uniqueItems" and isinstance(av, bool) and isinstance(bv, bool):
            out[key] = av or bv
        elif key == "multipleOf" and _num(av) and _num(bv) and float(av).is_integer() and float(bv).is_integer():
            out[key] = math.lcm(int(av), int(bv))
        elif key == "patternProperties" and isinstance(av, dict) and isinstance(bv, dict):
            out[key] = {p: conj(av[p], bv[p], ptr, ignored) if p in av and p in bv else av.get(p, bv.get(p))
                        for p in dict.fromkeys([*av, *bv])}
        elif key in DEFERRED or key == "$ref":
            deferred[key] = bv
        else:
            raise SchemaError(f"allOf: cannot combine differing {key!r} values", pointer=ptr)
    _check_patterns(a, b, ptr)
    if deferred:
        if "if" in deferred or "then" in deferred or "else" in deferred:
            for k in ("if", "then", "else"):
                if k in b:
                    deferred[k] = b[k]
        out["allOf"] = [*out.get("allOf", []), deferred]
    _merge_structure(out, a, b, "properties", "additionalProperties", ptr, ignored)
    _merge_items(out, a, b, ptr, ignored)
    return out


def _check_patterns(a: dict, b: dict, ptr: str) -> None:
    """patternProperties of one side next to a constraining additionalProperties
    of the other cannot be merged exactly (keys matching the pattern would need
    both)."""
    for x, y in ((a, b), (b, a)):
        pats = x.get("patternProperties")
        extra = y.get("additionalProperties", MISSING)
        if isinstance(pats, dict) and pats and extra is not MISSING and extra is not True and extra != {}:
            if any(p not in (y.get("patternProperties") or {}) for p in pats):
                raise SchemaError("allOf: patternProperties of one schema next to additionalProperties of "
                                  "another cannot be combined yet", pointer=ptr)


def product(av: list, bv: list, ptr: str, ignored: frozenset) -> list:
    """The pairwise conjunctions of two ``anyOf`` lists, without the
    contradictory ones (:func:`trivially_unsat`).

    Raises
    ------
    SchemaError
        More than :data:`MAX_ANYOF_PRODUCT` remain.
    """
    out = []
    for x in av:
        for y in bv:
            z = conj(x, y, ptr, ignored)
            if not trivially_unsat(z):
                out.append(z)
                if len(out) > MAX_ANYOF_PRODUCT:
                    raise SchemaError(f"allOf of anyOf lists expands to more than {MAX_ANYOF_PRODUCT} "
                                      "alternatives", pointer=ptr)
    return out or [False]


def trivially_unsat(schema, depth: int = 0) -> bool:
    """Whether ``schema`` obviously admits no value (a cheap, incomplete check
    used to prune ``anyOf`` products)."""
    if schema is False:
        return True
    if not isinstance(schema, dict) or depth > 8:
        return False
    if schema.get("enum") == [] or schema.get("type") == []:
        return True
    if NOT_ENUM in schema and ("const" in schema or isinstance(schema.get("enum"), list)):
        values = [schema["const"]] if "const" in schema else schema["enum"]
        if all(any(_eq(v, w) for w in schema[NOT_ENUM]) for v in values):
            return True
    required = schema.get("required")
    if isinstance(required, list) and required:
        absent = schema.get(ABSENT) or []
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        extra = schema.get(PROPS) if isinstance(schema.get(PROPS), dict) else {}
        for name in required:
            if name in absent:
                return True
            for src in (props, extra):
                if name in src and trivially_unsat(src[name], depth + 1):
                    return True
    return False


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
        p = f"{ptr}/{props_key}/{escape_pointer_token(name)}"
        sa = pa[name] if name in pa else _side(a, extra_key, name, p)
        sb = pb[name] if name in pb else _side(b, extra_key, name, p)
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
