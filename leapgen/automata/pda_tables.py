"""Kernels that lay a pushdown automaton's rule DFAs out over global state ids.

A context-free grammar's :class:`~leapgen.automata.pda.Pda` puts every rule's
byte transitions in one flat table and lists each state's call edges. With
tens of thousands of states and hundreds of call columns, numpy's
whole-table passes (a comparison, an offset, a ``where``, a copy per rule and
a ``nonzero`` over the call columns) made half of such a grammar's compile
time; these kernels read each table once. Compiled with numba when installed
(pure Python otherwise: same result, slower).
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.jit import njit


@njit
def rule_byte_table(trans, base, out, has_bytes):
    """Write one rule's byte transitions over global ids into ``out``.

    Parameters
    ----------
    trans : numpy.ndarray
        int32, ``(n, width)``, ``width >= 256``: the rule's DFA (bytes, then
        call symbols), ``-1`` dead.
    base : int
        The rule's first global state id.
    out : numpy.ndarray
        int32, ``(n * 256,)``: mutated, ``trans[q, b] + base`` at
        ``q * 256 + b`` (``-1`` dead).
    has_bytes : numpy.ndarray
        bool, ``(n,)``: mutated, whether state ``q`` has a byte transition.
    """
    for q in range(trans.shape[0]):
        any_byte = False
        for b in range(256):
            t = trans[q, b]
            if t >= 0:
                out[q * 256 + b] = t + base
                any_byte = True
            else:
                out[q * 256 + b] = -1
        has_bytes[q] = any_byte


@njit
def call_edges(trans, n_rules):
    """The call edges of one rule's DFA, by state then callee.

    Parameters
    ----------
    trans : numpy.ndarray
        int32, ``(n, 256 + n_rules)``: column ``256 + c`` calls rule ``c``.
    n_rules : int

    Returns
    -------
    state, callee, ret : numpy.ndarray
        int64, ``(m,)``: state ``state[i]`` calls ``callee[i]`` and goes on in
        ``ret[i]`` when it returns.
    """
    n = trans.shape[0]
    m = 0
    for q in range(n):
        for c in range(n_rules):
            if trans[q, 256 + c] >= 0:
                m += 1
    state = np.empty(m, np.int64)
    callee = np.empty(m, np.int64)
    ret = np.empty(m, np.int64)
    i = 0
    for q in range(n):
        for c in range(n_rules):
            t = trans[q, 256 + c]
            if t >= 0:
                state[i] = q
                callee[i] = c
                ret[i] = t
                i += 1
    return state, callee, ret
