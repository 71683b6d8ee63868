"""JSON string contents as byte-level IR: characters, escapes, length bounds,
``pattern`` re-encoding (literal tries: :mod:`.literal_sets`).

A JSON string (RFC 8259 section 7) is ``"`` + characters + ``"``; inside,
U+0000-U+001F, ``"`` and ``\\`` must be escaped, everything else (valid
UTF-8, surrogates excluded) may appear raw. Two families of spellings are used:

*Any spelling* (:data:`CHAR_ANY`, used for plain ``"type": "string"`` with or
without ``minLength``/``maxLength``): each character raw when JSON allows it,
or any escape JSON allows: ``\\" \\\\ \\/ \\b \\f \\n \\r \\t``, ``\\uXXXX``
(hex digits in either case) for any non-surrogate BMP code point, and a
surrogate-pair escape ``\\uD83D\\uDE00`` for a code point above U+FFFF (one
character). Lone surrogate escapes are rejected (they are not Unicode text).
A length counts characters (code points), whatever their spelling.

*Canonical spelling* (:func:`spell_char`, :func:`spell_ranges`, used for
``pattern``, ``format``): a character is raw when JSON allows it raw;
otherwise ``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t`` or ``\\u00XX`` (hex
digits in either case) for the other controls. ``\\/`` and ``\\uXXXX`` for
characters that may appear raw are not accepted there (``json.dumps(...,
ensure_ascii=False)`` never writes them), which keeps the text a model must
write forced where the schema forces it. ``const``/``enum`` strings are matched
exactly as ``json.dumps(value, ensure_ascii=False)`` writes them.
"""

from __future__ import annotations

import functools

from .. import ir
from ..ir import Node
from .literal_sets import digits_range

RAW_RANGES: tuple[tuple[int, int], ...] = ((0x20, 0x21), (0x23, 0x5B), (0x5D, ir.MAX_UNICODE))
"""Code points JSON allows raw inside a string."""

SHORT_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}

_ESCAPED = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]


def hex_digit(lo: int, hi: int) -> Node:
    """One hex digit with value in ``[lo, hi]``, either case."""
    return hex_digits(range(lo, hi + 1))


def hex_digits(values) -> Node:
    """One hex digit (either case) whose value is in ``values``."""
    rs = []
    for v in values:
        c = ord(format(v, "x"))
        rs.append((c, c))
        if v >= 10:
            rs.append((c - 32, c - 32))
    return ir.byteset(rs)


def hex4_range(lo: int, hi: int) -> Node:
    """Four hex digits (either case) whose value lies in ``[lo, hi]``."""
    def digs(v):
        return [(v >> s) & 0xF for s in (12, 8, 4, 0)]
    return digits_range(digs(lo), digs(hi), hex_digit, 16)


def _u_escape_ranges(ranges) -> Node:
    """``\\uXXXX`` escapes (plus surrogate pairs) of the code points in ``ranges``."""
    parts = []
    for lo, hi in ranges:
        for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), min(hi, 0xFFFF))):
            if a <= b:
                parts.append(ir.seq(ir.lit("\\u"), hex4_range(a, b)))
        a, b = max(lo, 0x10000), hi
        if a <= b:
            parts.append(_surrogate_pairs(a, b))
    return ir.alt(*parts)


def _surrogate_pairs(lo: int, hi: int) -> Node:
    """Surrogate-pair escapes of the astral code points in ``[lo, hi]``."""
    def pair(c):
        c -= 0x10000
        return 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF)
    (h1, l1), (h2, l2) = pair(lo), pair(hi)
    u = ir.lit("\\u")
    if h1 == h2:
        return ir.seq(u, hex4_range(h1, h1), u, hex4_range(l1, l2))
    parts = [ir.seq(u, hex4_range(h1, h1), u, hex4_range(l1, 0xDFFF))]
    if h1 + 1 <= h2 - 1:
        parts.append(ir.seq(u, hex4_range(h1 + 1, h2 - 1), u, hex4_range(0xDC00, 0xDFFF)))
    parts.append(ir.seq(u, hex4_range(h2, h2), u, hex4_range(0xDC00, l2)))
    return ir.alt(*parts)


CHAR_ANY: Node = ir.alt(
    ir.CharSet(RAW_RANGES),
    ir.seq(ir.lit("\\"), ir.alt(
        ir.byteset([(ord(c), ord(c)) for c in '"\\/bfnrt']),
        ir.seq(ir.lit("u"), ir.alt(hex4_range(0, 0xD7FF), hex4_range(0xE000, 0xFFFF))),
        ir.seq(ir.lit("u"), hex4_range(0xD800, 0xDBFF), ir.lit("\\u"), hex4_range(0xDC00, 0xDFFF)))))
"""One JSON string character in any spelling."""


def string_content(min_len: int = 0, max_len: int | None = None) -> Node:
    """String contents (between the quotes) of ``min_len..max_len`` characters."""
    return ir.repeat(CHAR_ANY, min_len, max_len)


def quoted(content: Node) -> Node:
    """``"`` + content + ``"``."""
    return ir.seq(ir.lit('"'), content, ir.lit('"'))


def _control_escape(c: int) -> Node:
    if c in SHORT_ESCAPES:
        return ir.lit(SHORT_ESCAPES[c])
    return ir.seq(ir.lit("\\u00"), hex_digit(c >> 4, c >> 4), hex_digit(c & 0xF, c & 0xF))


def spell_char(c: str) -> Node:
    """The canonical spelling of one character (see the module docstring)."""
    o = ord(c)
    if o < 0x20 or o in (0x22, 0x5C):
        return _control_escape(o)
    return ir.lit(c)


def spell_ranges(ranges) -> Node:
    """Canonical spellings of one code point from the inclusive ``ranges``."""
    raw = []
    escaped = []
    for lo, hi in ir.normalize_ranges(ranges, ir.MAX_UNICODE):
        for rlo, rhi in RAW_RANGES:
            a, b = max(lo, rlo), min(hi, rhi)
            if a <= b:
                raw.append((a, b))
        for elo, ehi in _ESCAPED:
            escaped.extend(range(max(lo, elo), min(hi, ehi) + 1))
    parts = [ir.charset(raw)] if raw else []
    if escaped:
        parts.append(_escapes(escaped))
    return ir.alt(*parts)


def _escapes(codes: list[int]) -> Node:
    """The canonical escapes of ``codes`` (controls, ``"``, ``\\``) as one trie after the backslash: the
    alternatives of :func:`_control_escape` side by side kept dozens of NFA states alive at once after a
    ``\\`` (``.`` and every negated class spell all 34), which a subset construction pays at each state."""
    short = [ord(SHORT_ESCAPES[c][1]) for c in codes if c in SHORT_ESCAPES]
    long_ = [c for c in codes if c not in SHORT_ESCAPES]
    after = [ir.byteset([(b, b) for b in short])] if short else []
    by_high = [[c & 0xF for c in long_ if c >> 4 == h] for h in (0, 1)]
    hex_pairs = [ir.seq(hex_digit(h, h), hex_digits(lows)) for h, lows in enumerate(by_high) if lows]
    if hex_pairs:
        after.append(ir.seq(ir.lit("u00"), ir.alt(*hex_pairs)))
    return ir.seq(ir.lit("\\"), ir.alt(*after))


def spell_any(text: str) -> Node:
    """Every JSON spelling of ``text`` (raw, short escapes, ``\\/``, ``\\uXXXX``)."""
    return ir.seq(*map(_spell_char, text))


@functools.lru_cache(maxsize=4096)
def _spell_char(ch: str) -> Node:
    """Every JSON spelling of the one character ``ch``, kept: a schema's property names spell the same
    few dozen characters thousands of times (its ``additionalProperties: false`` keys' complement)."""
    o = ord(ch)
    alts = [_u_escape_ranges([(o, o)])]
    if o in SHORT_ESCAPES:
        alts.append(ir.lit(SHORT_ESCAPES[o]))
    elif o >= 0x20:
        alts.append(ir.lit(ch))
    if ch == "/":
        alts.append(ir.lit("\\/"))
    return ir.alt(*alts)


class PatternEncodeError(ValueError):
    """A regex IR node cannot be re-encoded as JSON string content."""


def json_encode_regex(node: Node, memo: dict | None = None) -> Node:
    """Re-encode a code-point regex IR as JSON string contents.

    Each character the regex matches becomes its canonical JSON spelling
    (:func:`spell_ranges`). The spelling map sends distinct strings to
    disjoint sets of spellings, so it commutes with union, concatenation,
    repetition, intersection and difference.

    Parameters
    ----------
    node : Node
        IR from :func:`leapgen.grammar.regex.parse_regex` (literals as UTF-8
        :class:`ir.Bytes`, classes as :class:`ir.CharSet`).
    memo : dict, optional
        Cache shared between calls (mutated).

    Raises
    ------
    PatternEncodeError
        If the IR holds bytes that are not whole UTF-8 characters, a
        non-ASCII :class:`ir.ByteSet`, or a rule reference.
    """
    if memo is None:
        memo = {}
    hit = memo.get(node)
    if hit is not None:
        return hit
    if isinstance(node, ir.Bytes):
        try:
            text = node.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PatternEncodeError("the pattern matches bytes that are not UTF-8 text") from exc
        out = ir.seq(*(spell_char(c) for c in text))
    elif isinstance(node, ir.ByteSet):
        if any(hi >= 0x80 for _, hi in node.ranges):
            raise PatternEncodeError("the pattern matches single non-ASCII bytes")
        out = spell_ranges(node.ranges)
    elif isinstance(node, ir.CharSet):
        out = spell_ranges(node.ranges)
    elif isinstance(node, ir.Seq):
        out = ir.seq(*(json_encode_regex(i, memo) for i in node.items))
    elif isinstance(node, ir.Alt):
        out = ir.alt(*(json_encode_regex(i, memo) for i in node.items))
    elif isinstance(node, ir.Intersect):
        out = ir.intersect(*(json_encode_regex(i, memo) for i in node.items))
    elif isinstance(node, ir.Repeat):
        out = ir.repeat(json_encode_regex(node.item, memo), node.lo, node.hi)
    elif isinstance(node, ir.Join):
        out = ir.join(json_encode_regex(node.item, memo), json_encode_regex(node.sep, memo))
    elif isinstance(node, ir.Diff):
        out = ir.diff(json_encode_regex(node.left, memo), json_encode_regex(node.right, memo))
    else:
        raise PatternEncodeError(f"the pattern holds an unsupported construct ({type(node).__name__})")
    memo[node] = out
    return out
