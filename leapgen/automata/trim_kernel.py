"""Trimming kernel: the states of a DFA that are reachable and co-reachable.

Two graph searches: forward from the start, backward from the accepting
states over a predecessor list in CSR form. Compiled with numba when
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
    n = trans.shape[0]
    stack = np.empty(n, np.int64)
    reach = np.zeros(n, np.bool_)
    reach[start] = True
    stack[0] = start
    top = 1
    while top > 0:
        top -= 1
        q = stack[top]
        for b in columns:
            t = trans[q, b]
            if t >= 0 and not reach[t]:
                reach[t] = True
                stack[top] = t
                top += 1
    # predecessors of reachable states, in CSR
    pred_start = np.zeros(n + 1, np.int64)
    for q in range(n):
        if reach[q]:
            for b in columns:
                t = trans[q, b]
                if t >= 0:
                    pred_start[t + 1] += 1
    for q in range(n):
        pred_start[q + 1] += pred_start[q]
    fill = pred_start[:n].copy()
    pred = np.empty(pred_start[n], np.int64)
    for q in range(n):
        if reach[q]:
            for b in columns:
                t = trans[q, b]
                if t >= 0:
                    pred[fill[t]] = q
                    fill[t] += 1
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
