"""The token walk of a DFA with counted regions (numba kernel; see :mod:`leapgen.automata.counted`)."""

from __future__ import annotations

import numpy as np

from leapgen.automata.jit import njit, njit_inline


@njit
def count_bytes_in(byte_matrix, byte_lengths, byte_set):
    """int32 ``(rows,)``: how many of each row's bytes are in bool ``byte_set`` ``(256,)``."""
    out = np.zeros(byte_matrix.shape[0], np.int32)
    for r in range(byte_matrix.shape[0]):
        n = 0
        for i in range(byte_lengths[r]):
            if byte_set[byte_matrix[r, i]]:
                n += 1
        out[r] = n
    return out


@njit
def refuse_counted(words, n_long, candidates, refused, byte_trans, item_to, end_to, boundary_region, lo, hi, q0, c0,
                   byte_matrix, byte_lengths, row_of_id, id_of_row):
    """Set in ``refused`` the bit of every token set in ``words`` whose bytes the counts refuse from
    the state ``(q0, c0)``, as :meth:`CountedDfa.step <leapgen.automata.counted.CountedDfa.step>`
    walks them, among the tokens of the first ``n_long`` byte-matrix rows (the longest tokens) and
    the tokens of ``candidates``; return how many were refused (a token in both counts twice).

    Parameters
    ----------
    words : numpy.ndarray
        uint32 bitset ``(ceil(vocab_size / 32),)``: the tokens the walk ignoring counts allows.
    n_long : int
        Rows of ``byte_matrix`` to walk, from the first (rows are sorted by length, longest first).
    candidates : numpy.ndarray
        int32 token ids: more tokens to walk (the others are not refused).
    refused : numpy.ndarray
        uint32 bitset of ``words``' shape, zeroed; mutated.
    byte_trans, item_to, end_to, boundary_region, lo, hi : numpy.ndarray
        :class:`~leapgen.automata.counted.CountedDfa`'s arrays.
    q0, c0 : int
        The state and the count.
    byte_matrix, byte_lengths, row_of_id, id_of_row : numpy.ndarray
        The vocabulary's bytes (uint8 ``(rows, max_len)``), their lengths (int32 ``(rows,)``), each
        token id's row (int32 ``(vocab_size,)``, ``-1`` for a token without bytes) and each row's
        token id (int32 ``(rows,)``).
    """
    count = 0
    for r in range(n_long):
        tok = id_of_row[r]
        if (words[tok >> 5] >> (tok & 31)) & 1 and _refused(byte_matrix, byte_lengths[r], r, byte_trans, item_to,
                                                            end_to, boundary_region, lo, hi, q0, c0):
            refused[tok >> 5] = refused[tok >> 5] | np.uint32(1 << (tok & 31))
            count += 1
    for n in range(candidates.shape[0]):
        tok = candidates[n]
        r = row_of_id[tok]
        if r >= 0 and (words[tok >> 5] >> (tok & 31)) & 1 and _refused(
                byte_matrix, byte_lengths[r], r, byte_trans, item_to, end_to, boundary_region, lo, hi, q0, c0):
            refused[tok >> 5] = refused[tok >> 5] | np.uint32(1 << (tok & 31))
            count += 1
    return count


@njit_inline
def _refused(byte_matrix, length, r, byte_trans, item_to, end_to, boundary_region, lo, hi, q0, c0):
    """Whether the counts refuse the bytes of row ``r`` from ``(q0, c0)`` (the walk of
    :meth:`CountedDfa.step <leapgen.automata.counted.CountedDfa.step>`)."""
    q = q0
    c = c0
    for i in range(length):
        b = byte_matrix[r, i]
        t = byte_trans[q * 256 + b]
        if t >= 0:
            q = t
            continue
        k = boundary_region[q]
        if k < 0:
            return True
        s = item_to[q]
        if s >= 0 and byte_trans[s * 256 + b] >= 0:
            if c >= hi[k]:
                return True
            c += 1
            q = byte_trans[s * 256 + b]
            continue
        s = end_to[q]
        if s >= 0 and byte_trans[s * 256 + b] >= 0:
            if c < lo[k]:
                return True
            c = 0
            q = byte_trans[s * 256 + b]
            continue
        return True
    return False


@njit
def counted_trie_allowed(allowed, byte_trans, item_to, end_to, boundary_region, lo, hi, q0, c0, depth, node_tok_start,
                         node_tok_end, node_toks, node_byte, node_depth, node_end, row_ids):
    """Set in ``allowed`` (uint32 bitset, zeroed; mutated) the bit of every token of the trie whose
    bytes the counted DFA takes from ``(q0, c0)`` (:func:`_refused` is False), in one pass over the
    trie's linear layout (:func:`~leapgen.compiler.trie_kernels.build_trie`: nodes in preorder, a
    refused node's subtree skipped), so its cost is the prefixes alive, not the tokens: near a
    region's ``hi`` few prefixes are (the tokens longer than the room, most of the vocabulary there,
    are not walked one by one as :func:`refuse_counted` walks them). ``depth``: more than the trie's
    deepest node's depth; ``row_ids``: the token id of each trie row. Returns how many tokens it set.
    Each step is :func:`_refused`'s, written out again: an inlined helper returning the pair
    ``(state, count)`` made the token walk 8-12x slower (20.8 ms against 2.0 for 123k tokens taking it
    at every byte, 14.7 ms taking it at a boundary only)."""
    qs = np.empty(depth, np.int64)
    cs = np.empty(depth, np.int64)
    qs[0] = q0
    cs[0] = c0
    count = 0
    n = 1
    while n < node_byte.shape[0]:
        d = node_depth[n]
        b = node_byte[n]
        q = qs[d - 1]
        c = cs[d - 1]
        t = byte_trans[q * 256 + b]
        if t < 0:
            t = -1
            k = boundary_region[q]
            if k >= 0:
                s = item_to[q]
                if s >= 0 and byte_trans[s * 256 + b] >= 0:
                    if c < hi[k]:
                        c += 1
                        t = byte_trans[s * 256 + b]
                else:
                    s = end_to[q]
                    if s >= 0 and byte_trans[s * 256 + b] >= 0 and c >= lo[k]:
                        c = 0
                        t = byte_trans[s * 256 + b]
        if t < 0:
            n = node_end[n]
            continue
        qs[d] = t
        cs[d] = c
        for i in range(node_tok_start[n], node_tok_end[n]):
            tok = row_ids[node_toks[i]]
            allowed[tok >> 5] = allowed[tok >> 5] | np.uint32(1 << (tok & 31))
            count += 1
        n += 1
    return count
