"""Unicode code point ranges -> UTF-8 byte-range sequences.

A range of scalar values becomes a small union of byte-range sequences (the
construction of RE2 and Rust's regex-syntax ``Utf8Sequences``; Russ Cox,
"Regular Expression Matching in the Wild"), so a class like ``[^"\\\\]`` costs
a handful of edges instead of one per code point. Surrogates (U+D800..U+DFFF)
have no UTF-8 encoding and are skipped.
"""

from __future__ import annotations

_LEN_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))


def utf8_sequences(lo: int, hi: int) -> list[tuple[tuple[int, int], ...]]:
    """Byte-range sequences whose union encodes exactly code points ``lo..hi``.

    Parameters
    ----------
    lo, hi : int
        Inclusive code point bounds, ``0 <= lo <= hi <= 0x10FFFF``.

    Returns
    -------
    list of tuple of (int, int)
        Each item is a sequence of inclusive byte ranges, one per byte.
    """
    out: list[tuple[tuple[int, int], ...]] = []
    pieces = []
    for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)):
        if a <= b:
            pieces.append((a, b))
    for a, b in pieces:
        for blo, bhi in _LEN_BOUNDS:
            x, y = max(a, blo), min(b, bhi)
            if x <= y:
                _split(x, y, out)
    return out


def _split(a: int, b: int, out: list) -> None:
    n = len(chr(a).encode("utf-8"))
    if n == 1:
        out.append(((a, b),))
        return
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if a & ~m != b & ~m:
            if a & m:
                _split(a, a | m, out)
                _split((a | m) + 1, b, out)
                return
            if b & m != m:
                _split(a, (b & ~m) - 1, out)
                _split(b & ~m, b, out)
                return
    ea, eb = chr(a).encode("utf-8"), chr(b).encode("utf-8")
    out.append(tuple(zip(ea, eb)))
