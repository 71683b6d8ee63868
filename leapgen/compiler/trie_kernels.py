"""Token-trie kernels: build the vocabulary trie, walk it through a DFA.

A depth-first walk of the token trie from a DFA state visits only the trie
nodes whose prefix is still alive, so a restrictive state (inside a JSON key,
after ``{``) costs microseconds, and shared prefixes are walked once. A
second walk follows an automaton built lazily (pushdown configurations,
one transition computed in Python per (state, byte) the walk needs) and
enters only subtrees holding candidate tokens. The kernels are compiled with
numba when it is installed; otherwise the numpy column walk of
:mod:`leapgen.compiler.token_index` is used.
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.jit import njit, njit_inline

#: Depths the per-depth arrays of a trie walk start with (they grow past it: see ``_deeper``).
WALK_DEPTH = 64


@njit
def build_trie(byte_matrix, lengths, order):
    """Build a trie of tokens given in lexicographic ``order``.

    Returns (child_start, child_end, child_byte, child_node, node_tok_start,
    node_tok_end, node_toks, sub_tok_end, node_byte, node_depth, node_end)
    as int32 arrays (``node_byte`` uint8); node 0 is the root; the children
    of node ``n`` are ``child_node[child_start[n]:child_end[n]]``, the tokens
    (rows of ``byte_matrix``) ending at ``n`` are
    ``node_toks[node_tok_start[n]:node_tok_end[n]]``, and those ending in its
    subtree ``node_toks[node_tok_start[n]:sub_tok_end[n]]`` (nodes are in
    preorder, tokens in lexicographic order). The linear layout: node ``n``
    is entered with byte ``node_byte[n]`` at depth ``node_depth[n]``, and its
    subtree is the nodes ``n:node_end[n]``.
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
    node_end, sub_tok_end = _subtree_ends(child_start, child_end, child_node, node_tok_start, n_tok)
    depth = np.zeros(n_nodes, np.int32)
    for v in range(1, n_nodes):
        depth[v] = depth[parent[v]] + 1
    return (child_start, child_end, child_byte, child_node, node_tok_start, node_tok_end, node_toks, sub_tok_end,
            byte[:n_nodes].astype(np.uint8), depth, node_end)


@njit_inline
def _set_bits(words, node_toks, token_ids, lo, hi):
    """Set the bits of the tokens ``node_toks[lo:hi]`` in ``words``."""
    for k in range(lo, hi):
        t = token_ids[node_toks[k]]
        words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


@njit_inline
def _set_candidate_bits(words, candidate_words, node_toks, token_ids, lo, hi):
    """Set in ``words`` the bits of the tokens ``node_toks[lo:hi]`` that are set in ``candidate_words``."""
    for k in range(lo, hi):
        t = token_ids[node_toks[k]]
        bit = np.uint32(1) << np.uint32(t & 31)
        if candidate_words[t >> 5] & bit:
            words[t >> 5] |= bit


@njit
def trie_walk(trans_flat, start, state_class, child_start, child_end, child_byte, child_node, node_tok_start,
              node_tok_end, node_toks, sub_tok_end, node_byte, node_depth, node_end, token_ids, words_a, words_b):
    """Walk the token trie from DFA state ``start``; mutates ``words_a``/``words_b``.

    A token whose bytes all have transitions ends in some state ``q``: its
    bit is set in ``words_a`` when ``state_class[q] == 1`` and in ``words_b``
    when ``state_class[q] == 2`` (class 0: not set). Words are uint32, bit
    ``id % 32`` of word ``id // 32``. The nodes are scanned in preorder, a
    dead prefix skipping its subtree (the layout of llguidance's token trie:
    sequential reads, no stack).
    """
    n = node_byte.shape[0]
    state_at = np.empty(WALK_DEPTH, np.int32)
    state_at[0] = start
    v = 1
    while v < n:
        d = node_depth[v]
        nxt = trans_flat[state_at[d - 1] * 256 + node_byte[v]]
        if nxt < 0:
            v = node_end[v]
            continue
        state_at = _deeper(state_at, d)
        state_at[d] = nxt
        c = state_class[nxt]
        if c != 0:
            _set_bits(words_a if c == 1 else words_b, node_toks, token_ids, node_tok_start[v], node_tok_end[v])
        v += 1


@njit_inline
def _deeper(a, d):
    """``a``, or ``a`` with twice the room where index ``d`` does not fit: a walk's per-depth arrays
    start at :data:`WALK_DEPTH` entries and grow with the trie's depth (scanning ``node_depth`` for
    its maximum cost ~9 µs a walk with 128k tokens, as much as a restrictive state's whole walk)."""
    return a if d < a.shape[0] else _grow(a)


@njit
def _subtree_ends(child_start, child_end, child_node, node_tok_start, n_tok):
    """int32 ``(n_nodes,)`` twice: for each trie node ``v``, one past the last
    node of its subtree (nodes are in preorder), and the end of the range of
    ``node_toks`` positions ending in its subtree, which starts at
    ``node_tok_start[v]``."""
    n_nodes = child_start.shape[0]
    end_node = np.empty(n_nodes, np.int32)
    out = np.empty(n_nodes, np.int32)
    for v in range(n_nodes - 1, -1, -1):
        e = v + 1
        for k in range(child_start[v], child_end[v]):
            e = max(e, end_node[child_node[k]])
        end_node[v] = e
        out[v] = node_tok_start[e] if e < n_nodes else n_tok
    return end_node, out


@njit_inline
def _has_candidate(candidate_pos, node_tok_start, sub_tok_end, c):
    """Whether trie node ``c``'s subtree holds a candidate (binary search)."""
    lo = np.searchsorted(candidate_pos, node_tok_start[c])
    return lo < candidate_pos.shape[0] and candidate_pos[lo] < sub_tok_end[c]


@njit
def _grow(a):
    """``a`` with twice the room (the first half copied)."""
    return np.concatenate((a, np.empty_like(a)))


@njit
def lazy_trie_walk(rows, stack_node, stack_state, n_stack, child_start, child_end, child_byte, child_node,
                   node_tok_start, node_tok_end, node_toks, sub_tok_end, node_byte, node_depth, node_end, token_ids,
                   candidate_pos, candidate_words, out_words):
    """Walk the trie's candidate tokens through an automaton built lazily.

    ``rows[q, b]`` is the next state, ``-1`` dead, ``-2`` not computed yet.
    The walk starts from the ``n_stack`` (node, state) pairs on the stacks
    and enters a child only when its subtree holds a candidate (positions in
    ``node_toks``, sorted ``candidate_pos``); a candidate token ending in a
    reached node gets its bit set in ``out_words`` (mutated). A pair one of
    whose needed transitions is not computed is set aside whole.

    Returns
    -------
    blocked_node, blocked_state : numpy.ndarray
        int32: the pairs set aside; resume from them once the transitions
        are computed.
    need_state, need_byte : numpy.ndarray
        int32: the transitions they need (may repeat).
    """
    blocked_node = np.empty(16, np.int32)
    blocked_state = np.empty(16, np.int32)
    need_state = np.empty(64, np.int32)
    need_byte = np.empty(64, np.int32)
    n_blocked = 0
    n_need = 0
    top = n_stack
    while top > 0:
        top -= 1
        v = stack_node[top]
        s = stack_state[top]
        blocked = False
        for k in range(child_start[v], child_end[v]):
            if rows[s, child_byte[k]] == -2 and _has_candidate(candidate_pos, node_tok_start, sub_tok_end,
                                                                 child_node[k]):
                if n_need == need_state.shape[0]:
                    need_state, need_byte = _grow(need_state), _grow(need_byte)
                need_state[n_need] = s
                need_byte[n_need] = child_byte[k]
                n_need += 1
                blocked = True
        if blocked:
            if n_blocked == blocked_node.shape[0]:
                blocked_node, blocked_state = _grow(blocked_node), _grow(blocked_state)
            blocked_node[n_blocked] = v
            blocked_state[n_blocked] = s
            n_blocked += 1
            continue
        for k in range(child_start[v], child_end[v]):
            nxt = rows[s, child_byte[k]]
            c = child_node[k]
            if nxt < 0 or not _has_candidate(candidate_pos, node_tok_start, sub_tok_end, c):
                continue
            _set_candidate_bits(out_words, candidate_words, node_toks, token_ids, node_tok_start[c], node_tok_end[c])
            if top >= stack_node.shape[0]:
                stack_node, stack_state = _grow(stack_node), _grow(stack_state)
            stack_node[top] = c
            stack_state[top] = nxt
            top += 1
    return blocked_node[:n_blocked], blocked_state[:n_blocked], need_state[:n_need], need_byte[:n_need]


#: :func:`row_walk` and :mod:`~leapgen.compiler.pda_kernels`' frame walks scan the subtrees of the nodes this deep
#: in preorder (depth first above them).
SCAN_DEPTH = 2


def walk_records(trie: tuple, token_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trie of :func:`build_trie` (``trie``: its arrays) laid out for :func:`row_walk` and
    :func:`~leapgen.compiler.pda_kernels.frame_walk` / ``frame_walk_via``, which read only live
    nodes near the root and scan in preorder below.

    A preorder scan from the root (:func:`trie_walk`) reads each node it meets, the dead
    children of live nodes included, in five arrays, and skips a dead subtree by a jump: with a
    128k-token trie (10 MB) a restrictive state's walk is mostly cache misses among the root's and
    its children's subtrees. Here a node's children are one contiguous run of ``(byte, node)``
    pairs, checked against the DFA without touching the dead ones, down to :data:`SCAN_DEPTH`; the
    subtrees there (small, and dense where they are live) are scanned in preorder, one 16-byte
    record a node. Regular rows of JSONSchemaBench's Glaiveai2K (tune half) replayed with cold
    caches: median 90 -> 58 µs, p99 185 -> 124; warm: 7.4 -> 4.0 µs (the scan from the root in
    the same process). Context-free frames' walks (120 tune schemas' 23k frame sorts, cold):
    median 92 -> 57 µs, p90 204 -> 164, p99 373 -> 314. A depth-first walk all the way down was
    slower on dense walks (most of the vocabulary live): 1.4-1.7x the scan's time on frames.

    Parameters
    ----------
    trie : tuple of numpy.ndarray
        :func:`build_trie`'s arrays.
    token_ids : numpy.ndarray
        int32: the token id of each of its rows.

    Returns
    -------
    node_rec : numpy.ndarray
        int32 ``(n_nodes + 1, 4)``, a row per node: its children are
        ``child_rec[node_rec[v, 0]:node_rec[v + 1, 0]]``, the tokens ending at it
        ``tok_ids[node_rec[v, 1]:node_rec[v + 1, 1]]``, its subtree the nodes ``v:node_rec[v, 2]``,
        and ``node_rec[v, 3]`` is the byte it is entered with plus 256 times its depth.
    child_rec : numpy.ndarray
        int32 ``(n_children, 2)``: each child's byte and node.
    tok_ids : numpy.ndarray
        int32: the token ids in the order of ``node_toks`` (preorder).
    """
    (child_start, child_end, child_byte, child_node, node_tok_start, node_tok_end, node_toks, _, node_byte,
     node_depth, node_end) = trie
    n = child_start.shape[0]
    node_rec = np.zeros((n + 1, 4), np.int32)
    node_rec[:n, 0], node_rec[n, 0] = child_start, child_end[-1]  # starts are running sums: v's end is v+1's start
    node_rec[:n, 1], node_rec[n, 1] = node_tok_start, node_tok_end[-1]
    node_rec[:n, 2], node_rec[n, 2] = node_end, n
    node_rec[:n, 3] = node_byte.astype(np.int32) + (node_depth << 8)
    m = int(child_end[-1])
    child_rec = np.empty((max(m, 1), 2), np.int32)
    child_rec[:m, 0], child_rec[:m, 1] = child_byte[:m], child_node[:m]
    tok_ids = np.ascontiguousarray(token_ids[node_toks[:node_rec[n, 1]]], np.int32)  # node_toks has 1 entry if empty
    for a in (node_rec, child_rec, tok_ids):
        a.flags.writeable = False
    return node_rec, child_rec, tok_ids


@njit_inline
def _push(stack_v, stack_s, top, v, s):
    """Push ``(v, s)`` at ``top`` (the stacks doubled where full); returns the stacks."""
    if top == stack_v.shape[0]:
        stack_v, stack_s = _grow(stack_v), _grow(stack_s)
    stack_v[top] = v
    stack_s[top] = s
    return stack_v, stack_s


@njit
def row_walk(trans_flat, start, state_class, init_words, has_init, node_rec, child_rec, tok_ids, words):
    """Write into ``words`` (uint32, as long as ``init_words``; mutated, returned) ``init_words``
    (where ``has_init``: a token slice's bits, else zeros) plus the tokens whose bytes all have
    transitions from ``start`` and end in a class-1 state (a regular grammar's row, in one call),
    over :func:`walk_records`' layout."""
    if has_init:
        words[:] = init_words
    else:
        words[:] = 0
    state_at = np.empty(WALK_DEPTH, np.int32)
    stack_v = np.empty(WALK_DEPTH, np.int32)
    stack_s = np.empty(WALK_DEPTH, np.int32)
    stack_v[0], stack_s[0] = 0, start
    top = 1
    while top > 0:
        top -= 1
        base = stack_s[top] * 256
        v = stack_v[top]
        for k in range(node_rec[v, 0], node_rec[v + 1, 0]):
            nxt = trans_flat[base + child_rec[k, 0]]
            if nxt < 0:
                continue
            c = child_rec[k, 1]
            if state_class[nxt] == 1:
                _set_ids(words, tok_ids, node_rec[c, 1], node_rec[c + 1, 1])
            if node_rec[c, 2] == c + 1:  # a leaf
                continue
            d0 = node_rec[c, 3] >> 8
            if d0 < SCAN_DEPTH:
                stack_v, stack_s = _push(stack_v, stack_s, top, c, nxt)
                top += 1
                continue
            state_at = _deeper(state_at, d0)  # c's subtree, in preorder
            state_at[d0] = nxt
            u, end = c + 1, node_rec[c, 2]
            while u < end:
                info = node_rec[u, 3]
                d = info >> 8
                q = trans_flat[state_at[d - 1] * 256 + (info & 255)]
                if q < 0:
                    u = node_rec[u, 2]
                    continue
                state_at = _deeper(state_at, d)
                state_at[d] = q
                if state_class[q] == 1:
                    _set_ids(words, tok_ids, node_rec[u, 1], node_rec[u + 1, 1])
                u += 1
    return words


@njit_inline
def _set_ids(words, tok_ids, lo, hi):
    """Set the bits of the tokens ``tok_ids[lo:hi]`` in ``words``."""
    for j in range(lo, hi):
        t = tok_ids[j]
        words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


@njit_inline
def _or_ids(words, row, tok_ids, lo, hi):
    """Set in ``words`` the bits ``row`` has of the tokens ``tok_ids[lo:hi]``."""
    for j in range(lo, hi):
        t = tok_ids[j]
        bit = np.uint32(1) << np.uint32(t & 31)
        if row[t >> 5] & bit:
            words[t >> 5] |= bit


@njit
def chain_states(trans_flat, start, in_class, max_depth, min_live):
    """The states reachable from ``start`` by at most ``max_depth`` bytes of ``in_class`` (bool
    ``(256,)``), breadth first (``start`` excluded), that have at least ``min_live`` live ASCII
    bytes: the candidates for the LOOP state that
    :func:`~leapgen.compiler.pda_kernels.frame_walk_via` jumps to (int64, at most 8; the search stops at
    64 states)."""
    seen = np.empty(64, np.int64)
    out = np.empty(8, np.int64)
    n_seen, n_out = 0, 0
    lo, hi = 0, 0
    for depth in range(max_depth):
        if depth > 0 and lo == hi:
            break
        n_sources = 1 if depth == 0 else hi - lo
        for si in range(n_sources):
            q = start if depth == 0 else seen[lo + si]
            base = q * 256
            for b in range(128):
                if not in_class[b]:
                    continue
                t = trans_flat[base + b]
                if t < 0 or t == start:
                    continue
                known = False
                for i in range(n_seen):
                    if seen[i] == t:
                        known = True
                        break
                if known:
                    continue
                if n_seen == seen.shape[0]:
                    return out[:n_out]
                seen[n_seen] = t
                n_seen += 1
                count = 0
                tb = t * 256
                for c in range(128):
                    if trans_flat[tb + c] >= 0:
                        count += 1
                if count >= min_live:
                    out[n_out] = t
                    n_out += 1
                    if n_out == out.shape[0]:
                        return out[:n_out]
        lo, hi = (0 if depth == 0 else hi), n_seen
    return out[:n_out]
