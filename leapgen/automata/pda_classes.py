"""Frames that no token can tell apart: look-ahead classes of a pushdown automaton's states.

A token walk (:func:`~leapgen.compiler.pda_kernels.pda_walk`) consumes at
most ``budget`` bytes, the longest token's. Two global states behave alike
for every walk of at most ``budget`` bytes from them when they are both
accepting or both not, their byte transitions go to the same states, and
their calls go to the same callees and come back to states alike for what
is left of the budget. A callee that cannot return in fewer than ``budget``
bytes never comes back within one token: where it returns does not matter.

So the states that count repetitions of a long rule (``"len:block"`` of
:mod:`leapgen.grammar.json.lengths`: 128 characters called again and again,
each return a state of its own) fall into one class away from the bounds,
and the mask cache of :class:`~leapgen.compiler.compiled_cfg.ContextFreeGrammar`
keys stacks by these classes: a check walked once at a block's end holds at
every block's end. The classes refine nothing beyond the bound (this is
Moore's partition refinement, E. F. Moore 1956, cut at ``budget`` steps and
without refining the byte targets), so they are sound, not minimal.
"""

from __future__ import annotations

import heapq

import numpy as np

from leapgen.automata.pda import Pda


class LookaheadClasses:
    """The classes of ``pda``'s global states for walks of at most ``budget`` bytes (lazy, memoized).

    Parameters
    ----------
    pda : Pda
        Read only.
    budget : int
        Bytes a walk may consume (the vocabulary's longest token), ``>= 0``.
    """

    def __init__(self, pda: Pda, budget: int):
        self.pda = pda
        self.budget = budget
        self._ids: dict[tuple, int] = {}  # signature -> class id
        self._memo: dict[tuple[int, int], int] = {}  # (state, budget) -> class id
        self._of: dict[int, int] = {}  # state -> class id at the full budget
        self._min_bytes: dict[int, int] = {}  # rule -> the fewest bytes of a return from its start

    def of(self, g: int) -> int:
        """The class id of global state ``g`` (``-1`` stays ``-1``, a stack's end) at the full budget."""
        got = self._of.get(g)
        if got is None:
            got = self._of[g] = -1 if g < 0 else self._class(g, self.budget)
        return got

    def _class(self, g: int, budget: int) -> int:
        got = self._memo.get((g, budget))
        if got is not None:
            return got
        pda = self.pda
        calls = []
        for k in range(int(pda.call_ptr[g]), int(pda.call_ptr[g + 1])):
            start, tail, guarded = int(pda.call_start[k]), bool(pda.call_tail[k]), bool(pda.call_guarded[k])
            back = int(pda.call_ret[k])
            if tail:
                ret = None  # no frame pushed: the callee returns to the frame below, which the key holds
            else:
                need = self.min_bytes(int(pda.rule_of[start]))
                if need >= budget:
                    ret = None  # never reached within one token
                elif need == 0:
                    ret = ("state", back)
                else:
                    ret = ("class", self._class(back, budget - need))
            calls.append((start, tail, guarded, ret))
        row = pda.trans_flat[g * 256:(g + 1) * 256].tobytes()
        sig = (bool(pda.accepting_flat[g]), row, tuple(calls))
        got = self._ids.setdefault(sig, len(self._ids))
        self._memo[g, budget] = got
        return got

    def min_bytes(self, rule: int) -> int:
        """A lower bound on the bytes a frame of ``rule`` consumes from its start state to its return
        (callees included; a rule met again while its own bound is computed counts 0)."""
        got = self._min_bytes.get(rule)
        if got is not None:
            return got
        self._min_bytes[rule] = 0  # recursion: a sound lower bound meanwhile
        pda = self.pda
        lo, hi = int(pda.state_base[rule]), int(pda.state_base[rule + 1])
        start = lo + pda.dfas[rule].start
        dist = {start: 0}
        heap = [(0, start)]
        best = None
        while heap:
            d, g = heapq.heappop(heap)
            if d > dist[g]:
                continue
            if pda.accepting_flat[g]:
                best = d
                break
            row = pda.trans_flat[g * 256:(g + 1) * 256]
            steps = [(int(t), 1) for t in np.unique(row[row >= 0])]
            for k in range(int(pda.call_ptr[g]), int(pda.call_ptr[g + 1])):
                callee = int(pda.rule_of[pda.call_start[k]])
                steps.append((int(pda.call_ret[k]), 0 if callee == rule else self.min_bytes(callee)))
            for t, w in steps:
                if lo <= t < hi and d + w < dist.get(t, 1 << 62):
                    dist[t] = d + w
                    heapq.heappush(heap, (d + w, t))
        got = self._min_bytes[rule] = 0 if best is None else best
        return got
