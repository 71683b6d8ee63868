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

With ``count_lengths`` (the native compiler's JSON Schemas), a plain string
whose bound passes :data:`COUNTED_MIN_LENGTH` is a *counted region*
instead (:func:`counted_content`, :class:`ir.Counted`): one character in a
loop, its count kept by the matcher beside its state
(:mod:`leapgen.automata.counted`), so any bound costs the automaton nothing
and the positions of a string far from its bounds share one mask. That
holds where the whole schema is one regular language; where rules stay
(recursion, rules kept against duplication), :func:`expand_counted_rules`
writes each region out as above before the rules are decided.
"""

from __future__ import annotations

from .. import ir
from ..ir import Node
from .refs import join_pointer
from .strings import CHAR_ANY, string_content

MAX_EXACT_LENGTH = 256
"""Largest ``minLength``/``maxLength`` counted by the regular automaton alone."""
BLOCK_LENGTH = 128
"""Characters per call of the block rule."""
BLOCK_RULE = "len:block"
COUNTED_MIN_LENGTH = 32
"""Smallest ``minLength``/``maxLength`` made a counted region (shorter bounds cost few states)."""


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


def counted_content(c, lo: int, hi: int | None, item: Node = CHAR_ANY, ptr: str = "") -> Node | None:
    """String contents of ``lo..hi`` characters as a counted region, or None where the compiler
    ``c`` does not count lengths here (not asked, inside an intersection, or without CFG rules to
    write a long bound out with if the schema turns out context-free) or the bounds are small
    (:data:`COUNTED_MIN_LENGTH`). Marks ``c.counted``.

    ``item``: one character's spellings, any character by default; a narrower class (a ``pattern``
    like ``^[a-z]+$``, at the schema's pointer ``ptr``) is written out, if the schema turns out
    context-free, as a compile without counting writes a pattern beside its lengths (the lengths
    past :data:`MAX_EXACT_LENGTH` cut, with warnings at ``ptr``: :func:`expand_counted_rules`)."""
    if not (c.count_lengths and c.recursion_by_rules) or max(lo, hi or 0) < COUNTED_MIN_LENGTH:
        return None
    c.counted = True
    node = ir.counted(item, lo, hi)
    if item != CHAR_ANY:
        c.class_runs.setdefault(node, []).append(ptr)
    return node


def capped_lengths(c, lo: int, hi: int | None, ptr: str) -> tuple[int, int | None]:
    """Length bounds cut to what the regular automaton counts, with warnings at ``ptr``'s
    ``minLength`` / ``maxLength`` (``c``: the running compiler, mutated)."""
    why = "next to pattern/format" if c.recursion_by_rules else "inside an intersection or without CFG rules"
    if lo > MAX_EXACT_LENGTH:
        c.warn(join_pointer(ptr, "minLength"), f"minLength {lo} is above {MAX_EXACT_LENGTH} ({why}): enforced as "
                                               f"{MAX_EXACT_LENGTH} (shorter strings are accepted)")
        lo = MAX_EXACT_LENGTH
    if hi is not None and hi > MAX_EXACT_LENGTH:
        c.warn(join_pointer(ptr, "maxLength"), f"maxLength {hi} is above {MAX_EXACT_LENGTH} ({why}): not enforced "
                                               "(longer strings are accepted)")
        hi = None
    return lo, hi


def _written_out(c, node: ir.Counted) -> Node:
    """A counted region as a compile without counting writes it (:func:`expand_counted_rules`)."""
    if max(node.lo, node.hi or 0) <= MAX_EXACT_LENGTH:
        return ir.expand(node)
    if node.item == CHAR_ANY:
        return blocked_content(c, node.lo, node.hi)
    for ptr in c.class_runs.get(node) or [""]:  # a pattern's class: capped, as beside any pattern
        lo, hi = capped_lengths(c, node.lo, node.hi, ptr)
    return ir.repeat(node.item, lo, hi)


def expand_counted_rules(c, rules: dict) -> dict:
    """``rules`` (name -> body, ``"root"`` included) with every counted region written out as a
    compile without counting writes it (:func:`string_content`, or :func:`blocked_content` past
    :data:`MAX_EXACT_LENGTH`); the block rule joins ``c.rules`` and the result. Pure but for ``c``."""
    expand = ir.rewriter(lambda node, _: _written_out(c, node) if type(node) is ir.Counted else None)
    out = {name: expand(body) for name, body in rules.items()}
    c.rules.update({name: body for name, body in out.items() if name != "root"})
    out.update(c.rules)
    return out


def counted_size(node: Node) -> int:
    """:func:`ir.tree_size` of ``node`` with each counted region counted once (its loop holds one
    copy of the item), at most :data:`ir.SIZE_CAP`. Pure."""
    memo: dict = {}
    stack = [node]
    while stack:  # children first, iteratively (deep IR)
        n = stack[-1]
        if n in memo:
            stack.pop()
            continue
        kids = ir.children(n)
        pending = [k for k in kids if k not in memo]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        if type(n) is ir.Counted:
            memo[n] = 1 + memo[n.item]
        elif kids:
            memo[n] = ir.size_from_children(n, [memo[k] for k in kids])
        else:
            memo[n] = ir.tree_size(n)
    return memo[node]
