"""Grammar IR -> byte-level NFA (Thompson's construction).

Thompson, "Regular expression search algorithm", CACM 11(6), 1968. Each IR
node becomes a fragment with one entry and one exit state; edges carry
inclusive byte ranges, epsilon edges are kept apart. ``Intersect`` and
``Diff`` are built as DFA products, ``Quotient`` as a DFA with other
accepting states, ``Embed`` as its item's own DFA (see
:mod:`leapgen.automata.dfa`), and embedded back as NFA fragments. A composite node met again (the copies of a
``Repeat``, a subschema used twice) is not rebuilt: its first fragment's
states are consecutive and its edges contiguous in the edge lists, so the
copy is that slice shifted to new state numbers. ``Repeat`` fragments (a
JSON string's content, a number's digits) are also kept across compiles
(:class:`Fragment`, bounded), and pasted in without rebuilding.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Callable, NamedTuple

import numpy as np

from leapgen.automata.counted import Uncountable
from leapgen.automata.dfa_table import minimize_table
from leapgen.automata.limits import too_many_states
from leapgen.automata.subset import determinize_classes
from leapgen.automata.tables import empty_table
from leapgen.automata.utf8 import utf8_sequences
from leapgen.errors import GrammarError
from leapgen.grammar import ir

MIN_COPIES_TO_SHARE = 4
#: Repeat fragments kept across compiles (:class:`Fragment`): a JSON string's content, a number's digits
#: recur in nearly every schema.
FRAGMENT_CACHE_ENTRIES = 1024


class Fragment(NamedTuple):
    """A built fragment, its states numbered from 0: ``n_states`` states, epsilon
    edges int32 ``(m, 2)`` and range edges int32 ``(m, 4)`` (read-only), entry and exit."""

    n_states: int
    eps: np.ndarray
    edges: np.ndarray
    entry: int
    exit: int


_FRAGMENTS: OrderedDict = OrderedDict()
_FRAGMENTS_LOCK = threading.Lock()


class Nfa:
    """A mutable NFA under construction, its edges kept in flat lists.

    Attributes
    ----------
    n_states : int
        States so far, numbered ``0 .. n_states - 1``.
    max_states : int
        Limit on ``n_states``.
    root : ir.Node or None
        The node being compiled: never replaced by its own DFA.
    """

    def __init__(self, max_states: int, compile_dfa: Callable | None, *, rule_ids: dict[str, int] | None = None,
                 counting: dict[tuple[int, int | None], int] | None = None):
        self.n_states = 0
        self.max_states = max_states
        self._eps: list[int] = []  # s0, t0, s1, t1, ...
        self._edges: list[int] = []  # s0, lo0, hi0, t0, ...
        self._edge_blocks: list[np.ndarray] = []  # int32 (m, 4) rows (s, lo, hi, t), from embed
        self._eps_blocks: list[np.ndarray] = []  # int32 (m, 2) rows (s, t), from copies
        self._built: dict[ir.Node, tuple] = {}  # node -> (marks before, marks after, entry, exit)
        self._compile_dfa = compile_dfa
        self._rule_ids = rule_ids
        #: Counted regions' bounds -> region number ``k`` (filled as they are met; see :meth:`_counted`), or
        #: None where nothing is counted (a :class:`~leapgen.grammar.ir.Counted` then raises).
        self.counting = counting
        self._counted_memo: dict[ir.Node, bool] = {}
        self.root: ir.Node | None = None

    def new_state(self) -> int:
        """A new state's number.

        Raises
        ------
        CompileLimitError
            More than ``max_states`` states.
        """
        n = self.n_states
        if n >= self.max_states:
            raise too_many_states(self.max_states, "NFA")
        self.n_states = n + 1
        return n

    def new_states(self, count: int) -> int:
        """The first of ``count`` new consecutive states (limit as :meth:`new_state`)."""
        first = self.n_states
        if first + count > self.max_states:
            raise too_many_states(self.max_states, "NFA")
        self.n_states = first + count
        return first

    def add_eps(self, s: int, t: int) -> None:
        """An epsilon edge ``s -> t``."""
        self._eps += (s, t)

    def add_edge(self, s: int, lo: int, hi: int, t: int) -> None:
        """An edge ``s -> t`` on the symbols ``lo..hi`` (inclusive)."""
        self._edges += (s, lo, hi, t)

    def add_edge_block(self, rows: np.ndarray) -> None:
        """Edges given as int32 rows ``(s, lo, hi, t)``, shape ``(m, 4)`` (not copied: do not mutate)."""
        self._edge_blocks.append(rows)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All edges so far.

        Returns
        -------
        eps : numpy.ndarray
            int32, ``(m_eps, 2)``: rows ``(s, t)``.
        edges : numpy.ndarray
            int32, ``(m, 4)``: rows ``(s, lo, hi, t)``.
        """
        return (_joined([np.array(self._eps, np.int32).reshape(-1, 2)] + self._eps_blocks, 2),
                _joined([np.array(self._edges, np.int32).reshape(-1, 4)] + self._edge_blocks, 4))

    def build(self, node: ir.Node) -> tuple[int, int]:
        """Add a fragment for ``node``; return its (entry, exit) states."""
        if type(node) not in _COPIED:
            return self._build(node)
        got = self._built.get(node)
        if got is not None:
            return self._copy(*got)
        shared = (type(node) is ir.Repeat and self._rule_ids is None and node is not self.root
                  and not self._holds_counted(node))  # a region's symbols are numbered per compile
        fragment = None
        if shared:
            with _FRAGMENTS_LOCK:
                fragment = _FRAGMENTS.get(node)
        before = self._marks()
        s, e = self._paste(fragment) if fragment is not None else self._build(node)
        after = self._marks()
        self._built[node] = (before, after, s, e)
        if shared and fragment is None:
            fragment = self._fragment(before, after, s, e)
            with _FRAGMENTS_LOCK:
                _FRAGMENTS[node] = fragment
                while len(_FRAGMENTS) > FRAGMENT_CACHE_ENTRIES:
                    _FRAGMENTS.popitem(last=False)
        return s, e

    def _fragment(self, before: tuple, after: tuple, entry: int, exit_: int) -> Fragment:
        """The fragment built between the marks ``before`` and ``after``, renumbered from 0."""
        eps, edges = self._edge_arrays(before, after)
        n0 = before[0]
        eps = np.concatenate([np.zeros((0, 2), np.int32), *eps]) - n0
        edges = np.concatenate([np.zeros((0, 4), np.int32), *edges])
        edges[:, 0] -= n0
        edges[:, 3] -= n0
        eps.flags.writeable = edges.flags.writeable = False
        return Fragment(after[0] - n0, eps, edges, entry - n0, exit_ - n0)

    def _paste(self, fragment: Fragment) -> tuple[int, int]:
        """A copy of a :class:`Fragment` (new states); returns its (entry, exit)."""
        base = self.new_states(fragment.n_states)
        self._add_shifted([fragment.eps], [fragment.edges], base)
        return fragment.entry + base, fragment.exit + base

    def _marks(self) -> tuple[int, int, int, int, int]:
        return self.n_states, len(self._eps), len(self._edges), len(self._edge_blocks), len(self._eps_blocks)

    def _copy(self, before: tuple, after: tuple, entry: int, exit_: int) -> tuple[int, int]:
        """A fresh copy of the fragment built between the marks ``before``
        and ``after`` (its edges only join its own states)."""
        shift = self.new_states(after[0] - before[0]) - before[0]
        self._add_shifted(*self._edge_arrays(before, after), shift)
        return entry + shift, exit_ + shift

    def _edge_arrays(self, before: tuple, after: tuple) -> tuple[list, list]:
        """The epsilon and range edges added between two marks, as lists of int32
        arrays ``(m, 2)`` and ``(m, 4)`` (the blocks themselves, not copies)."""
        _, i0, j0, k0, l0 = before
        _, i1, j1, k1, l1 = after
        eps = [np.array(self._eps[i0:i1], np.int32).reshape(-1, 2)] if i1 > i0 else []
        eps += self._eps_blocks[l0:l1]
        edges = self._edge_blocks[k0:k1]
        if j1 > j0:
            edges.append(np.array(self._edges[j0:j1], np.int32).reshape(-1, 4))
        return eps, edges

    def _add_shifted(self, eps: list, edges: list, shift: int) -> None:
        """Add edge arrays (as :meth:`_edge_arrays` gives them) with every state number moved by ``shift``."""
        self._eps_blocks += [block + shift for block in eps]
        for block in edges:
            moved = block.copy()
            moved[:, 0] += shift
            moved[:, 3] += shift
            self._edge_blocks.append(moved)

    def _build(self, node: ir.Node) -> tuple[int, int]:
        if isinstance(node, ir.Bytes):
            s = self.new_states(len(node.data) + 1)
            for i, b in enumerate(node.data):
                self._edges += (s + i, b, b, s + i + 1)
            return s, s + len(node.data)
        if isinstance(node, ir.ByteSet):
            s, e = self.new_state(), self.new_state()
            for lo, hi in node.ranges:
                self.add_edge(s, lo, hi, e)
            return s, e
        if isinstance(node, ir.CharSet):
            return self._charset(node)
        if isinstance(node, ir.Seq):
            s, e = self.build(node.items[0])
            for item in node.items[1:]:
                s2, e2 = self.build(item)
                self.add_eps(e, s2)
                e = e2
            return s, e
        if isinstance(node, ir.Alt):
            s, e = self.new_state(), self.new_state()
            for item in node.items:
                s2, e2 = self.build(item)
                self.add_eps(s, s2)
                self.add_eps(e2, e)
            return s, e
        if isinstance(node, ir.Repeat):
            return self._repeat(node)
        if isinstance(node, ir.Counted):
            return self._counted(node)
        if isinstance(node, ir.Subsets):
            return self._subsets(node)
        if isinstance(node, ir.Join):
            s, e = self.build(node.item)  # one copy of the item: after a separator, back to its entry
            s2, e2 = self.build(node.sep)
            self.add_eps(e, s2)
            self.add_eps(e2, s)
            return s, e
        if isinstance(node, (ir.Intersect, ir.Diff, ir.Quotient, ir.Embed)):
            return self.embed(self._compile_dfa(node))
        if isinstance(node, ir.RuleRef):
            if self._rule_ids is None or node.name not in self._rule_ids:
                raise GrammarError(f"rule reference {node.name!r} cannot be used here (undefined, or inside an "
                                   "intersection/difference)")
            s, e = self.new_state(), self.new_state()
            sym = 256 + self._rule_ids[node.name]
            self.add_edge(s, sym, sym, e)
            return s, e
        raise TypeError(f"not an IR node: {node!r}")

    def _counted(self, node: ir.Counted) -> tuple[int, int]:
        """A counted region (see :mod:`leapgen.automata.counted`): a loop state with an edge on the
        symbol ``256 + 2k`` into one copy of the item, whose end comes back to it, and an edge on
        ``257 + 2k`` out of the region; ``k`` numbers the region's bounds.

        Raises
        ------
        Uncountable
            Not counting here (an operand of a product, a rule of a context-free grammar): the
            caller compiles the grammar again with its lengths written out."""
        if self.counting is None:
            raise Uncountable("a counted region inside an intersection, a difference or a grammar rule")
        k = self.counting.setdefault((node.lo, node.hi), len(self.counting))
        loop, out = self.new_state(), self.new_state()
        s, e = self.build(node.item)
        self.add_edge(loop, 256 + 2 * k, 256 + 2 * k, s)
        self.add_eps(e, loop)
        self.add_edge(loop, 257 + 2 * k, 257 + 2 * k, out)
        return loop, out

    def _holds_counted(self, node: ir.Node) -> bool:
        """Whether ``node`` holds a counted region this NFA counts (memoized per NFA)."""
        if self.counting is None:
            return False
        memo = self._counted_memo
        got = memo.get(node)
        if got is None:
            got = memo[node] = type(node) is ir.Counted or any(self._holds_counted(k) for k in ir.children(node))
        return got

    def _charset(self, node: ir.CharSet) -> tuple[int, int]:
        edges, n_states = charset_fragment(node.ranges)
        base = self.new_states(n_states)
        block = edges.copy()
        block[:, 0] += base
        block[:, 3] += base
        self.add_edge_block(block)
        return base, base + 1

    def _repeat(self, node: ir.Repeat) -> tuple[int, int]:
        copies = node.lo + (1 if node.hi is None else node.hi - node.lo)
        if (copies >= MIN_COPIES_TO_SHARE and self._compile_dfa is not None and node is not self.root
                and not ir.contains_ruleref(node) and not self._holds_counted(node)):
            # Many copies of one fragment: determinize and minimize it once (cached by value), then
            # embed the small DFA; the outer subset construction then sees far fewer states.
            return self.embed(self._compile_dfa(node))
        s = e = self.new_state()
        for _ in range(node.lo):
            s2, e2 = self.build(node.item)
            self.add_eps(e, s2)
            e = e2
        if node.hi is None:
            loop = self.new_state()
            s2, e2 = self.build(node.item)
            self.add_eps(e, loop)
            self.add_eps(loop, s2)
            self.add_eps(e2, loop)
            return s, loop
        end = self.new_state()
        for _ in range(node.hi - node.lo):
            s2, e2 = self.build(node.item)
            self.add_eps(e, s2)
            self.add_eps(e, end)
            e = e2
        self.add_eps(e, end)
        return s, end

    def _subsets(self, node: ir.Subsets) -> tuple[int, int]:
        """States ``none[i]`` (no item chosen before item ``i``) and ``some[i]``
        (one was): ``none[i]`` enters item ``i`` directly, ``some[i]`` through
        a separator, and both skip it; item ``i`` itself is built once and
        leads to ``some[i + 1]``, so each item's states are shared by every
        subset that holds it (linear size, and a subset construction that
        needs no minimizing to merge them)."""
        k = len(node.items)
        none = self.new_states(k)
        some = self.new_states(k + 1)  # some + 0 is never entered: no item before the first
        for i, item in enumerate(node.items):
            s, e = self.build(item)
            self.add_eps(none + i, s)
            if i + 1 < k:
                self.add_eps(none + i, none + i + 1)
            if i > 0:
                s2, e2 = self.build(node.sep)
                self.add_eps(some + i, s2)
                self.add_eps(e2, s)
                self.add_eps(some + i, some + i + 1)
            self.add_eps(e, some + i + 1)
        return none, some + k

    def embed(self, dfa) -> tuple[int, int]:
        """Copy a byte-level :class:`~leapgen.automata.dfa.Dfa` in as a fragment (its
        states become consecutive NFA states); returns (entry, exit)."""
        if dfa.n_states == 0:  # the empty language: an entry with no way to the exit
            return self.new_state(), self.new_state()
        base = self.new_states(dfa.n_states + 1)
        end = base + dfa.n_states
        self.add_edge_block(table_ranges(dfa.trans[:, :256], base))
        for q in np.flatnonzero(dfa.accepting).tolist():
            self._eps += (base + q, end)
        return base + dfa.start, end


def _joined(blocks: list[np.ndarray], width: int) -> np.ndarray:
    """The int32 ``(m, width)`` blocks one after the other, in a fresh table (small pages: see
    :mod:`leapgen.automata.tables`; a large grammar's edges are tens of MiB, read once)."""
    out = empty_table((sum(len(b) for b in blocks), width), np.int32)
    return np.concatenate(blocks, out=out)


# Composite nodes whose second build is a copy of the first (leaves are as cheap to rebuild).
_COPIED = frozenset({ir.Seq, ir.Alt, ir.Repeat, ir.Subsets, ir.Join})


@functools.lru_cache(maxsize=1024)
def charset_fragment(ranges: tuple[tuple[int, int], ...]) -> tuple[np.ndarray, int]:
    """The NFA fragment of a set of Unicode scalar ranges: its minimal DFA
    (cached: JSON string characters recur in every string).

    The UTF-8 byte sequences of the ranges, one path each, end in states that
    accept the same continuations (two continuation bytes after ``E1``-``EC``
    as after ``EE``-``EF``); merged here, once, they no longer make the subset
    construction of every grammar holding the set build twice the states that
    its minimization then merges.

    Parameters
    ----------
    ranges : tuple of (int, int)
        Inclusive code point ranges.

    Returns
    -------
    edges : numpy.ndarray
        int32, ``(m, 4)``, read-only: rows ``(s, lo, hi, t)`` over local
        states, 0 the entry, 1 the exit, the others inner states.
    n_states : int
    """
    paths = Nfa(1 << 20, None)
    entry, exit_ = paths.new_state(), paths.new_state()
    for lo, hi in ranges:
        for seq in utf8_sequences(lo, hi):
            cur = entry
            for i, (blo, bhi) in enumerate(seq):
                nxt = exit_ if i == len(seq) - 1 else paths.new_state()
                paths.add_edge(cur, blo, bhi, nxt)
                cur = nxt
    table, accepting, starts, byte_class = determinize_classes(paths, [entry], exit_, 1 << 20)
    dfa = minimize_table(table, accepting, starts[0], byte_class)
    if dfa.n_states == 0:  # no scalar value at all: an entry with no way to the exit
        none = np.zeros((0, 4), np.int32)
        none.flags.writeable = False
        return none, 2
    # one character: the accepting state of the minimal DFA is the only one, with no way out
    final = int(np.flatnonzero(dfa.accepting)[0])
    order = [dfa.start, final] + [q for q in range(dfa.n_states) if q not in (dfa.start, final)]
    renumber = np.empty(dfa.n_states, np.int32)
    renumber[order] = np.arange(dfa.n_states, dtype=np.int32)
    out = table_ranges(dfa.trans)
    out[:, 0] = renumber[out[:, 0]]
    out[:, 3] = renumber[out[:, 3]]
    out.flags.writeable = False
    return out, dfa.n_states


def table_ranges(trans: np.ndarray, base: int = 0) -> np.ndarray:
    """Runs of equal live targets in the rows of a transition table.

    Parameters
    ----------
    trans : numpy.ndarray
        int32, ``(n, 256)``; -1 = dead.
    base : int
        Added to state numbers (sources and targets) in the result.

    Returns
    -------
    numpy.ndarray
        int32, ``(m, 4)``: rows ``(base + q, lo, hi, base + target)``, bytes
        ``lo..hi`` inclusive, in row-major order.
    """
    n, width = trans.shape
    change = np.ones((n, width), bool)
    change[:, 1:] = trans[:, 1:] != trans[:, :-1]
    q, lo = np.nonzero(change)  # run starts, row-major
    hi = np.empty_like(lo)
    hi[:-1] = lo[1:] - 1
    last = np.ones(len(lo), bool)
    last[:-1] = q[1:] != q[:-1]
    hi[last] = width - 1
    target = trans[q, lo]
    live = target >= 0
    return np.stack([q[live] + base, lo[live], hi[live], target[live] + base], axis=1).astype(np.int32)
