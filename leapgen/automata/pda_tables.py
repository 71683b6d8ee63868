"""The kernel that lays a pushdown automaton's rule DFAs out over global state ids.

A context-free grammar's :class:`~leapgen.automata.pda.Pda` puts every rule's
byte transitions in one flat table (its call edges are read by
:func:`~leapgen.automata.trim_kernel.csr_edges`). With tens of thousands of
states, numpy's whole-table passes (a comparison, an offset, a ``where`` and a
copy per rule, a ``nonzero`` over the call columns) were a third of such a
grammar's compile; the kernels read each table once. Compiled with numba when
installed (pure Python otherwise: same result, slower).
"""

from __future__ import annotations

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
