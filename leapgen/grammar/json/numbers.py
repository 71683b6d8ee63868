"""JSON numbers as byte-level IR: the RFC 8259 number grammar, exact integer
ranges and exact decimal ranges.

Everything here builds :mod:`leapgen.grammar.ir` terms directly (no regex text).

Spellings
---------
* ``number``: RFC 8259 section 6, ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``.
* ``integer``: ``-?(0|[1-9][0-9]*)``. JSON Schema counts ``1.0`` as an integer;
  leapgen (like xgrammar) does not accept that spelling for ``"type": "integer"``:
  every integer value still has its plain spelling. ``-0`` is accepted wherever
  0 is (it is the JSON number grammar, and ``-0 == 0``).
* Integer bounds: exact; the result is one alternation of fixed-width digit
  ranges (the classic range-to-regex split), no intersection needed.
* Number bounds: exact over the spellings accepted. A bound that only states a
  sign (``minimum: 0``, ``exclusiveMinimum: 0``, ``maximum: 0``, ...) keeps the
  full number grammar, exponents included. Any other bound restricts the
  accepted spelling to plain decimals (no exponent): with an exponent, "value
  >= 1.5" is not a regular language over the text. Every value in range keeps
  its plain-decimal spelling.
"""

from __future__ import annotations

from decimal import Decimal

from leapgen.errors import SchemaError

from .. import ir
from ..ir import Node
from .literal_sets import digits_range, literal_trie

DIGIT = ir.byteset([(0x30, 0x39)])
NONZERO = ir.byteset([(0x31, 0x39)])
_MINUS = ir.lit("-")
_FRAC = ir.seq(ir.lit("."), ir.plus(DIGIT))
_EXP = ir.seq(ir.byteset([(0x45, 0x45), (0x65, 0x65)]), ir.opt(ir.byteset([(0x2B, 0x2B), (0x2D, 0x2D)])),
              ir.plus(DIGIT))
_UINT = ir.alt(ir.lit("0"), ir.seq(NONZERO, ir.star(DIGIT)))


def integer_node() -> Node:
    """Any JSON integer spelling: ``-?(0|[1-9][0-9]*)``."""
    return ir.seq(ir.opt(_MINUS), _UINT)


def number_node() -> Node:
    """Any JSON number (RFC 8259 section 6)."""
    return ir.seq(ir.opt(_MINUS), _UINT, ir.opt(_FRAC), ir.opt(_EXP))


def decimal_digit(lo: int, hi: int) -> Node:
    """One decimal digit with value in ``[lo, hi]``."""
    return ir.byteset([(0x30 + lo, 0x30 + hi)])


def _digits(v: int) -> list[int]:
    return [int(c) for c in str(v)]


def uint_range(lo: int, hi: int | None) -> Node:
    """Canonical decimal spellings (no leading zeros) of ``lo <= v <= hi``.

    ``lo >= 0``; ``hi=None`` means unbounded. Empty range: :data:`ir.NOTHING`.
    """
    if hi is not None and lo > hi:
        return ir.NOTHING
    parts = []
    lo_len = len(str(lo))
    top_len = lo_len if hi is None else len(str(hi))
    for n in range(lo_len, top_len + 1):
        a = max(lo, 10 ** (n - 1) if n > 1 else 0)
        b = 10 ** n - 1 if hi is None else min(hi, 10 ** n - 1)
        if a <= b:
            parts.append(digits_range(_digits(a), _digits(b), decimal_digit, 10))
    if hi is None:
        parts.append(ir.seq(NONZERO, ir.repeat(DIGIT, lo_len, None)))
    return ir.alt(*parts)


def int_range(lo: int | None, hi: int | None) -> Node:
    """JSON integer spellings of the integers in ``[lo, hi]`` (``None``: unbounded).

    ``-0`` is included iff 0 is in range.
    """
    if lo is not None and hi is not None and lo > hi:
        return ir.NOTHING
    parts = []
    if hi is None or hi >= 0:
        parts.append(uint_range(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        mag_lo = 1 if hi is None or hi >= 0 else -hi
        parts.append(ir.seq(_MINUS, uint_range(mag_lo, None if lo is None else -lo)))
    if (lo is None or lo <= 0) and (hi is None or hi >= 0):
        parts.append(ir.lit("-0"))
    return ir.alt(*parts)


# ---------------------------------------------------------------------------
# Decimal ranges (numbers with bounds)
# ---------------------------------------------------------------------------

_ANY_FRAC = ir.opt(_FRAC)


def _split(d: Decimal) -> tuple[int, str]:
    """A non-negative decimal as (integer part, fraction digits without trailing zeros)."""
    text = format(d, "f")
    if "." in text:
        ip, fp = text.split(".")
    else:
        ip, fp = text, ""
    return int(ip), fp.rstrip("0")


def _frac(cf: str, op: str) -> tuple[Node, bool]:
    """Fraction digit strings ``f`` with ``0.f op 0.cf``.

    Returns the non-empty strings as a node and whether the empty fraction
    (the value 0) also satisfies the comparison. ``cf`` has no trailing zeros.
    """
    k = len(cf)
    d = [int(c) for c in cf]
    parts = []
    star = ir.star(DIGIT)
    for i in range(k):
        prefix = ir.lit(cf[:i])
        if op in ("ge", "gt") and d[i] < 9:
            parts.append(ir.seq(prefix, decimal_digit(d[i] + 1, 9), star))
        if op in ("le", "lt") and d[i] > 0:
            parts.append(ir.seq(prefix, decimal_digit(0, d[i] - 1), star))
    if op in ("le", "lt"):
        parts.extend(ir.lit(cf[:j]) for j in range(1, k))
    if op == "ge":
        parts.append(ir.seq(ir.lit(cf), ir.plus(DIGIT) if k == 0 else star))
        empty_ok = k == 0
    elif op == "gt":
        parts.append(ir.seq(ir.lit(cf), star, NONZERO, star))
        empty_ok = False
    elif op == "le":
        parts.append(ir.seq(ir.lit(cf), ir.plus(ir.lit("0")) if k == 0 else ir.star(ir.lit("0"))))
        empty_ok = True
    else:
        empty_ok = k > 0
    return ir.alt(*parts), empty_ok


def _frac_json(nonempty: Node, empty_ok: bool) -> Node:
    return ir.alt(*([ir.EMPTY] if empty_ok else []), ir.seq(ir.lit("."), nonempty))


def magnitude_range(lo: Decimal, lo_excl: bool, hi: Decimal | None, hi_excl: bool) -> Node:
    """Plain decimal spellings ``I(.F)?`` (no sign, no exponent) of values in the range.

    ``lo >= 0``; ``hi=None`` means unbounded above.
    """
    if hi is not None and (lo > hi or (lo == hi and (lo_excl or hi_excl))):
        return ir.NOTHING
    li, lf = _split(lo)
    lo_frac = _frac(lf, "gt" if lo_excl else "ge")
    if hi is None:
        return ir.alt(ir.seq(ir.lit(str(li)), _frac_json(*lo_frac)),
                      ir.seq(uint_range(li + 1, None), _ANY_FRAC))
    hi_i, hf = _split(hi)
    hi_frac = _frac(hf, "lt" if hi_excl else "le")
    if li == hi_i:
        both = ir.intersect(lo_frac[0], hi_frac[0])
        return ir.seq(ir.lit(str(li)), _frac_json(both, lo_frac[1] and hi_frac[1]))
    return ir.alt(ir.seq(ir.lit(str(li)), _frac_json(*lo_frac)),
                  ir.seq(uint_range(li + 1, hi_i - 1), _ANY_FRAC),
                  ir.seq(ir.lit(str(hi_i)), _frac_json(*hi_frac)))


def _nonzero_mantissa() -> Node:
    return ir.alt(ir.seq(NONZERO, ir.star(DIGIT), _ANY_FRAC),
                  ir.seq(ir.lit("0."), ir.star(DIGIT), NONZERO, ir.star(DIGIT)))


def _sign_only(lo, lo_excl, hi, hi_excl) -> Node | None:
    """The exact language (exponents allowed) when the bounds only state a sign."""
    zero_mant = ir.seq(ir.lit("0"), ir.opt(ir.seq(ir.lit("."), ir.plus(ir.lit("0")))))
    exp = ir.opt(_EXP)
    zero = ir.seq(ir.opt(_MINUS), zero_mant, exp)
    pos = ir.seq(_nonzero_mantissa(), exp)
    neg = ir.seq(_MINUS, pos)
    if hi is None and lo == 0:
        return ir.alt(pos, *([] if lo_excl else [zero]))
    if lo is None and hi == 0:
        return ir.alt(neg, *([] if hi_excl else [zero]))
    return None


def number_range(lo: Decimal | None, lo_excl: bool, hi: Decimal | None, hi_excl: bool) -> Node:
    """JSON number spellings of the values in a range (see the module docstring).

    Parameters
    ----------
    lo, hi : Decimal or None
        The bounds (``None``: unbounded).
    lo_excl, hi_excl : bool
        Whether each bound is exclusive.
    """
    if lo is None and hi is None:
        return number_node()
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_excl or hi_excl))):
        return ir.NOTHING
    exact = _sign_only(lo, lo_excl, hi, hi_excl)
    if exact is not None:
        return exact
    parts = []
    # Non-negative magnitudes, no sign.
    if hi is None or hi >= 0:
        if lo is None or lo < 0:
            p_lo, p_excl = Decimal(0), False
        else:
            p_lo, p_excl = lo, lo_excl
        parts.append(magnitude_range(p_lo, p_excl, hi, hi_excl))
    # "-" + magnitude m, value -m.
    if lo is None or lo <= 0:
        if hi is None or hi > 0:
            m_lo, m_excl = Decimal(0), False
        else:
            m_lo, m_excl = -hi, hi_excl
        m_hi = None if lo is None else -lo
        parts.append(ir.seq(_MINUS, magnitude_range(m_lo, m_excl, m_hi, lo_excl)))
    return ir.alt(*parts)


# ---------------------------------------------------------------------------
# multipleOf, non-integers, the spellings of one value
# ---------------------------------------------------------------------------

NO_EXPONENT = ir.seq(ir.opt(_MINUS), _UINT, _ANY_FRAC)
"""Every JSON number spelling without an exponent."""

NON_INTEGER_NUMBER = ir.seq(ir.opt(_MINUS), _UINT, ir.lit("."), ir.star(DIGIT), NONZERO, ir.star(DIGIT))
"""Numbers that are not integer-valued, spelled without an exponent."""

MAX_MULTIPLES = 2000
"""Most residues (or range members) :func:`multiple_of` enumerates."""


def decimal_spellings(value, *, integer: bool = False) -> Node:
    """The spellings without exponent of one numeric value: ``1.5``,
    ``1.50``, ...; ``integer=True``: only the integer spelling (and ``-0``
    for 0)."""
    d = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
    sign = "-" if d < 0 else ""
    ip, fp = _split(abs(d))
    zero = d == 0
    if integer:
        return ir.alt(ir.lit(f"{sign}{ip}"), *([ir.lit("-0")] if zero else []))
    head = ir.alt(ir.lit("0"), ir.lit("-0")) if zero else ir.lit(f"{sign}{ip}")
    if fp:
        return ir.seq(head, ir.lit("." + fp), ir.star(ir.lit("0")))
    return ir.seq(head, ir.opt(ir.seq(ir.lit("."), ir.plus(ir.lit("0")))))


def _digit_strings(values, width: int) -> Node:
    return literal_trie(format(v, f"0{width}d").encode() if width else str(v).encode() for v in values)


def _pow10_divisor(q: int) -> int | None:
    """The least j with q | 10**j (None when q has another prime factor)."""
    j, r = 0, q
    while r % 2 == 0:
        r //= 2
        j += 1
    k = 0
    while r % 5 == 0:
        r //= 5
        k += 1
    return max(j, k) if r == 1 else None


def int_multiples(q: int, lo: int | None = None, hi: int | None = None) -> Node | None:
    """Integer spellings (``-?(0|[1-9][0-9]*)``) of the multiples of ``q``
    (None when not expressible: see :func:`multiple_of`)."""
    if q == 1:
        return ir.seq(ir.opt(_MINUS), _UINT)
    j = _pow10_divisor(q)
    if j is not None and 10 ** j // q <= MAX_MULTIPLES:
        residues = range(0, 10 ** j, q)
        small = _digit_strings([r for r in residues], 0)  # magnitudes below 10**j
        big = ir.seq(NONZERO, ir.star(DIGIT), _digit_strings(residues, j))
        mag = ir.alt(small, big)
        return ir.seq(ir.opt(_MINUS), mag)
    if lo is not None and hi is not None and (hi - lo) // q <= MAX_MULTIPLES:
        first = -(-lo // q) * q
        vals = list(range(first, hi + 1, q))
        texts = [str(v).encode() for v in vals] + ([b"-0"] if 0 in vals else [])
        return literal_trie(texts)
    return None


def multiple_of(arg, *, integer: bool, lo: int | None = None, hi: int | None = None, ptr: str = "") -> Node:
    """The spellings of the multiples of ``arg`` (``multipleOf``).

    With ``m = p * 10**-k`` (``p`` an integer): an integer ``v`` qualifies
    when ``v`` is a multiple of ``p / gcd(p, 10**k)``, expressible when that
    divides a power of ten (a residue test on the last digits) or when the
    range ``[lo, hi]`` holds at most :data:`MAX_MULTIPLES` multiples
    (enumerated). A number qualifies when written without an exponent with at
    most ``k`` significant fraction digits and, for ``p > 1``, when ``p``
    divides ``10**k`` (a test on the fraction digits) or ``k == 0`` (an
    integer multiple of ``p`` with an all-zero fraction).

    Raises
    ------
    SchemaError
        ``arg`` is not a positive number, or the multiples are not
        expressible as above.
    """
    if isinstance(arg, bool) or not isinstance(arg, (int, float)) or not arg > 0 or arg != arg:
        raise SchemaError("multipleOf must be a positive number", pointer=ptr)
    d = (Decimal(arg) if isinstance(arg, int) else Decimal(repr(arg))).normalize()
    _, digits, exp = d.as_tuple()
    p = int("".join(map(str, digits)))
    if exp >= 0:
        p, k = p * 10 ** exp, 0
    else:
        k = -exp
    unsupported = SchemaError(f"multipleOf {arg!r} is not supported for this type (supported: divisors of a "
                              "power of ten, their decimal fractions, or a small bounded range)", pointer=ptr)
    if integer:
        import math
        q = p // math.gcd(p, 10 ** k)
        node = int_multiples(q, lo, hi)
        if node is None:
            raise unsupported
        return node
    zeros = ir.seq(ir.lit("."), ir.plus(ir.lit("0")))
    if k == 0:
        ints = int_multiples(p)
        if ints is None:
            raise unsupported
        return ir.seq(ints, ir.opt(zeros))
    if p == 1:
        frac = ir.alt(ir.seq(ir.lit("."), ir.repeat(DIGIT, 1, k), ir.star(ir.lit("0"))), zeros)
        return ir.seq(ir.opt(_MINUS), _UINT, ir.opt(frac))
    if (10 ** k) % p or 10 ** k // p > MAX_MULTIPLES:
        raise unsupported
    stripped = sorted({format(f, f"0{k}d").rstrip("0") for f in range(0, 10 ** k, p)} - {""})
    frac = ir.alt(zeros, ir.seq(ir.lit("."), literal_trie(s.encode() for s in stripped), ir.star(ir.lit("0"))))
    return ir.seq(ir.opt(_MINUS), _UINT, ir.opt(frac))
