"""Grammar IR -> byte-level NFA (Thompson's construction).

Thompson, "Regular expression search algorithm", CACM 11(6), 1968. Each IR
node becomes a fragment with one entry and one exit state; edges carry
inclusive byte ranges, epsilon edges are kept apart. ``Intersect`` and
``Diff`` are built as DFA products (see :mod:`leapgen.automata.dfa`) and
embedded back as NFA fragments.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from leapgen.automata.utf8 import utf8_sequences
from leapgen.errors import CompileLimitError, GrammarError
from leapgen.grammar import ir

MIN_COPIES_TO_SHARE = 4


class Nfa:
    """A mutable NFA under construction.

    Attributes
    ----------
    eps : list of list of int
        ``eps[s]``: epsilon successors of state ``s``.
    edges : list of list of (int, int, int)
        ``edges[s]``: ``(lo, hi, target)`` byte-range edges, bounds inclusive.
    """

    def __init__(self, max_states: int, compile_dfa: Callable, *, rule_ids: dict[str, int] | None = None):
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.max_states = max_states
        self._compile_dfa = compile_dfa
        self._rule_ids = rule_ids
        self.root: ir.Node | None = None  # the node being compiled: never replaced by its own DFA

    def new_state(self) -> int:
        if len(self.eps) >= self.max_states:
            raise CompileLimitError(f"grammar needs more than {self.max_states} NFA states")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node: ir.Node) -> tuple[int, int]:
        """Add a fragment for ``node``; return its (entry, exit) states."""
        if isinstance(node, ir.Bytes):
            s = cur = self.new_state()
            for b in node.data:
                nxt = self.new_state()
                self.edges[cur].append((b, b, nxt))
                cur = nxt
            return s, cur
        if isinstance(node, ir.ByteSet):
            s, e = self.new_state(), self.new_state()
            for lo, hi in node.ranges:
                self.edges[s].append((lo, hi, e))
            return s, e
        if isinstance(node, ir.CharSet):
            return self._charset(node)
        if isinstance(node, ir.Seq):
            s, e = self.build(node.items[0])
            for item in node.items[1:]:
                s2, e2 = self.build(item)
                self.eps[e].append(s2)
                e = e2
            return s, e
        if isinstance(node, ir.Alt):
            s, e = self.new_state(), self.new_state()
            for item in node.items:
                s2, e2 = self.build(item)
                self.eps[s].append(s2)
                self.eps[e2].append(e)
            return s, e
        if isinstance(node, ir.Repeat):
            return self._repeat(node)
        if isinstance(node, (ir.Intersect, ir.Diff)):
            return self.embed(self._compile_dfa(node))
        if isinstance(node, ir.RuleRef):
            if self._rule_ids is None or node.name not in self._rule_ids:
                raise GrammarError(f"rule reference {node.name!r} cannot be used here (undefined, or inside an "
                                   "intersection/difference)")
            s, e = self.new_state(), self.new_state()
            sym = 256 + self._rule_ids[node.name]
            self.edges[s].append((sym, sym, e))
            return s, e
        raise TypeError(f"not an IR node: {node!r}")

    def _charset(self, node: ir.CharSet) -> tuple[int, int]:
        s, e = self.new_state(), self.new_state()
        for lo, hi in node.ranges:
            for ranges in utf8_sequences(lo, hi):
                cur = s
                for i, (blo, bhi) in enumerate(ranges):
                    nxt = e if i == len(ranges) - 1 else self.new_state()
                    self.edges[cur].append((blo, bhi, nxt))
                    cur = nxt
        return s, e

    def _repeat(self, node: ir.Repeat) -> tuple[int, int]:
        copies = node.lo + (1 if node.hi is None else node.hi - node.lo)
        if (copies >= MIN_COPIES_TO_SHARE and self._compile_dfa is not None and node is not self.root
                and not ir.contains_ruleref(node)):
            # Many copies of one fragment: determinize and minimize it once (cached by value), then
            # embed the small DFA; the outer subset construction then sees far fewer states.
            return self.embed(self._compile_dfa(node))
        s = e = self.new_state()
        for _ in range(node.lo):
            s2, e2 = self.build(node.item)
            self.eps[e].append(s2)
            e = e2
        if node.hi is None:
            loop = self.new_state()
            s2, e2 = self.build(node.item)
            self.eps[e].append(loop)
            self.eps[loop].append(s2)
            self.eps[e2].append(loop)
            return s, loop
        end = self.new_state()
        for _ in range(node.hi - node.lo):
            s2, e2 = self.build(node.item)
            self.eps[e].append(s2)
            self.eps[e].append(end)
            e = e2
        self.eps[e].append(end)
        return s, end

    def embed(self, dfa) -> tuple[int, int]:
        """Copy a byte-level :class:`~leapgen.automata.dfa.Dfa` in as a fragment."""
        if dfa.n_states == 0:  # the empty language: an entry with no way to the exit
            return self.new_state(), self.new_state()
        base = [self.new_state() for _ in range(dfa.n_states)]
        end = self.new_state()
        for q in range(dfa.n_states):
            for lo, hi, t in row_ranges(dfa.trans[q, :256]):
                self.edges[base[q]].append((lo, hi, base[t]))
            if dfa.accepting[q]:
                self.eps[base[q]].append(end)
        return base[dfa.start], end


def row_ranges(row: np.ndarray) -> list[tuple[int, int, int]]:
    """``(lo, hi, target)`` runs of equal live targets in one transition row."""
    cuts = np.flatnonzero(np.diff(row)) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts - 1, [len(row) - 1]))
    return [(lo, hi, int(row[lo])) for lo, hi in zip(starts.tolist(), ends.tolist()) if row[lo] >= 0]
