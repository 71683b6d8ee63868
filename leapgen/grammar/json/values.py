"""Fixed JSON values (``const``, ``enum``) as byte-level IR, and the small
value checks used to filter ``enum`` members against sibling keywords.

A value is matched as its JSON text: ``true``/``false``/``null``, numbers as
``json.dumps`` writes them (``1``, ``1.5``, ``1e+20``; ``1`` and ``1.0`` are
different spellings, each accepted only as written in the schema), strings as
``json.dumps(value, ensure_ascii=False)``, arrays and objects in the layout's
whitespace with object keys in the order the schema writes them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from decimal import Decimal

from .. import ir
from ..ir import Node
from .layout import Layout, container
from .literal_sets import literal_trie


def json_type(value) -> str:
    """The JSON type name of a Python JSON value (``"integer"`` for ints only).

    Raises
    ------
    ValueError
        If ``value`` is not a JSON value.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a JSON number")
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise ValueError(f"{type(value).__name__} {value!r} is not a JSON value")


def check_json_value(value) -> None:
    """Raise ValueError unless ``value`` (recursively) is a JSON value."""
    t = json_type(value)
    if t == "array":
        for x in value:
            check_json_value(x)
    elif t == "object":
        for k, x in value.items():
            if not isinstance(k, str):
                raise ValueError(f"object key {k!r} is not a string")
            check_json_value(x)


def has_type(value, name: str) -> bool:
    """Whether ``value`` is an instance of JSON Schema type ``name``."""
    t = json_type(value)
    if name == "number":
        return t in ("integer", "number")
    if name == "integer":
        return t == "integer" or (t == "number" and float(value).is_integer())
    return t == name


def json_equal(a, b) -> bool:
    """JSON equality: numbers by value (``1 == 1.0``), booleans apart from numbers."""
    ta, tb = json_type(a), json_type(b)
    if ta in ("integer", "number") and tb in ("integer", "number"):
        return a == b
    if ta != tb:
        return False
    if ta == "array":
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if ta == "object":
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def scalar_text(value) -> str:
    """The JSON text of a scalar value."""
    t = json_type(value)
    if t == "string":
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


def value_node(layout: Layout, value, depth: int) -> Node:
    """The JSON text of ``value`` at nesting ``depth`` in ``layout``.

    Raises
    ------
    ValueError
        If ``value`` is not a JSON value (non-finite float, non-str key, ...).
    """
    t = json_type(value)
    if t == "array":
        if not value:
            return layout.empty("[]")
        items = [value_node(layout, v, depth + 1) for v in value]
        comma = layout.comma(depth)
        return container(layout, "[]", depth, items[0], ir.seq(*(ir.seq(comma, i) for i in items[1:])),
                         empty_ok=False)
    if t == "object":
        if not value:
            return layout.empty("{}")
        members = []
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"object key {k!r} is not a string")
            members.append(ir.seq(ir.lit(json.dumps(k, ensure_ascii=False)), layout.colon(),
                                  value_node(layout, v, depth + 1)))
        comma = layout.comma(depth)
        return container(layout, "{}", depth, members[0], ir.seq(*(ir.seq(comma, m) for m in members[1:])),
                         empty_ok=False)
    return ir.lit(scalar_text(value))


def values_node(layout: Layout, values: Sequence, depth: int) -> Node:
    """The union of the JSON texts of ``values``; scalars share one prefix tree."""
    texts = []
    others = []
    for v in values:
        if json_type(v) in ("array", "object"):
            others.append(value_node(layout, v, depth))
        else:
            texts.append(scalar_text(v).encode("utf-8"))
    parts = [literal_trie(texts)] if texts else []
    return ir.alt(*parts, *others)


def canon_key(value):
    """A hashable key equal for JSON-equal values (``1`` and ``1.0`` share one)."""
    t = json_type(value)
    if t in ("integer", "number"):
        return ("n", value if t == "integer" else Decimal(repr(value)))
    if t == "array":
        return ("a", tuple(canon_key(v) for v in value))
    if t == "object":
        return ("o", frozenset((k, canon_key(v)) for k, v in value.items()))
    return (t[0], value)


def dedupe(values: Sequence) -> list:
    """Drop JSON-equal repeats (keeping the first spelling)."""
    seen = set()
    out = []
    for v in values:
        k = canon_key(v)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


_CHECKABLE = {"type", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
              "exclusiveMaximum", "minItems", "maxItems", "const", "enum", "$lg:notEnum"}


def check(schema: dict, value, ignored: frozenset) -> bool | None:
    """Whether ``value`` satisfies ``schema``'s simple keywords.

    Returns ``None`` when a keyword other than the simple ones and the
    ``ignored`` (annotation) keywords is present: the caller must then
    intersect with the compiled schema.
    """
    verdict = True
    for key, arg in schema.items():
        if key in ignored:
            continue
        if key not in _CHECKABLE:
            verdict = None
            continue
        t = json_type(value)
        if key == "type":
            names = [arg] if isinstance(arg, str) else list(arg)
            if not any(has_type(value, n) for n in names):
                return False
        elif key in ("minLength", "maxLength") and t == "string":
            n = len(value)
            if (key == "minLength" and n < arg) or (key == "maxLength" and n > arg):
                return False
        elif key in ("minItems", "maxItems") and t == "array":
            n = len(value)
            if (key == "minItems" and n < arg) or (key == "maxItems" and n > arg):
                return False
        elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") and t in ("integer", "number"):
            if isinstance(arg, bool):  # draft-04 boolean form, handled with minimum/maximum
                if arg:
                    verdict = None
                continue
            v, a = Decimal(repr(value)) if t == "number" else Decimal(value), Decimal(repr(arg))
            if ((key == "minimum" and v < a) or (key == "maximum" and v > a)
                    or (key == "exclusiveMinimum" and v <= a) or (key == "exclusiveMaximum" and v >= a)):
                return False
        elif key == "const":
            if not json_equal(value, arg):
                return False
        elif key == "enum":
            if not any(json_equal(value, a) for a in arg):
                return False
        elif key == "$lg:notEnum":  # merge.NOT_ENUM
            if any(json_equal(value, a) for a in arg):
                return False
    return verdict
