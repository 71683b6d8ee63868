"""The token walk of a DFA with counted regions (numba kernel; see :mod:`leapgen.automata.counted`)."""

from __future__ import annotations

import numpy as np

from leapgen.automata.jit import njit


@njit
def refuse_counted(words, candidates, byte_trans, item_to, end_to, boundary_region, lo, hi, q0, c0,
                   byte_matrix, byte_lengths, row_of_id):
    """Clear the bit of every token set in both ``words`` and ``candidates`` whose bytes the counts
    refuse from the state ``(q0, c0)``, as :meth:`CountedDfa.step <leapgen.automata.counted.CountedDfa.step>`
    walks them.

    Parameters
    ----------
    words : numpy.ndarray
        uint32 bitset ``(ceil(vocab_size / 32),)``, mutated: the tokens the walk ignoring counts allows.
    candidates : numpy.ndarray
        uint32 bitset of the same shape: the tokens to walk (the others are left as they are).
    byte_trans, item_to, end_to, boundary_region, lo, hi : numpy.ndarray
        :class:`~leapgen.automata.counted.CountedDfa`'s arrays.
    q0, c0 : int
        The state and the count.
    byte_matrix, byte_lengths, row_of_id : numpy.ndarray
        The vocabulary's bytes (uint8 ``(rows, max_len)``), their lengths (int32 ``(rows,)``) and each
        token id's row (int32 ``(vocab_size,)``, ``-1`` for a token without bytes).
    """
    for w in range(candidates.shape[0]):
        bits = candidates[w] & words[w]
        if bits == 0:
            continue
        for j in range(32):
            if not (bits >> j) & 1:
                continue
            r = row_of_id[w * 32 + j]
            if r < 0:
                continue
            q = q0
            c = c0
            ok = True
            for i in range(byte_lengths[r]):
                b = byte_matrix[r, i]
                t = byte_trans[q * 256 + b]
                if t >= 0:
                    q = t
                    continue
                k = boundary_region[q]
                if k < 0:
                    ok = False
                    break
                s = item_to[q]
                if s >= 0 and byte_trans[s * 256 + b] >= 0:
                    if c >= hi[k]:
                        ok = False
                        break
                    c += 1
                    q = byte_trans[s * 256 + b]
                    continue
                s = end_to[q]
                if s >= 0 and byte_trans[s * 256 + b] >= 0:
                    if c < lo[k]:
                        ok = False
                        break
                    c = 0
                    q = byte_trans[s * 256 + b]
                    continue
                ok = False
                break
            if not ok:
                words[w] = words[w] & np.uint32(0xFFFFFFFF ^ (1 << j))
