"""DFA minimization kernel: Valmari and Lehtinen's O(m log n) algorithm.

A. Valmari and P. Lehtinen, "Efficient minimization of DFAs with partial
transition functions", STACS 2008. Two refinable partitions, of states and of
transitions (grouped by label), refine each other; partial transition
functions need no dead state. Compiled with numba when installed (pure Python
otherwise: same result, slower).
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.jit import njit, njit_inline
from leapgen.automata.trim_kernel import csr_edges, useful_csr


# A refinable partition is one int64 array of 7 rows (numba reads these module
# constants as literals): the elements in block order (E), each element's place
# in E (L), its block (S); each block's first place (F), end (P), marked count
# (M); the touched blocks (W). One array instead of seven, with the helpers inlined:
# the minimization takes about half the time it did.
E, L, S, F, P, M, W = range(7)


@njit_inline
def _mark(e, X, w):
    """Mark element ``e`` of partition ``X``; ``w``: touched blocks so far. Returns the new count."""
    s = X[S, e]
    i = X[L, e]
    j = X[F, s] + X[M, s]
    X[E, i] = X[E, j]
    X[L, X[E, i]] = i
    X[E, j] = e
    X[L, e] = j
    if X[M, s] == 0:
        X[W, w] = s
        w += 1
    X[M, s] += 1
    return w


@njit_inline
def _split(X, w, z):
    """Split the ``w`` touched blocks of ``X`` into marked and unmarked (the smaller part gets
    the new block number); ``z``: blocks so far. Returns the new block count."""
    while w > 0:
        w -= 1
        s = X[W, w]
        j = X[F, s] + X[M, s]
        if j == X[P, s]:
            X[M, s] = 0
            continue
        if X[M, s] <= X[P, s] - j:
            X[F, z] = X[F, s]
            X[P, z] = j
            X[F, s] = j
        else:
            X[P, z] = X[P, s]
            X[F, z] = j
            X[P, s] = j
        for i in range(X[F, z], X[P, z]):
            X[S, X[E, i]] = z
        X[M, s] = 0
        X[M, z] = 0
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
    B = np.zeros((7, n + 1), np.int64)  # partition of states
    for q in range(n):
        B[E, q] = q
        B[L, q] = q
    B[P, 0] = n
    bz = 1
    w = 0
    for q in range(n):
        if accepting[q]:
            w = _mark(q, B, w)
    bz = _split(B, w, bz)
    # partition of transitions, by label (a stable counting sort)
    n_labels = 0
    for t in range(m):
        n_labels = max(n_labels, label[t] + 1)
    label_fill = np.zeros(n_labels + 1, np.int64)
    for t in range(m):
        label_fill[label[t] + 1] += 1
    for a in range(n_labels):
        label_fill[a + 1] += label_fill[a]
    C = np.zeros((7, m + 1), np.int64)
    for t in range(m):
        C[E, label_fill[label[t]]] = t
        label_fill[label[t]] += 1
    cz = 0
    if m > 0:
        a = label[C[E, 0]]
        for i in range(m):
            t = C[E, i]
            if label[t] != a:
                a = label[t]
                C[P, cz] = i
                cz += 1
                C[F, cz] = i
            C[S, t] = cz
            C[L, t] = i
        C[P, cz] = m
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
        for i in range(C[F, c], C[P, c]):
            w = _mark(tail[C[E, i]], B, w)
        bz = _split(B, w, bz)
        c += 1
        while b < bz:
            w = 0
            for i in range(B[F, b], B[P, b]):
                q = B[E, i]
                for j in range(adj_start[q], adj_start[q + 1]):
                    w = _mark(adj[j], C, w)
            cz = _split(C, w, cz)
            b += 1
    return B[S, :n].copy()


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
    row_start, dst, lab = csr_edges(table, np.arange(width))  # the transitions, read once
    live = useful_csr(row_start, dst, start, accepting)
    if not live[start]:
        return np.empty((0, symbol_class.shape[0]), np.int32), np.empty(0, np.bool_)
    new_id = np.full(n, -1, np.int64)
    k = 0
    m = 0
    for q in range(n):
        if live[q]:
            new_id[q] = k
            k += 1
            for i in range(row_start[q], row_start[q + 1]):
                if live[dst[i]]:
                    m += 1
    tail = np.empty(m, np.int64)
    label = np.empty(m, np.int64)
    head = np.empty(m, np.int64)
    acc = np.empty(k, np.bool_)
    e = 0
    for q in range(n):
        if live[q]:
            acc[new_id[q]] = accepting[q]
            for i in range(row_start[q], row_start[q + 1]):
                if live[dst[i]]:
                    tail[e] = new_id[q]
                    label[e] = lab[i]
                    head[e] = new_id[dst[i]]
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
