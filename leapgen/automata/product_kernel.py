"""Product construction kernel (numba): intersection and difference of DFAs.

The usual pair construction, breadth-first from the pair of start states,
over symbol classes shared by both tables. Pairs ``(p, q)`` are found
through an open-addressing hash table keyed by ``p * (n_b + 1) + q + 1``
(``q = -1``: ``b`` is dead, kept for the difference). The time limit and the
state limit are reported as status codes, as in
:mod:`leapgen.automata.determinize_kernel`.
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.clock import monotonic_seconds
from leapgen.automata.determinize_kernel import (DEADLINE_EVERY, DEADLINE_PASSED, OK, TOO_MANY_STATES, _grow1,
                                                 _grow_rows)
from leapgen.automata.jit import njit

_EMPTY = -1


@njit
def _slot(key, mask):
    h = key * np.int64(0x9E3779B97F4A7C15)
    return (h ^ (h >> 31)) & mask


@njit
def product_pairs(ta, tb, start_a, start_b, acc_a, acc_b, difference, max_states, deadline):
    """Reachable pairs of two DFAs and their transitions.

    Parameters
    ----------
    ta, tb : numpy.ndarray
        int32, ``(n_a, k)`` and ``(n_b, k)``: both DFAs over the same ``k``
        symbol classes; -1 = dead.
    start_a, start_b : int
    acc_a, acc_b : numpy.ndarray
        bool, ``(n_a,)`` and ``(n_b,)``.
    difference : bool
        False: intersection (both must move); True: ``a \\ b`` (``a`` must
        move; ``b`` may die).
    max_states : int
        Most pairs allowed.
    deadline : float
        ``time.monotonic()`` value past which the kernel stops; ``inf``: none.

    Returns
    -------
    status : int
        ``OK``, ``TOO_MANY_STATES`` or ``DEADLINE_PASSED`` (arrays then empty).
    table : numpy.ndarray
        int32, ``(n_pairs, k)``; pair 0 is the pair of starts.
    accepting : numpy.ndarray
        bool, ``(n_pairs,)``.
    """
    k = ta.shape[1]
    width = np.int64(tb.shape[0] + 1)
    timed = deadline < np.inf
    keys = np.empty(64, np.int64)
    table = np.empty((64, k), np.int32)
    slots = np.full(1024, _EMPTY, np.int32)
    keys[0] = start_a * width + start_b + 1
    slots[_slot(keys[0], slots.shape[0] - 1)] = 0
    n = 1
    i = 0
    while i < n:
        if timed and i % DEADLINE_EVERY == 0 and monotonic_seconds() > deadline:
            return DEADLINE_PASSED, table[:0].copy(), np.zeros(0, np.bool_)
        p = keys[i] // width
        q = keys[i] % width - 1
        for c in range(k):
            pa = ta[p, c]
            qb = tb[q, c] if q >= 0 else -1
            if pa < 0 or (qb < 0 and not difference):
                table[i, c] = -1
                continue
            key = pa * width + qb + 1
            mask = slots.shape[0] - 1
            s = _slot(key, mask)
            found = -1
            while slots[s] != _EMPTY:
                if keys[slots[s]] == key:
                    found = slots[s]
                    break
                s = (s + 1) & mask
            if found < 0:
                if n >= max_states:
                    return TOO_MANY_STATES, table[:0].copy(), np.zeros(0, np.bool_)
                found = n
                n += 1
                keys = _grow1(keys, n)
                keys[found] = key
                table = _grow_rows(table, n)
                slots[s] = found
                if 2 * n > slots.shape[0]:
                    slots = np.full(2 * slots.shape[0], _EMPTY, np.int32)
                    mask = slots.shape[0] - 1
                    for j in range(n):
                        s = _slot(keys[j], mask)
                        while slots[s] != _EMPTY:
                            s = (s + 1) & mask
                        slots[s] = j
            table[i, c] = found
        i += 1
    accepting = np.zeros(n, np.bool_)
    for j in range(n):
        p = keys[j] // width
        q = keys[j] % width - 1
        b_accepts = q >= 0 and acc_b[q]
        accepting[j] = acc_a[p] and (not b_accepts if difference else b_accepts)
    return OK, table[:n].copy(), accepting
