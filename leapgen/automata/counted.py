"""Counted regions: repetitions whose count a matcher keeps beside its DFA state.

A JSON string with ``maxLength: 255`` is ``"`` + 0 to 255 characters + ``"``; written out as a
regular automaton it needs a copy of a character's ~20 states per count (5,000 states), and
every position in the string is a state of its own, so each token in it is a first visit
(its mask computed anew). :class:`~leapgen.grammar.ir.Counted` keeps one copy of the item in a
loop instead, and the count moves to the matcher: its state is ``(dfa state, count)``.

:func:`~leapgen.automata.dfa.compile_counted_dfa` builds the loop with two symbols per region
bounds ``k`` beside the bytes: ``256 + 2k`` (*an item starts*: the count goes up, and may not
pass ``hi``) and ``257 + 2k`` (*the region ends*: the count must have reached ``lo``). Subset
construction and minimization treat them as ordinary symbols, so the DFA stays exact and
minimal over bytes and symbols. At run time the symbols are taken between bytes, where a byte
calls for them (:meth:`CountedDfa.step`). That is deterministic when

- a state with the symbols (a *boundary*: before an item or at the region's end) has no byte
  edge of its own and the symbols of one region only;
- the bytes that may start an item and the bytes that may follow the region are disjoint
  (a JSON string's characters never start with ``"``), and neither target is a boundary;
- the item is a prefix code, so the states inside an item (*interior* states) belong to one
  region and are entered only from its boundary.

:class:`CountedDfa` checks these and raises :class:`Uncountable` where they fail (two regions
that overlap in one DFA state, as an ``anyOf`` of two bounded strings); the compiler then
builds the expansion instead. Outside every region the count is 0.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from leapgen.automata.dfa_table import Dfa
from leapgen.automata.tables import empty_table
from leapgen.errors import GrammarError


#: Count bounds from here on are not counted (counts are int64, whose maximum marks "no ``hi``"): a
#: region bounded past it raises :class:`Uncountable`, and the compiler writes the lengths out instead.
MAX_BOUND = 2**62


class Uncountable(GrammarError):
    """A DFA's counted regions cannot be followed deterministically (see the module docstring), or
    a bound is :data:`MAX_BOUND` or more."""


class CountedDfa:
    """A DFA with counted regions, read for matching (immutable).

    Parameters
    ----------
    dfa : Dfa
        From :func:`~leapgen.automata.dfa.compile_counted_dfa`: ``256 + 2 * len(bounds)`` columns.
    bounds : sequence of (int, int or None)
        ``(lo, hi)`` of each region number; ``hi`` None is unbounded.

    Attributes
    ----------
    dfa : Dfa
    bounds : tuple of (int, int or None)
        As given: what the DFA and the bounds are rebuilt from (a pickle holds these two only).
    n_states : int
    byte_trans : numpy.ndarray
        int32 ``(n_states * 256,)``: the byte edges (``-1`` none); boundaries have none.
    flat_trans : numpy.ndarray
        int32 ``(n_states * 256,)``: the byte DFA of the language with every count dropped (a
        boundary's byte goes where the item or the region's end takes it); trimmed, as ``dfa``.
    item_to, end_to : numpy.ndarray
        int32 ``(n_states,)``: a boundary's targets on its two symbols (``-1`` none).
    boundary_region : numpy.ndarray
        int32 ``(n_states,)``: the region number of a boundary, ``-1`` elsewhere.
    region_of : numpy.ndarray
        int32 ``(n_states,)``: the region of a boundary or an interior state, ``-1`` outside.
    lo, hi : numpy.ndarray
        int64 ``(n_regions,)``: each region's bounds (``hi`` of an unbounded region: the int64 maximum).
    entry_bytes : numpy.ndarray
        bool ``(256,)``: the bytes that enter a region from outside (``"`` for JSON strings), or
        that follow its end.

    Raises
    ------
    Uncountable
        The regions cannot be followed deterministically.
    """

    def __init__(self, dfa: Dfa, bounds):
        n, k = dfa.n_states, len(bounds)
        if any(lo >= MAX_BOUND or (hi is not None and hi >= MAX_BOUND) for lo, hi in bounds):
            raise Uncountable(f"a count bound of 2**62 or more ({bounds})")
        trans = np.asarray(dfa.trans)
        if trans.shape[1] != 256 + 2 * k:
            raise ValueError(f"a counted DFA over {k} regions has {256 + 2 * k} columns, not {trans.shape[1]}")
        self.dfa = dfa
        self.bounds = tuple((int(lo), None if hi is None else int(hi)) for lo, hi in bounds)
        self.n_states = n
        byte = empty_table((n, 256), np.int32)  # the tables are new memory: small pages (see tables.py)
        byte[...] = trans[:, :256]
        sym = trans[:, 256:].reshape(n, k, 2)
        in_region = (sym >= 0).any(axis=2)  # (n, k)
        if (in_region.sum(axis=1) > 1).any():
            raise Uncountable("a state is at the edge of two counted regions")
        boundary = in_region.any(axis=1)
        region = np.where(boundary, np.argmax(in_region, axis=1), -1).astype(np.int32)
        rows = np.flatnonzero(boundary)
        item_to = np.full(n, -1, np.int32)
        end_to = np.full(n, -1, np.int32)
        item_to[rows] = sym[rows, region[rows], 0]
        end_to[rows] = sym[rows, region[rows], 1]
        if (byte[rows] >= 0).any():
            raise Uncountable("a counted region's loop state has byte edges of its own")
        for targets in (item_to[rows], end_to[rows]):
            hit = targets[targets >= 0]
            if boundary[hit].any():
                raise Uncountable("a counted region's symbol leads to another region's loop")
        starts = (item_to[rows] >= 0)[:, None] & (byte[np.maximum(item_to[rows], 0)] >= 0)
        after = (end_to[rows] >= 0)[:, None] & (byte[np.maximum(end_to[rows], 0)] >= 0)
        if (starts & after).any():
            raise Uncountable("a byte may both start a counted item and follow its region")
        self.region_of = self._interiors(byte, boundary, region, item_to)
        flat = empty_table((n, 256), np.int32)
        flat[...] = byte
        for targets in (item_to[rows], end_to[rows]):
            go = byte[np.maximum(targets, 0)]
            flat[rows] = np.where((targets >= 0)[:, None] & (go >= 0), go, flat[rows])
        outside = self.region_of < 0
        boundary_or_dead = np.append(boundary, False)  # index -1 (dead) reads False: no int32 temporary
        entry = (boundary_or_dead[byte] & outside[:, None]).any(axis=0)
        entry |= after.any(axis=0)
        self.entry_bytes = entry
        self.byte_trans = byte.reshape(-1)
        self.flat_trans = np.ascontiguousarray(flat.reshape(-1))
        self.item_to, self.end_to, self.boundary_region = item_to, end_to, region
        big = np.iinfo(np.int64).max
        self.lo = np.array([lo for lo, _ in bounds], np.int64)
        self.hi = np.array([big if hi is None else hi for _, hi in bounds], np.int64)
        self._byte = byte
        self._byte_rows: list = [None] * n  # each state's row as a list, made at its first step (see _row)
        self._item_list, self._end_list = item_to.tolist(), end_to.tolist()
        self._region_list = region.tolist()
        self._lo_list, self._hi_list = self.lo.tolist(), self.hi.tolist()

    def __reduce__(self):
        # The tables are derived from the DFA and the bounds: a pickle (the compile worker's reply)
        # carries these two, not the Python lists of every row.
        return CountedDfa, (self.dfa, self.bounds)

    @staticmethod
    def _interiors(byte: np.ndarray, boundary: np.ndarray, region: np.ndarray, item_to: np.ndarray) -> np.ndarray:
        """Each state's region: a boundary's own, an interior state's (reached from a region's item
        start by bytes, before the next boundary), ``-1`` outside.

        Raises
        ------
        Uncountable
            A state inside two regions, or one entered by a byte from outside its region.
        """
        out = np.where(boundary, region, -1).astype(np.int32)
        queue = deque()
        for q in np.flatnonzero(item_to >= 0).tolist():
            t = int(item_to[q])
            if out[t] == -1:
                out[t] = region[q]
                queue.append(t)
            elif out[t] != region[q]:
                raise Uncountable("two counted regions share an item's states")
        while queue:
            q = queue.popleft()
            for t in byte[q][byte[q] >= 0].tolist():
                if boundary[t]:
                    continue
                if out[t] == -1:
                    out[t] = out[q]
                    queue.append(t)
                elif out[t] != out[q]:
                    raise Uncountable("two counted regions share an item's states")
        interior = (out >= 0) & ~boundary
        # an interior state is entered only from its own region (an item start or a byte inside it)
        src, col = np.nonzero(byte >= 0)
        dst = byte[src, col]
        bad = interior[dst] & (out[src] != out[dst])
        if bad.any():
            raise Uncountable("a counted item's state is entered from outside its region")
        return out

    @property
    def start(self) -> tuple[int, int]:
        """The matcher state before any input: ``(dfa start, 0)``."""
        return (self.dfa.start, 0)

    def step(self, q: int, c: int, b: int) -> tuple[int, int] | None:
        """The state after byte ``b`` from ``(q, c)``, or None where the byte or the count is refused
        (pure). At a boundary the byte starts an item (the count goes up; not past ``hi``) or ends the
        region (the count must be at least ``lo``; 0 after)."""
        t = (self._byte_rows[q] or self._row(q))[b]
        if t >= 0:
            return t, c
        k = self._region_list[q]
        if k < 0:
            return None
        s = self._item_list[q]
        if s >= 0:
            t = (self._byte_rows[s] or self._row(s))[b]
            if t >= 0:
                return (t, c + 1) if c < self._hi_list[k] else None
        s = self._end_list[q]
        if s >= 0:
            t = (self._byte_rows[s] or self._row(s))[b]
            if t >= 0:
                return (t, 0) if c >= self._lo_list[k] else None
        return None

    def _row(self, q: int) -> list:
        """State ``q``'s byte edges as a list, kept (a list of every row cost ~17 ms at the construction
        of a 5,000-state DFA, where a walk reads a few dozen rows). Mutates only that memo."""
        row = self._byte_rows[q] = self._byte[q].tolist()
        return row

    def walk(self, state: tuple[int, int], data: bytes) -> tuple[int, int] | None:
        """The state after ``data`` (:meth:`step` byte by byte), or None if refused (pure)."""
        q, c = state
        rows = self._byte_rows
        for b in data:
            t = (rows[q] or self._row(q))[b]
            if t >= 0:
                q = t
                continue
            got = self.step(q, c, b)
            if got is None:
                return None
            q, c = got
        return q, c

    def next_bytes(self, state: tuple[int, int]) -> np.ndarray:
        """bool ``(256,)``: the bytes :meth:`step` takes from ``state`` (pure)."""
        q, c = state
        out = self._byte[q] >= 0
        k = self._region_list[q]
        if k >= 0:
            s, e = self._item_list[q], self._end_list[q]
            if s >= 0 and c < self._hi_list[k]:
                out |= self._byte[s] >= 0
            if e >= 0 and c >= self._lo_list[k]:
                out |= self._byte[e] >= 0
        return out
