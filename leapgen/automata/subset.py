"""NFA -> DFA: Rabin-Scott subset construction over byte classes.

Symbols that no NFA edge tells apart share a *byte class*, so the work scales
with the alphabet the grammar really uses rather than 256 (plus call
symbols). :func:`determinize_classes` runs the numba kernel of
:mod:`leapgen.automata.determinize_kernel` when numba is installed, and
:func:`determinize_reference` (pure Python, frozenset closures; also the
tests' oracle) otherwise.
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.limits import check_deadline, current_deadline, deadline_error, intern_state, too_many_states

try:
    from leapgen.automata import determinize_kernel as _kernel
except ImportError:  # pragma: no cover - numba missing
    _kernel = None


def byte_classes(edges: np.ndarray, alphabet: int) -> tuple[np.ndarray, int]:
    """Partition the symbols ``0 .. alphabet - 1`` at every edge range bound.

    Parameters
    ----------
    edges : numpy.ndarray
        int32, ``(m, 4)``: rows ``(s, lo, hi, t)``.
    alphabet : int

    Returns
    -------
    byte_class : numpy.ndarray
        int32, ``(alphabet,)``: class of each symbol, classes numbered in
        symbol order.
    n_classes : int
    """
    bounds = np.unique(np.concatenate(([0, alphabet], edges[:, 1], edges[:, 2] + 1)))
    byte_class = (np.searchsorted(bounds, np.arange(alphabet), side="right") - 1).astype(np.int32)
    return byte_class, len(bounds) - 1


def class_moves(edges: np.ndarray, byte_class: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split range edges into one edge per byte class.

    Parameters
    ----------
    edges : numpy.ndarray
        int32, ``(m, 4)``: rows ``(s, lo, hi, t)``.
    byte_class : numpy.ndarray
        int32, ``(alphabet,)``, from :func:`byte_classes`.

    Returns
    -------
    src, cls, dst : numpy.ndarray
        int32, ``(m_classes,)``: edges ``src --cls--> dst``.
    """
    first = byte_class[edges[:, 1]]
    counts = (byte_class[edges[:, 2]] - first + 1).astype(np.int64)
    run_start = np.repeat(np.cumsum(counts) - counts, counts)
    cls = np.repeat(first, counts) + (np.arange(int(counts.sum())) - run_start)
    return np.repeat(edges[:, 0], counts), cls.astype(np.int32), np.repeat(edges[:, 3], counts)


def determinize(nfa, starts: list[int], end: int, max_states: int, *,
                alphabet: int = 256) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Subset construction from one or more NFA start states.

    Parameters
    ----------
    nfa : leapgen.automata.nfa.Nfa
        Not mutated.
    starts : list of int
        NFA start states.
    end : int
        The accepting NFA state.
    max_states : int
        Most DFA states allowed.
    alphabet : int
        Symbols: 256 bytes, plus call symbols for a rule body.

    Returns
    -------
    trans : numpy.ndarray
        int32, shape ``(n_states, alphabet)``, -1 = dead.
    accepting : numpy.ndarray
        bool, ``(n_states,)``: the subset holds ``end``.
    start_ids : list of int
        The DFA state of each NFA start (subsets are shared between starts).

    Raises
    ------
    CompileLimitError
        More than ``max_states`` DFA states, or the compile time limit
        (:mod:`leapgen.automata.limits`) passed.
    """
    table, accepting, start_ids, byte_class = determinize_classes(nfa, starts, end, max_states, alphabet=alphabet)
    return np.ascontiguousarray(table[:, byte_class]), accepting, start_ids


def determinize_classes(nfa, starts: list[int], end: int, max_states: int, *,
                        alphabet: int = 256) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray]:
    """:func:`determinize` with the table kept over byte classes.

    Same parameters and raises; returns ``(table, accepting, start_ids,
    byte_class)``: ``table`` is int32 ``(n_states, n_classes)`` and
    ``byte_class`` int32 ``(alphabet,)`` maps each symbol to its column.
    The numba kernel when numba is installed, :func:`determinize_reference`
    otherwise.
    """
    if _kernel is None:
        return determinize_reference(nfa, starts, end, max_states, alphabet=alphabet)
    eps, edges = nfa.arrays()
    byte_class, k, eps_start, eps_dst, move_start, move_class, move_dst, important = _kernel.nfa_arrays(
        eps, edges, nfa.n_states, alphabet, end)
    deadline = current_deadline()
    status, table, accepting, start_ids = _kernel.subset_construction(
        eps_start, eps_dst, move_start, move_class, move_dst, important, np.asarray(starts, np.int32), end, k,
        max_states, np.inf if deadline is None else deadline)
    if status == _kernel.DEADLINE_PASSED:
        raise deadline_error("subset construction")
    if status == _kernel.TOO_MANY_STATES:
        raise too_many_states(max_states)
    return table, accepting, start_ids.tolist(), byte_class


def determinize_reference(nfa, starts: list[int], end: int, max_states: int, *,
                          alphabet: int = 256) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray]:
    """:func:`determinize_classes` in pure Python: DFA states are frozensets of
    NFA states (whole epsilon closures). Same parameters, returns and raises."""
    eps, edges = nfa.arrays()
    byte_class, k = byte_classes(edges, alphabet)
    src, cls, dst = class_moves(edges, byte_class)
    eps_adj: list[list[int]] = [[] for _ in range(nfa.n_states)]
    for s, t in eps.tolist():
        eps_adj[s].append(t)
    moves: list[dict[int, list[int]]] = [{} for _ in range(nfa.n_states)]
    for s, c, t in zip(src.tolist(), cls.tolist(), dst.tolist()):
        moves[s].setdefault(c, []).append(t)
    closure_cache: dict[frozenset, frozenset] = {}

    def closure(seeds: frozenset) -> frozenset:
        got = closure_cache.get(seeds)
        if got is None:
            seen = set(seeds)
            stack = list(seeds)
            while stack:
                for t in eps_adj[stack.pop()]:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            got = closure_cache[seeds] = frozenset(seen)
        return got

    ids: dict[frozenset, int] = {}
    sets: list[frozenset] = []
    start_ids = []
    for start in starts:
        first = closure(frozenset((start,)))
        if first not in ids:
            ids[first] = len(sets)
            sets.append(first)
        start_ids.append(ids[first])
    rows: list[list[int]] = []
    i = 0
    while i < len(sets):
        check_deadline("subset construction")
        acc: dict[int, set[int]] = {}
        for s in sets[i]:
            for c, ts in moves[s].items():
                got = acc.get(c)
                if got is None:
                    acc[c] = set(ts)
                else:
                    got.update(ts)
        row = [-1] * k
        for c, ts in acc.items():
            row[c] = intern_state(ids, sets, closure(frozenset(ts)), max_states)
        rows.append(row)
        i += 1
    table = np.array(rows, np.int32).reshape(len(rows), k)
    accepting = np.array([end in s for s in sets], bool)
    return table, accepting, start_ids, byte_class
