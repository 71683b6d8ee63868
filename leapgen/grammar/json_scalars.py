"""Scalar types for the JSON Schema front-end: numbers, integers and strings
with their keywords. ``c`` is the running compiler
(:class:`leapgen.grammar.json_schema._Compiler`): mode, warnings, caches.
"""

from __future__ import annotations

import math
from decimal import Decimal

from leapgen.errors import SchemaError

from . import ir
from .ir import Node
from .json_containers import count_arg
from .json_formats import FORMATS
from .json_merge import Patterns, join_pointer
from .json_numbers import int_range, number_range
from .json_strings import PatternEncodeError, json_encode_regex, quoted, string_content


def compile_number(c, schema: dict, ptr: str, depth: int) -> Node:
    """``type: number`` with its bounds (:func:`.json_numbers.number_range`)."""
    return number_range(*bounds(schema, ptr))


def bounds(schema: dict, ptr: str):
    """(lo, lo_exclusive, hi, hi_exclusive) as Decimals (None: unbounded)."""
    lo = hi = None
    lo_x = hi_x = False
    for key, is_lo in (("minimum", True), ("maximum", False), ("exclusiveMinimum", True),
                       ("exclusiveMaximum", False)):
        if key not in schema:
            continue
        arg = schema[key]
        if isinstance(arg, bool):
            if not key.startswith("exclusive"):
                raise SchemaError(f"{key} must be a number", pointer=join_pointer(ptr, key))
            continue
        if not isinstance(arg, (int, float)) or (isinstance(arg, float) and not math.isfinite(arg)):
            raise SchemaError(f"{key} must be a finite number", pointer=join_pointer(ptr, key))
        d = Decimal(arg) if isinstance(arg, int) else Decimal(repr(arg))
        excl = key.startswith("exclusive") or schema.get("exclusive" + key[0].upper() + key[1:]) is True
        if is_lo and (lo is None or d > lo or (d == lo and excl)):
            lo, lo_x = d, excl
        if not is_lo and (hi is None or d < hi or (d == hi and excl)):
            hi, hi_x = d, excl
    return lo, lo_x, hi, hi_x


def compile_integer(c, schema: dict, ptr: str, depth: int) -> Node:
    """``type: integer`` with its bounds (an exact range)."""
    lo, lo_x, hi, hi_x = bounds(schema, ptr)
    ilo = ihi = None
    if lo is not None:
        ilo = int(lo.to_integral_value(rounding="ROUND_FLOOR")) + 1 if lo_x else int(
            lo.to_integral_value(rounding="ROUND_CEILING"))
    if hi is not None:
        ihi = int(hi.to_integral_value(rounding="ROUND_CEILING")) - 1 if hi_x else int(
            hi.to_integral_value(rounding="ROUND_FLOOR"))
    return int_range(ilo, ihi)


def compile_string(c, schema: dict, ptr: str, depth: int) -> Node:
    """``type: string`` with ``minLength``/``maxLength``/``pattern``/``format`` (intersected)."""
    lo = count_arg(schema, "minLength", ptr) or 0
    hi = count_arg(schema, "maxLength", ptr)
    if hi is not None and lo > hi:
        return ir.NOTHING
    parts = []
    if "pattern" in schema:
        pats = schema["pattern"]
        for p in (pats if isinstance(pats, Patterns) else [pats]):
            parts.append(compile_pattern(c, p, join_pointer(ptr, "pattern")))
    fmt = schema.get("format")
    if fmt is not None:
        builder = FORMATS.get(fmt) if isinstance(fmt, str) else None
        if builder is not None:
            parts.append(json_encode_regex(builder(), c._pattern_memo))
        elif c.strict:
            raise SchemaError(f"format {fmt!r} is not supported (supported: {', '.join(FORMATS)}); "
                              "pass strict_mode=False to ignore it", pointer=join_pointer(ptr, "format"))
        else:
            c.warn(join_pointer(ptr, "format"), f"format {fmt!r} is not supported and is ignored")
    if lo or hi is not None or not parts:
        parts.append(string_content(lo, hi))
    return quoted(ir.intersect(*parts))


def compile_pattern(c, pattern, ptr: str) -> Node:
    """A ``pattern`` (unanchored ECMAScript search) as JSON string content."""
    if not isinstance(pattern, str):
        raise SchemaError("pattern must be a string", pointer=ptr)
    from leapgen.errors import RegexError
    from leapgen.grammar.regex import parse_regex
    try:
        node = parse_regex(pattern, search=True)
    except RegexError as exc:
        raise SchemaError(f"pattern {pattern!r} is not supported: {exc}", pointer=ptr) from exc
    try:
        return json_encode_regex(node, c._pattern_memo)
    except PatternEncodeError as exc:
        raise SchemaError(f"pattern {pattern!r}: {exc}", pointer=ptr) from exc

# -- containers ----------------------------------------------------------
