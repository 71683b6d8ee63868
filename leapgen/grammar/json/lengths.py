"""String lengths above what one automaton counts cheaply: blocks as a rule.

``minLength``/``maxLength`` (JSON Schema 2020-12 validation, sections 6.3.1
and 6.3.2: lengths in code points) up to :data:`MAX_EXACT_LENGTH` are
counted by the regular automaton, about 20 states per character (the escapes
and UTF-8 sequences of one character). Beyond it, the content is written as
whole blocks of :data:`BLOCK_LENGTH` characters, each a call of one rule
(``"len:block"``, kept as a rule so it is built once), followed by a partial
block counted in the caller:

    lengths ``lo..hi`` = ``a`` blocks then ``b`` characters, ``0 <= b < BLOCK_LENGTH``,
    with ``lo <= a * BLOCK_LENGTH + b <= hi`` (no ``hi``: ``lo // BLOCK_LENGTH``
    blocks, then at least ``lo % BLOCK_LENGTH`` characters)

The first block is counted in the caller too, so a string shorter than a
block, the common case, never pushes a block frame: its masks are the
caller's alone, as for a short ``maxLength`` (a block frame beside the
caller's partial block made two stacks, whose checks near the block's end
walked most of the vocabulary). A bound of 65,535 costs about 512 call
states plus two blocks' worth of character states in the caller (the
partial blocks' tails are one automaton once minimized) and one in the
block rule, and the language stays exact. It needs
the pushdown layer (CFG mode, outside intersections): elsewhere the caller
falls back to a warning.
"""

from __future__ import annotations

from .. import ir
from ..ir import Node
from .strings import string_content

MAX_EXACT_LENGTH = 256
"""Largest ``minLength``/``maxLength`` counted by the regular automaton alone."""
BLOCK_LENGTH = 128
"""Characters per call of the block rule."""
BLOCK_RULE = "len:block"


def blocked_content(c, lo: int, hi: int | None) -> Node:
    """String content of ``lo..hi`` characters (``hi`` None: unbounded) as
    block-rule calls plus a counted tail (see the module docstring).

    Parameters
    ----------
    c : the running compiler (:class:`leapgen.grammar.json.schema._Compiler`)
        Receives the block rule in ``rules`` and ``forced_rules``.
    lo, hi : int, int or None
        The bounds, ``lo <= hi``.

    Returns
    -------
    Node
        The content; it refers to the rule :data:`BLOCK_RULE`.
    """
    if BLOCK_RULE not in c.rules:
        c.rules[BLOCK_RULE] = string_content(BLOCK_LENGTH, BLOCK_LENGTH)
        c.forced_rules.add(BLOCK_RULE)
    n = BLOCK_LENGTH  # the first block, counted in the caller
    later = ir.seq(string_content(n, n), _called_blocks(max(lo - n, 0), None if hi is None else hi - n))
    return later if lo >= n else ir.alt(string_content(lo, n - 1), later)


def _called_blocks(lo: int, hi: int | None) -> Node:
    """``lo..hi`` characters as ``a`` calls of :data:`BLOCK_RULE` then ``b < BLOCK_LENGTH`` characters
    (the module docstring's formula)."""
    block = ir.RuleRef(BLOCK_RULE)
    ql, rl = divmod(lo, BLOCK_LENGTH)
    if hi is None:
        return ir.seq(ir.repeat(block, ql, ql), string_content(rl, None))
    qh, rh = divmod(hi, BLOCK_LENGTH)
    if ql == qh:
        return ir.seq(ir.repeat(block, ql, ql), string_content(rl, rh))
    parts = []
    if rl:  # else ql blocks and a tail of any length join the middle counts
        parts.append(ir.seq(ir.repeat(block, ql, ql), string_content(rl, BLOCK_LENGTH - 1)))
        ql += 1
    if ql <= qh - 1:
        parts.append(ir.seq(ir.repeat(block, ql, qh - 1), string_content(0, BLOCK_LENGTH - 1)))
    parts.append(ir.seq(ir.repeat(block, qh, qh), string_content(0, rh)))
    return ir.alt(*parts)
