"""Scalar types for the JSON Schema front-end: numbers, integers and strings
with their keywords. ``c`` is the running compiler
(:class:`leapgen.grammar.json.schema._Compiler`): mode, warnings, caches.
"""

from __future__ import annotations

import functools
import json
import math
from decimal import Decimal

from leapgen.errors import RegexError, SchemaError

from .. import ir
from ..ir import Node
from ..regex import parse_regex
from .containers import count_arg
from .formats import FORMATS, NARROWED_FORMATS
from .lengths import MAX_EXACT_LENGTH, blocked_content, capped_lengths, counted_content
from .merge import NON_INTEGER, NOT_FORMATS, NOT_PATTERNS, Patterns, join_pointer
from .numbers import NO_EXPONENT, NON_INTEGER_NUMBER, decimal_spellings, int_range, multiple_of, number_range
from .strings import PatternEncodeError, json_encode_regex, quoted, spell_any, string_content
from .values import json_type

CANONICAL_CONTENT = ir.star(json_encode_regex(ir.ANY_CHAR))


def compile_number(c, schema: dict, ptr: str, depth: int) -> Node:
    """``type: number`` with its bounds (:func:`.numbers.number_range`),
    ``multipleOf`` and ``$lg:nonInteger``."""
    node = number_range(*bounds(schema, ptr))
    if "multipleOf" in schema:
        node = ir.intersect(node, multiple_of(schema["multipleOf"], integer=False,
                                              ptr=join_pointer(ptr, "multipleOf")))
    if schema.get(NON_INTEGER):
        node = ir.intersect(node, NON_INTEGER_NUMBER)
    return node


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
    if schema.get(NON_INTEGER):
        return ir.NOTHING
    node = int_range(ilo, ihi)
    if "multipleOf" in schema:
        node = ir.intersect(node, multiple_of(schema["multipleOf"], integer=True, lo=ilo, hi=ihi,
                                              ptr=join_pointer(ptr, "multipleOf")))
    return node


def exclude_values(c, node: Node, type_name: str, values: list, ptr: str) -> Node:
    """``node`` (the IR of one JSON type) minus the spellings of ``values``
    (``$lg:notEnum``). Numbers then lose their exponent spellings (the
    spellings of one value with an exponent are not a regular language)."""
    mine = [v for v in values if json_type(v) == type_name or (type_name == "number" and json_type(v) == "integer")
            or (type_name == "integer" and json_type(v) == "number" and float(v).is_integer())]
    if not mine:
        return node
    if type_name == "string":
        return ir.diff(node, ir.alt(*(quoted(spell_any(v)) for v in mine)))
    if type_name in ("null", "boolean"):
        return ir.diff(node, ir.alt(*(ir.lit(json.dumps(v)) for v in mine)))
    if type_name == "integer":
        return ir.diff(node, ir.alt(*(decimal_spellings(int(v), integer=True) for v in mine)))
    if type_name == "number":
        return ir.diff(ir.intersect(node, NO_EXPONENT), ir.alt(*(decimal_spellings(v) for v in mine)))
    return node


def compile_string(c, schema: dict, ptr: str, depth: int) -> Node:
    """``type: string`` with ``minLength``/``maxLength``/``pattern``/``format``
    and their negations (all intersected).

    A length bound above :data:`.lengths.MAX_EXACT_LENGTH` is exact
    (:func:`.lengths.blocked_content`) when the string has no other
    constraint and rules are allowed here; otherwise a larger ``minLength`` is
    enforced as that bound and a larger ``maxLength`` not at all (warnings).
    """
    lo = count_arg(schema, "minLength", ptr) or 0
    hi = count_arg(schema, "maxLength", ptr)
    if hi is not None and lo > hi:
        return ir.NOTHING
    parts = _content_constraints(c, schema, ptr)
    counted = None if parts else counted_content(c, lo, hi)
    run = _class_run(schema) if parts and c.count_lengths else None
    if run is not None:  # ``^[...]{m,n}$`` beside the lengths: one class counted, no intersection
        item, run_lo, run_hi = run
        both_lo, both_hi = max(lo, run_lo), (run_hi if hi is None else hi if run_hi is None else min(hi, run_hi))
        if both_hi is None or both_lo <= both_hi:
            counted = counted_content(c, both_lo, both_hi, item, ptr)
    if counted is not None:
        return quoted(counted)
    if max(lo, hi or 0) > MAX_EXACT_LENGTH:
        if not parts and c.recursion_by_rules:
            return quoted(blocked_content(c, lo, hi))
        lo, hi = capped_lengths(c, lo, hi, ptr)
    if lo or hi is not None or not parts:
        parts.append(string_content(lo, hi))
    return quoted(ir.intersect(*parts))


def _class_run(schema: dict) -> tuple[Node, int, int | None] | None:
    """Where the string's one content constraint is a ``pattern`` matching whole strings of one
    character class (``^[a-z0-9-]+$``, ``^\\w{3,}$``): ``(item, lo, hi)``, the class's characters as
    JSON spells them and the pattern's own count bounds; else None."""
    pattern = schema.get("pattern")
    if not isinstance(pattern, str) or any(k in schema for k in ("format", NOT_PATTERNS, NOT_FORMATS)):
        return None
    return _pattern_class_run(pattern)


@functools.lru_cache(maxsize=1024)
def _pattern_class_run(pattern: str) -> tuple[Node, int, int | None] | None:
    node = _parse_pattern(pattern)  # already checked by _content_constraints
    if type(node) is not ir.Repeat or type(node.item) is not ir.CharSet:
        return None
    try:
        return json_encode_regex(node.item, {}), node.lo, node.hi
    except PatternEncodeError:
        return None


def _content_constraints(c, schema: dict, ptr: str) -> list:
    """The string contents ``pattern``, ``format`` and their negations allow (one node each)."""
    parts = []
    if "pattern" in schema:
        pats = schema["pattern"]
        for p in (pats if isinstance(pats, Patterns) else [pats]):
            parts.append(compile_pattern(c, p, join_pointer(ptr, "pattern")))
    fmt = schema.get("format")
    if fmt is not None:
        node = format_content(c, fmt, join_pointer(ptr, "format"))
        if node is not None:
            parts.append(node)
    excluded = [compile_pattern(c, p, join_pointer(ptr, NOT_PATTERNS)) for p in schema.get(NOT_PATTERNS) or []]
    for f in schema.get(NOT_FORMATS) or []:
        node = format_content(c, f, join_pointer(ptr, NOT_FORMATS))
        if node is not None:
            excluded.append(node)
        if f in NARROWED_FORMATS:
            c.warn(ptr, f"format {f!r} is compiled to a subset of its names (no xn-- A-labels, lengths by label "
                        "tiers), so its negation here also admits the names left out")
    if excluded:
        parts.append(ir.diff(CANONICAL_CONTENT, ir.alt(*excluded)))
    return parts


def format_content(c, fmt, ptr: str) -> Node | None:
    """The string content of a ``format`` (None: not asserted, see the module
    docstring of :mod:`.schema`)."""
    if isinstance(fmt, str) and fmt in FORMATS:
        return _format_content(fmt)
    if c.strict:
        raise SchemaError(f"format {fmt!r} is not supported (supported: {', '.join(FORMATS)}); "
                          "pass strict_mode=False to ignore it", pointer=ptr)
    if c.format_asserted(fmt):
        c.warn(ptr, f"format {fmt!r} is not supported and is ignored")
    return None


@functools.lru_cache(maxsize=None)  # one entry per supported format
def _format_content(fmt: str) -> Node:
    return json_encode_regex(FORMATS[fmt](), {})


def parse_pattern(pattern, ptr: str) -> Node:
    """A ``pattern`` as code-point regex IR (unanchored search)."""
    if not isinstance(pattern, str):
        raise SchemaError("pattern must be a string", pointer=ptr)
    try:
        return _parse_pattern(pattern)
    except RegexError as exc:
        raise SchemaError(f"pattern {pattern!r} is not supported: {exc}", pointer=ptr) from exc


def compile_pattern(c, pattern, ptr: str) -> Node:
    """A ``pattern`` (unanchored ECMAScript search) as JSON string content."""
    parse_pattern(pattern, ptr)  # malformed: SchemaError at ptr
    try:
        return _pattern_content(pattern)
    except PatternEncodeError as exc:
        raise SchemaError(f"pattern {pattern!r}: {exc}", pointer=ptr) from exc


# Patterns recur across schemas (and within one): parsed and JSON-encoded once per process (bounded;
# an error is raised again each time, not kept).
@functools.lru_cache(maxsize=1024)
def _parse_pattern(pattern: str) -> Node:
    return parse_regex(pattern, search=True)


@functools.lru_cache(maxsize=1024)
def _pattern_content(pattern: str) -> Node:
    # A DFA of its own (cached by value across compiles), embedded: an unanchored search (``.*NEW.*``, each
    # character also spelled as its escapes) run as an NFA inside the object's automaton kept hundreds of
    # NFA states alive at once, and the object's subset construction paid for all of them at every state.
    return ir.embed(json_encode_regex(_parse_pattern(pattern), {}))

# -- containers ----------------------------------------------------------
