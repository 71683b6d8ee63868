"""Trimming kernel: the states of a DFA that are reachable and co-reachable.

Two graph searches over the transitions in CSR form: forward from the start,
backward from the accepting states over a predecessor list. Compiled with numba when
installed (pure Python otherwise: same result, slower).
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.jit import njit


@njit
def useful_states(trans, start, accepting, columns):
    """Which states lie on some path from ``start`` to an accepting state.

    Parameters
    ----------
    trans : numpy.ndarray
        int32, ``(n, width)``; -1 = dead.
    start : int
    accepting : numpy.ndarray
        bool, ``(n,)``.
    columns : numpy.ndarray
        int64, the columns (symbols) paths may use, e.g. ``arange(width)``.

    Returns
    -------
    numpy.ndarray
        bool, ``(n,)``: reachable from ``start`` and able to reach an
        accepting state.
    """
    row_start, dst, _ = csr_edges(trans, columns)
    return useful_csr(row_start, dst, start, accepting)


@njit
def csr_edges(trans, columns):
    """The transitions of ``trans`` (int32 ``(n, width)``, -1 dead) on ``columns`` (int64), by
    tail: the successors of ``q`` are ``dst[row_start[q]:row_start[q + 1]]``, on the symbols
    ``label`` at the same places. Returns ``(row_start, dst, label)``, int64; mutates nothing."""
    n = trans.shape[0]
    row_start = np.zeros(n + 1, np.int64)
    for q in range(n):
        c = 0
        for b in columns:
            if trans[q, b] >= 0:
                c += 1
        row_start[q + 1] = row_start[q] + c
    dst = np.empty(row_start[n], np.int64)
    label = np.empty(row_start[n], np.int64)
    e = 0
    for q in range(n):
        for b in columns:
            t = trans[q, b]
            if t >= 0:
                dst[e] = t
                label[e] = b
                e += 1
    return row_start, dst, label


@njit
def useful_csr(row_start, dst, start, accepting):
    """:func:`useful_states` of transitions in CSR form: the successors of ``q`` are
    ``dst[row_start[q]:row_start[q + 1]]`` (``row_start`` int64 ``(n + 1,)``, ``dst`` int64);
    ``accepting`` bool ``(n,)``. Returns bool ``(n,)``; mutates nothing."""
    n = row_start.shape[0] - 1
    stack = np.empty(n, np.int64)
    reach = np.zeros(n, np.bool_)
    reach[start] = True
    stack[0] = start
    top = 1
    while top > 0:
        top -= 1
        q = stack[top]
        for i in range(row_start[q], row_start[q + 1]):
            t = dst[i]
            if not reach[t]:
                reach[t] = True
                stack[top] = t
                top += 1
    pred_start = np.zeros(n + 1, np.int64)  # predecessors of the reached states, CSR
    for q in range(n):
        if reach[q]:
            for i in range(row_start[q], row_start[q + 1]):
                pred_start[dst[i] + 1] += 1
    for q in range(n):
        pred_start[q + 1] += pred_start[q]
    fill = pred_start[:n].copy()
    pred = np.empty(pred_start[n], np.int64)
    for q in range(n):
        if reach[q]:
            for i in range(row_start[q], row_start[q + 1]):
                pred[fill[dst[i]]] = q
                fill[dst[i]] += 1
    live = np.zeros(n, np.bool_)
    top = 0
    for q in range(n):
        if reach[q] and accepting[q]:
            live[q] = True
            stack[top] = q
            top += 1
    while top > 0:
        top -= 1
        q = stack[top]
        for j in range(pred_start[q], pred_start[q + 1]):
            p = pred[j]
            if not live[p]:
                live[p] = True
                stack[top] = p
                top += 1
    return live
