"""DFA minimization kernel: Valmari and Lehtinen's O(m log n) algorithm.

A. Valmari and P. Lehtinen, "Efficient minimization of DFAs with partial
transition functions", STACS 2008. Two refinable partitions, of states and of
transitions (grouped by label), refine each other; partial transition
functions need no dead state. Compiled with numba when installed (pure Python
otherwise: same result, slower).
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.jit import njit
from leapgen.automata.trim_kernel import useful_states


@njit
def _mark(e, E, L, S, F, M, W, w):
    s = S[e]
    i = L[e]
    j = F[s] + M[s]
    E[i] = E[j]
    L[E[i]] = i
    E[j] = e
    L[e] = j
    if M[s] == 0:
        W[w] = s
        w += 1
    M[s] += 1
    return w


@njit
def _split(E, S, F, P, M, W, w, z):
    while w > 0:
        w -= 1
        s = W[w]
        j = F[s] + M[s]
        if j == P[s]:
            M[s] = 0
            continue
        if M[s] <= P[s] - j:
            F[z] = F[s]
            P[z] = j
            F[s] = j
        else:
            P[z] = P[s]
            F[z] = j
            P[s] = j
        for i in range(F[z], P[z]):
            S[E[i]] = z
        M[s] = 0
        M[z] = 0
        z += 1
    return z


@njit
def minimize_blocks(n, tail, label, head, accepting):
    """Block (equivalence class) of each state of a trimmed DFA.

    Parameters
    ----------
    n : int
        Number of states (every one reachable and co-reachable).
    tail, label, head : numpy.ndarray
        int64, ``(m,)``: the transitions ``tail --label--> head``.
    accepting : numpy.ndarray
        bool, ``(n,)``.

    Returns
    -------
    numpy.ndarray
        int64, ``(n,)``: states with equal values are equivalent.
    """
    m = tail.shape[0]
    # partition of states
    BE = np.arange(n)
    BL = np.arange(n)
    BS = np.zeros(n, np.int64)
    BF = np.zeros(n + 1, np.int64)
    BP = np.zeros(n + 1, np.int64)
    BM = np.zeros(n + 1, np.int64)
    BW = np.zeros(n + 1, np.int64)
    BP[0] = n
    bz = 1
    w = 0
    for q in range(n):
        if accepting[q]:
            w = _mark(q, BE, BL, BS, BF, BM, BW, w)
    bz = _split(BE, BS, BF, BP, BM, BW, w, bz)
    # partition of transitions, by label (a stable counting sort)
    n_labels = 0
    for t in range(m):
        n_labels = max(n_labels, label[t] + 1)
    label_fill = np.zeros(n_labels + 1, np.int64)
    for t in range(m):
        label_fill[label[t] + 1] += 1
    for a in range(n_labels):
        label_fill[a + 1] += label_fill[a]
    CE = np.empty(m, np.int64)
    for t in range(m):
        CE[label_fill[label[t]]] = t
        label_fill[label[t]] += 1
    CL = np.zeros(m, np.int64)
    CS = np.zeros(m, np.int64)
    CF = np.zeros(m + 1, np.int64)
    CP = np.zeros(m + 1, np.int64)
    CM = np.zeros(m + 1, np.int64)
    CW = np.zeros(m + 1, np.int64)
    cz = 0
    if m > 0:
        a = label[CE[0]]
        CF[0] = 0
        for i in range(m):
            t = CE[i]
            if label[t] != a:
                a = label[t]
                CP[cz] = i
                cz += 1
                CF[cz] = i
            CS[t] = cz
            CL[t] = i
        CP[cz] = m
        cz += 1
    # incoming transitions per state
    adj_start = np.zeros(n + 1, np.int64)
    for t in range(m):
        adj_start[head[t] + 1] += 1
    for q in range(n):
        adj_start[q + 1] += adj_start[q]
    fill = adj_start.copy()
    adj = np.zeros(m, np.int64)
    for t in range(m):
        adj[fill[head[t]]] = t
        fill[head[t]] += 1
    b = 1
    c = 0
    while c < cz:
        w = 0
        for i in range(CF[c], CP[c]):
            w = _mark(tail[CE[i]], BE, BL, BS, BF, BM, BW, w)
        bz = _split(BE, BS, BF, BP, BM, BW, w, bz)
        c += 1
        while b < bz:
            w = 0
            for i in range(BF[b], BP[b]):
                q = BE[i]
                for j in range(adj_start[q], adj_start[q + 1]):
                    w = _mark(adj[j], CE, CL, CS, CF, CM, CW, w)
            cz = _split(CE, CS, CF, CP, CM, CW, w, cz)
            b += 1
    return BS


@njit
def minimize_table_kernel(table, accepting, start, symbol_class):
    """Trim, then minimize, a DFA over symbol classes, in one call.

    Parameters
    ----------
    table : numpy.ndarray
        int32, ``(n, width)``: transitions, -1 = dead.
    accepting : numpy.ndarray
        bool, ``(n,)``.
    start : int
    symbol_class : numpy.ndarray
        int32, ``(n_symbols,)``: the column of ``table`` of each symbol.

    Returns
    -------
    new_table : numpy.ndarray
        int32, ``(n_blocks, n_symbols)``: the minimal DFA over symbols, start
        state 0; no rows for the empty language.
    new_accepting : numpy.ndarray
        bool, ``(n_blocks,)``.
    """
    n, width = table.shape
    live = useful_states(table, start, accepting, np.arange(width))
    if not live[start]:
        return np.empty((0, symbol_class.shape[0]), np.int32), np.empty(0, np.bool_)
    new_id = np.full(n, -1, np.int64)
    k = 0
    m = 0
    for q in range(n):
        if live[q]:
            new_id[q] = k
            k += 1
            for c in range(width):
                t = table[q, c]
                if t >= 0 and live[t]:
                    m += 1
    tail = np.empty(m, np.int64)
    label = np.empty(m, np.int64)
    head = np.empty(m, np.int64)
    acc = np.empty(k, np.bool_)
    e = 0
    for q in range(n):
        if live[q]:
            acc[new_id[q]] = accepting[q]
            for c in range(width):
                t = table[q, c]
                if t >= 0 and live[t]:
                    tail[e] = new_id[q]
                    label[e] = c
                    head[e] = new_id[t]
                    e += 1
    blocks = minimize_blocks(k, tail, label, head, acc)
    n_blocks = 0
    for q in range(k):
        n_blocks = max(n_blocks, blocks[q] + 1)
    start_block = blocks[new_id[start]]  # renumbered to 0 (swapped with block 0)
    for q in range(k):
        if blocks[q] == start_block:
            blocks[q] = 0
        elif blocks[q] == 0:
            blocks[q] = start_block
    narrow = np.full((n_blocks, width), -1, np.int32)
    new_accepting = np.zeros(n_blocks, np.bool_)
    for i in range(m):
        narrow[blocks[tail[i]], label[i]] = blocks[head[i]]
    for q in range(k):
        new_accepting[blocks[q]] = acc[q]
    new_table = np.empty((n_blocks, symbol_class.shape[0]), np.int32)
    for b in range(n_blocks):
        for a in range(symbol_class.shape[0]):
            new_table[b, a] = narrow[b, symbol_class[a]]
    return new_table, new_accepting
