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
every block's end. This is Moore's partition refinement (E. F. Moore,
1956) cut at ``budget`` bytes, with byte targets compared as states, not as
classes: sound (two states of one class give every walk the same result),
not minimal.
"""

from __future__ import annotations

import threading

import numpy as np

from leapgen.automata.jit import njit
from leapgen.automata.pda import Pda


class LookaheadClasses:
    """The classes of ``pda``'s global states for walks of at most ``budget`` bytes (lazy, memoized;
    thread-safe: a batch fill's pool threads share one grammar).

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
        # (accepting, hash of the byte row, calls) -> [(a state of the class, class id)]: a state, not its
        # 1 KB row, is kept per class
        self._ids: dict[tuple, list[tuple[int, int]]] = {}
        self._count = 0
        self._lock = threading.Lock()
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
        row = pda.trans_flat[g * 256:(g + 1) * 256]
        sig = (bool(pda.accepting_flat[g]), hash(row.tobytes()), tuple(calls))
        got = self._find(sig, row)
        if got is None:
            with self._lock:  # two threads must not give out one id
                got = self._find(sig, row)
                if got is None:
                    got = self._count
                    self._count += 1
                    self._ids.setdefault(sig, []).append((g, got))
        self._memo[g, budget] = got
        return got

    def _find(self, sig: tuple, row: np.ndarray) -> int | None:
        """The class of signature ``sig`` whose state's byte row is ``row`` (the hash in ``sig`` only
        narrows the search: rows are compared whole), None for none yet."""
        trans = self.pda.trans_flat
        for rep, got in self._ids.get(sig, ()):
            if np.array_equal(trans[rep * 256:(rep + 1) * 256], row):
                return got
        return None

    def min_bytes(self, rule: int) -> int:
        """A lower bound on the bytes a frame of ``rule`` consumes from its start state to its return,
        capped at ``budget + 1`` (calls count 0 bytes: a sound bound, exact for a rule without calls)."""
        got = self._min_bytes.get(rule)
        if got is None:
            pda = self.pda
            lo, hi = int(pda.state_base[rule]), int(pda.state_base[rule + 1])
            got = self._min_bytes[rule] = int(rule_min_bytes(pda.trans_flat, pda.accepting_flat, pda.call_ptr,
                                                             pda.call_ret, lo, hi, lo + pda.starts[rule],
                                                             self.budget))
        return got


@njit
def rule_min_bytes(trans_flat, accepting, call_ptr, call_ret, lo, hi, start, cap):
    """The fewest bytes from global state ``start`` to an accepting state of its rule (states
    ``lo:hi``), call edges counted 0 (breadth first by bytes, each level closed over the calls'
    return states); ``cap + 1`` when none is within ``cap`` bytes."""
    n = hi - lo
    dist = np.full(n, cap + 1, np.int32)
    front = np.empty(n, np.int64)
    nxt = np.empty(n, np.int64)
    dist[start - lo] = 0
    front[0] = start
    n_front = 1
    level = 0
    while n_front > 0 and level <= cap:
        i = 0
        while i < n_front:  # grows while the level closes over the calls
            g = front[i]
            i += 1
            if accepting[g]:
                return level
            for k in range(call_ptr[g], call_ptr[g + 1]):
                r = call_ret[k]
                if dist[r - lo] > level:
                    dist[r - lo] = level
                    front[n_front] = r
                    n_front += 1
        n_next = 0
        for i in range(n_front):
            base = front[i] * 256
            for b in range(256):
                t = trans_flat[base + b]
                if t >= 0 and dist[t - lo] > level + 1:
                    dist[t - lo] = level + 1
                    nxt[n_next] = t
                    n_next += 1
        front, nxt = nxt, front
        n_front = n_next
        level += 1
    return cap + 1
