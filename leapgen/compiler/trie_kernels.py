"""Token-trie kernels: build the vocabulary trie, walk it through a DFA.

A depth-first walk of the token trie from a DFA state visits only the trie
nodes whose prefix is still alive, so a restrictive state (inside a JSON key,
after ``{``) costs microseconds, and shared prefixes are walked once. The
kernels are compiled with numba when it is installed; otherwise the numpy
column walk of :mod:`leapgen.compiler.token_index` is used.
"""

from __future__ import annotations

import numpy as np

try:  # numba is optional: leapgen stays importable and correct without it
    import numba

    _jit = numba.njit(cache=True, nogil=True)
except ImportError:  # pragma: no cover - exercised where numba is missing
    numba = None

    def _jit(f):
        return f

HAVE_NUMBA = numba is not None


@_jit
def build_trie(byte_matrix, lengths, order):
    """Build a trie of tokens given in lexicographic ``order``.

    Returns (child_start, child_end, child_byte, child_node, node_tok_start,
    node_tok_end, node_toks) as int32 arrays; node 0 is the root; the children
    of node ``n`` are ``child_node[child_start[n]:child_end[n]]``, and the
    tokens (rows of ``byte_matrix``) ending at ``n`` are
    ``node_toks[node_tok_start[n]:node_tok_end[n]]``.
    """
    n_tok = order.shape[0]
    total = 1
    for i in range(n_tok):
        total += lengths[order[i]]
    parent = np.full(total, -1, np.int32)
    byte = np.zeros(total, np.int32)
    tok_node = np.zeros(n_tok, np.int32)
    path = np.zeros(lengths.max() + 1 if n_tok else 1, np.int32)  # node at each depth of the previous token
    n_nodes = 1
    prev = -1
    for i in range(n_tok):
        r = order[i]
        ln = lengths[r]
        common = 0
        if prev >= 0:
            pl = lengths[prev]
            while common < ln and common < pl and byte_matrix[r, common] == byte_matrix[prev, common]:
                common += 1
        node = path[common]
        for d in range(common, ln):
            parent[n_nodes] = node
            byte[n_nodes] = byte_matrix[r, d]
            node = n_nodes
            n_nodes += 1
            path[d + 1] = node
        tok_node[i] = node
        prev = r
    # Nodes were created in DFS preorder, so children of a node are created in byte order.
    child_count = np.zeros(n_nodes, np.int32)
    for v in range(1, n_nodes):
        child_count[parent[v]] += 1
    child_start = np.zeros(n_nodes, np.int32)
    acc = 0
    for v in range(n_nodes):
        child_start[v] = acc
        acc += child_count[v]
    child_end = child_start.copy()
    child_byte = np.zeros(max(n_nodes - 1, 1), np.int32)
    child_node = np.zeros(max(n_nodes - 1, 1), np.int32)
    for v in range(1, n_nodes):
        p = parent[v]
        child_byte[child_end[p]] = byte[v]
        child_node[child_end[p]] = v
        child_end[p] += 1
    tok_count = np.zeros(n_nodes, np.int32)
    for i in range(n_tok):
        tok_count[tok_node[i]] += 1
    node_tok_start = np.zeros(n_nodes, np.int32)
    acc = 0
    for v in range(n_nodes):
        node_tok_start[v] = acc
        acc += tok_count[v]
    node_tok_end = node_tok_start.copy()
    node_toks = np.zeros(max(n_tok, 1), np.int32)
    for i in range(n_tok):
        v = tok_node[i]
        node_toks[node_tok_end[v]] = order[i]
        node_tok_end[v] += 1
    return child_start, child_end, child_byte, child_node, node_tok_start, node_tok_end, node_toks


@_jit
def trie_walk(trans_flat, start, state_class, child_start, child_end, child_byte, child_node,
              node_tok_start, node_tok_end, node_toks, token_ids, words_a, words_b):
    """Walk the token trie from DFA state ``start``; mutates ``words_a``/``words_b``.

    A token whose bytes all have transitions ends in some state ``q``: its
    bit is set in ``words_a`` when ``state_class[q] == 1`` and in ``words_b``
    when ``state_class[q] == 2`` (class 0: not set). Words are uint32, bit
    ``id % 32`` of word ``id // 32``.
    """
    stack_node = np.empty(4096, np.int32)
    stack_state = np.empty(4096, np.int32)
    top = 0
    stack_node[0] = 0
    stack_state[0] = start
    top = 1
    while top > 0:
        top -= 1
        v = stack_node[top]
        s = stack_state[top]
        c = state_class[s]
        if c != 0:
            for k in range(node_tok_start[v], node_tok_end[v]):
                t = token_ids[node_toks[k]]
                if c == 1:
                    words_a[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
                else:
                    words_b[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        base = s * 256
        for k in range(child_start[v], child_end[v]):
            nxt = trans_flat[base + child_byte[k]]
            if nxt >= 0:
                if top >= stack_node.shape[0]:
                    stack_node = np.concatenate((stack_node, np.empty_like(stack_node)))
                    stack_state = np.concatenate((stack_state, np.empty_like(stack_state)))
                stack_node[top] = child_node[k]
                stack_state[top] = nxt
                top += 1
