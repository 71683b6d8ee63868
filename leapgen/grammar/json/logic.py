"""Logic keywords of the JSON Schema front-end, rewritten into ``allOf`` /
``anyOf`` of schemas the rest of the front-end compiles exactly.

* ``not: S`` -> :func:`negate` (a schema for the complement of ``S`` within
  JSON values), merged into the parent with ``allOf``.
* ``if: I, then: T, else: E`` -> ``anyOf: [allOf [I, T], allOf [not I, E]]``
  (a missing ``then``/``else`` is ``true``; the ``if`` schema stays in the
  first branch so that ``unevaluatedProperties`` sees its annotations).
* ``dependentRequired: {a: [b...]}`` (and draft-07 ``dependencies`` with an
  array) -> ``anyOf: [a absent, required [a, b...]]``; ``dependentSchemas:
  {a: S}`` (``dependencies`` with a schema) -> ``anyOf: [a absent,
  allOf [required [a], S]]``; when ``a`` is required already, just the
  right-hand side.

The branches of each ``anyOf`` are disjoint, so ``oneOf`` semantics would be
the same. Several of them in one schema are multiplied out by
:func:`leapgen.grammar.json.merge.merge` (contradictory combinations are
pruned, see :func:`.merge.trivially_unsat`).

Negation works keyword by keyword: a schema is the conjunction of its
keywords, so its complement is the union of each keyword's complement
(``{type: string, minLength: 3}`` -> ``anyOf: [{type: [every other type]},
{type: string, maxLength: 2}]``). Each keyword's complement is a schema,
using a few internal keywords (prefix ``$lg:``, see :data:`INTERNAL`) where
JSON Schema has no positive form. ``items`` becomes ``contains`` of its complement and
``contains`` becomes ``items``. Keywords whose complement is not expressible
this way (``additionalProperties``, ``patternProperties``, ``propertyNames``,
``multipleOf``, ``uniqueItems: true``, ``items`` next to ``prefixItems``,
``min/maxContains``, overlapping ``oneOf``, enum members that are arrays or
objects) raise :class:`SchemaError` naming the keyword.
"""

from __future__ import annotations

from leapgen.errors import SchemaError

from .merge import (ABSENT, BLIND_ITEMS, NON_INTEGER, NOT_ENUM, NOT_FORMATS, NOT_PATTERNS, PROPS, Patterns,
                    _merge_types, join_pointer, trivially_unsat)
from .values import json_type

ALL_TYPES = ("null", "boolean", "object", "array", "number", "string")
LOGIC_KEYWORDS = ("not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies")
MAX_NEGATION_DEPTH = 32

_FAMILY = {"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
           "minItems": "array", "maxItems": "array", "minProperties": "object", "maxProperties": "object",
           "minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number"}
_OPPOSITE = {"minLength": ("maxLength", -1), "maxLength": ("minLength", 1), "minItems": ("maxItems", -1),
             "maxItems": ("minItems", 1), "minProperties": ("maxProperties", -1),
             "maxProperties": ("minProperties", 1)}
_NUMBER_OPPOSITE = {"minimum": "exclusiveMaximum", "maximum": "exclusiveMinimum", "exclusiveMinimum": "maximum",
                    "exclusiveMaximum": "minimum"}
_TRIVIAL = {"uniqueItems": False, "additionalProperties": True, "items": True, "additionalItems": True,
            "unevaluatedItems": True, "unevaluatedProperties": True, "propertyNames": True, "contains": None,
            "minContains": None, "maxContains": None, "multipleOf": None, "patternProperties": {}}


def any_of(parts: list):
    """``anyOf`` of schemas, simplified (``[]`` -> false, one part -> itself)."""
    parts = [p for p in parts if p is not False]
    if any(p is True or p == {} for p in parts):
        return True
    if not parts:
        return False
    if len(parts) == 1:
        return parts[0]
    return {"anyOf": parts}


def all_of(parts: list):
    """``allOf`` of schemas, simplified."""
    parts = [p for p in parts if p is not True and p != {}]
    if any(p is False for p in parts):
        return False
    if not parts:
        return True
    if len(parts) == 1:
        return parts[0]
    return {"allOf": parts}


def negate_type(types: list) -> object:
    """The complement of ``type: types`` (``integer`` alone leaves the non-integer numbers)."""
    names = set(types)
    rest = [t for t in ALL_TYPES if t not in names and not (t == "number" and "integer" in names)]
    parts = [{"type": rest}] if rest else []
    if "integer" in names and "number" not in names:
        parts.append({"type": "number", NON_INTEGER: True})
    return any_of(parts)


def negate(c, schema, ptr: str, depth: int = 0):
    """A schema accepting exactly the JSON values ``schema`` rejects.

    Parameters
    ----------
    c : leapgen.grammar.json.schema._Compiler
        The running compiler (``$ref`` resolution, mode, type inference).
    schema : dict or bool
    ptr : str
        JSON pointer of ``schema`` (for errors and ``$ref`` base URIs).

    Raises
    ------
    SchemaError
        A keyword whose complement leapgen cannot express (see the module
        docstring), or recursion through ``$ref``.
    """
    if depth > MAX_NEGATION_DEPTH:
        raise SchemaError("not: the negated schema nests too deep (or is recursive)", pointer=ptr)
    if schema is True:
        return False
    if schema is False:
        return True
    if not isinstance(schema, dict):
        raise SchemaError("a schema must be an object or a boolean", pointer=ptr)
    parts = []
    types = schema.get("type")
    if types is None and c.strict:
        inferred = c._types(schema, ptr)
        if len(inferred) == 1:
            types = inferred
    if types is not None:
        parts.append(negate_type([types] if isinstance(types, str) else list(types)))
    for key, arg in schema.items():
        if key == "type" or (key in c.ignored_keywords and key not in ("$ref",)):
            continue
        parts.append(_negate_keyword(c, key, arg, schema, join_pointer(ptr, key), ptr, depth))
    return any_of(parts)


def _negate_keyword(c, key: str, arg, schema: dict, kptr: str, ptr: str, depth: int):
    """The complement of one keyword (values of other types satisfy it)."""
    if key in _TRIVIAL and arg == _TRIVIAL[key] and type(arg) is type(_TRIVIAL[key]):
        return False
    if key in ("then", "else"):
        return False  # handled with "if"
    if key == "$ref":
        target, tptr = c.refs.resolve(arg, kptr, ptr)
        return negate(c, target, tptr, depth + 1)
    if key == "not":
        return blind(c, arg, kptr, depth + 1)
    if key == "allOf":
        return any_of([negate(c, b, join_pointer(kptr, i), depth + 1) for i, b in enumerate(_list(arg, kptr))])
    if key == "anyOf" or (key == "oneOf" and c.provably_disjoint(_list(arg, kptr), ptr)):
        return all_of([negate(c, b, join_pointer(kptr, i), depth + 1) for i, b in enumerate(_list(arg, kptr))])
    if key == "if":
        then, els = schema.get("then", True), schema.get("else", True)
        n_then, n_else = negate(c, then, ptr + "/then", depth + 1), negate(c, els, ptr + "/else", depth + 1)
        n_if = negate(c, arg, kptr, depth + 1) if n_else is not False else False
        return any_of([all_of([blind(c, arg, kptr, depth + 1), n_then]), all_of([n_if, n_else])])
    if key in ("enum", "const"):
        values = _list(arg, kptr) if key == "enum" else [arg]
        for v in values:
            if json_type(v) in ("array", "object"):
                raise SchemaError(f"not: {key} with an array or object member cannot be negated yet", pointer=kptr)
        return {NOT_ENUM: list(values)}
    if key == NOT_ENUM:
        return {"enum": list(arg)}
    if key == "required":
        return any_of([{"type": "object", ABSENT: [n]} for n in dict.fromkeys(_list(arg, kptr))])
    if key == ABSENT:
        return any_of([{"type": "object", "required": [n]} for n in arg])
    if key in ("properties", PROPS):
        if not isinstance(arg, dict):
            raise SchemaError(f"{key} must be an object", pointer=kptr)
        parts = []
        for name, sub in arg.items():
            neg = negate(c, sub, join_pointer(kptr, name), depth + 1)
            if neg is not False:
                parts.append({"type": "object", "required": [name], PROPS: {name: neg}})
        return any_of(parts)
    if key in _OPPOSITE:
        n = _count(arg, kptr)
        other, step = _OPPOSITE[key]
        if n + step < 0:
            return False
        return {"type": _FAMILY[key], other: n + step}
    if key in _NUMBER_OPPOSITE:
        if isinstance(arg, bool):
            return False  # draft-04 flag: read with minimum/maximum
        if not isinstance(arg, (int, float)):
            raise SchemaError(f"{key} must be a number", pointer=kptr)
        other = _NUMBER_OPPOSITE[key]
        if key in ("minimum", "maximum") and schema.get("exclusive" + key[0].upper() + key[1:]) is True:
            other = "maximum" if key == "minimum" else "minimum"
        return {"type": "number", other: arg}
    if key == "pattern":
        pats = list(arg) if isinstance(arg, Patterns) else [arg]
        return any_of([{"type": "string", NOT_PATTERNS: [p]} for p in pats])
    if key == NOT_PATTERNS:
        return any_of([{"type": "string", "pattern": p} for p in arg])
    if key == "format":
        if not c.format_asserted(arg):
            return False
        return {"type": "string", NOT_FORMATS: [arg]}
    if key == NOT_FORMATS:
        return any_of([{"type": "string", "format": f} for f in arg])
    if key == NON_INTEGER:
        return {"type": [t for t in ALL_TYPES if t != "number"] + ["integer"]}
    if key == "items" and isinstance(arg, (dict, bool)) and "prefixItems" not in schema:
        # some item violates items: contains (not items)
        neg = negate(c, arg, kptr, depth + 1)
        return False if neg is False else {"type": "array", "contains": neg, BLIND_ITEMS: True}
    if key == "prefixItems" and isinstance(arg, list):
        parts = []
        for i, sub in enumerate(arg):
            neg = negate(c, sub, join_pointer(kptr, i), depth + 1)
            if neg is not False:
                parts.append({"type": "array", "minItems": i + 1, "prefixItems": [True] * i + [neg], "items": True,
                              BLIND_ITEMS: True})
        return any_of(parts)
    if key == "contains" and "minContains" not in schema and "maxContains" not in schema:
        neg = negate(c, arg, kptr, depth + 1)
        return {"type": "array", "items": neg, BLIND_ITEMS: True}
    if key in ("dependentRequired", "dependencies", "dependentSchemas"):
        if not isinstance(arg, dict):
            raise SchemaError(f"{key} must be an object", pointer=kptr)
        parts = []
        for name, dep in arg.items():
            if isinstance(dep, list):
                parts.append({"type": "object", "required": [name],
                              **_some_absent([d for d in dep if d != name])})
            else:
                neg = negate(c, dep, join_pointer(kptr, name), depth + 1)
                if neg is not False:
                    parts.append({"type": "object", "required": [name], "allOf": [neg]})
        return any_of([p for p in parts if p.get("anyOf") != []])
    if key in c.validation_keywords:
        raise SchemaError(f"not: the keyword {key!r} cannot be negated yet", pointer=kptr)
    return False  # unknown keyword: no constraint, so no complement


_BLIND_RISKY = ("prefixItems", "items", "additionalItems", "contains", "patternProperties", "unevaluatedItems",
                "unevaluatedProperties", "$dynamicRef")


def blind(c, schema, ptr: str, depth: int = 0):
    """``schema`` as it constrains a value from inside a ``not``, where it
    evaluates no property for a parent's ``unevaluatedProperties``:
    ``properties`` become ``$lg:props`` (same constraint, no evaluation).

    Raises
    ------
    SchemaError
        Keywords whose evaluation cannot be hidden that way (``items``,
        ``patternProperties``, a non-false ``additionalProperties``, ...).
    """
    if not isinstance(schema, dict):
        return schema
    if depth > MAX_NEGATION_DEPTH:
        raise SchemaError("not: the negated schema nests too deep (or is recursive)", pointer=ptr)
    out = {}
    parts = []
    for key, arg in schema.items():
        kptr = join_pointer(ptr, key)
        if key in _BLIND_RISKY or (key == "additionalProperties" and arg is not False):
            raise SchemaError(f"not: {key!r} inside a double negation or a negated if is not supported yet",
                              pointer=kptr)
        if key == "properties" and isinstance(arg, dict):
            parts.append({PROPS: arg})
        elif key == "$ref":
            target, tptr = c.refs.resolve(arg, kptr, ptr)
            parts.append(blind(c, target, tptr, depth + 1))
        elif key in ("allOf", "anyOf", "oneOf") and isinstance(arg, list):
            out[key] = [blind(c, b, join_pointer(kptr, i), depth + 1) for i, b in enumerate(arg)]
        elif key in ("if", "then", "else"):
            out[key] = blind(c, arg, kptr, depth + 1)
        elif key == "dependentSchemas" and isinstance(arg, dict):
            out[key] = {n: blind(c, v, join_pointer(kptr, n), depth + 1) for n, v in arg.items()}
        else:
            out[key] = arg
    if parts:
        out["allOf"] = [*out.get("allOf", []), *parts]
    return out


def _merged(c, parts: list, ptr: str):
    """The conjunction of ``parts``, merged into one schema when that is
    possible (so that contradictions show, see
    :func:`.merge.trivially_unsat`), else ``allOf``."""
    try:
        out = True
        for p in parts:
            out = c._conj(out, p, ptr) if out is not True else c.normalize(p, ptr)
        return c.keep(out) if isinstance(out, dict) else out
    except SchemaError:
        return all_of(parts)


def _fitting(branches: list, types) -> list:
    """Drop the branches whose ``type`` cannot meet the parent's ``types``."""
    if types is None:
        return branches
    out = []
    for b in branches:
        if isinstance(b, dict) and "type" in b:
            try:
                if not _merge_types(types, b["type"], ""):
                    continue
            except SchemaError:
                pass
        if not trivially_unsat(b):
            out.append(b)
    return out


def _some_absent(names: list) -> dict:
    if not names:
        return {"anyOf": []}
    if len(names) == 1:
        return {ABSENT: names}
    return {"anyOf": [{ABSENT: [n]} for n in names]}


def _list(arg, ptr: str) -> list:
    if not isinstance(arg, list):
        raise SchemaError("expected an array", pointer=ptr)
    return arg


def _count(arg, ptr: str) -> int:
    if isinstance(arg, float) and arg.is_integer():
        arg = int(arg)
    if isinstance(arg, bool) or not isinstance(arg, int) or arg < 0:
        raise SchemaError("expected a non-negative integer", pointer=ptr)
    return arg


def rewrite(c, schema: dict, ptr: str) -> dict:
    """``schema`` with ``not``, ``if``/``then``/``else`` and the dependency
    keywords replaced by ``allOf`` members (a new dict; ``schema`` itself when
    there is nothing to rewrite)."""
    if not any(k in schema for k in LOGIC_KEYWORDS):
        return schema
    for key in ("if", "then", "else"):  # checked here: the rewrite below would report a pointer into itself
        if key in schema and not isinstance(schema[key], (dict, bool)):
            raise SchemaError(f"{key} must be a schema (an object or a boolean), got {type(schema[key]).__name__}",
                              pointer=join_pointer(ptr, key))
    extra = []
    if "not" in schema:
        extra.append(negate(c, schema["not"], join_pointer(ptr, "not")))
    if "if" in schema:
        cond, then, els = schema["if"], schema.get("then", True), schema.get("else", True)
        iptr = join_pointer(ptr, "if")
        unevaluated = "unevaluatedProperties" in schema or "unevaluatedItems" in schema
        if then is not True or els is not True or unevaluated:
            # the if schema stays in its branch: its annotations count for unevaluated*
            try:
                n_cond = negate(c, cond, iptr)
            except SchemaError:
                if then is not True or els is not True:
                    raise
            else:
                branches = [_merged(c, [cond, then], iptr)]
                for part in (n_cond["anyOf"] if isinstance(n_cond, dict) and list(n_cond) == ["anyOf"]
                             else [n_cond]):
                    branches.append(_merged(c, [part, els], iptr))
                extra.append(any_of(_fitting(branches, schema.get("type"))))
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    for key in ("dependentRequired", "dependencies", "dependentSchemas"):
        if key not in schema:
            continue
        arg = schema[key]
        if not isinstance(arg, dict):
            raise SchemaError(f"{key} must be an object", pointer=join_pointer(ptr, key))
        for name, dep in arg.items():
            dptr = join_pointer(ptr, key, name)
            if isinstance(dep, list):
                if not all(isinstance(d, str) for d in dep):
                    raise SchemaError(f"{key} arrays must hold property names", pointer=dptr)
                if key == "dependentSchemas":
                    raise SchemaError("dependentSchemas values must be schemas", pointer=dptr)
                need = [d for d in dict.fromkeys(dep) if d not in required and d != name]
                then = {"required": need} if need else True
            elif key == "dependentRequired":
                raise SchemaError("dependentRequired values must be arrays of names", pointer=dptr)
            elif not isinstance(dep, (dict, bool)):
                what = "schemas (objects or booleans)" + (" or arrays of names" if key == "dependencies" else "")
                raise SchemaError(f"{key} values must be {what}, got {type(dep).__name__}", pointer=dptr)
            else:
                then = dep
            if then is True:
                continue
            if name in required:
                extra.append(then)
            else:
                extra.append(any_of([{ABSENT: [name]}, all_of([{"required": [name]}, then])]))
    out = {k: v for k, v in schema.items() if k not in LOGIC_KEYWORDS}
    extra = [e for e in extra if e is not True]
    if any(e is False for e in extra):
        return {**out, "enum": []}
    if extra:
        out["allOf"] = [*out.get("allOf", []), *extra]
    return out
