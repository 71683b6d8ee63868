"""Token-trie walks for context-free grammars (numba kernels).

A configuration's mask is split as xgrammar's adaptive token mask cache
splits tokens into context-independent and context-dependent ones (Dong et
al., 2024, "XGrammar", section 3.2), per top frame ``(rule, state)`` (cached)
and then per configuration:

- :func:`frame_walk` sorts every token with the frame's rule's own byte
  DFA, deterministic and cheap (token slices shortcut it): a token whose
  bytes stay inside the rule is *certain* (valid whatever the stack below);
  one that dies inside the rule after it could have left it (a call edge or
  a return, followed by a byte that may come next there) is *uncertain*;
  the rest are dead.
- :func:`pda_walk` in *frame mode* refines those uncertain tokens from the
  frame with the stack below unknown: calls and returns inside the frame's
  rule and its callees are followed, so a token that only goes through a
  callee becomes certain (or dead); past the rule's own return the walk
  goes on in every place the rule may return to (xgrammar's context
  expansion), so a token that no caller accepts is dead, and only tokens
  that some caller may accept stay uncertain.
- :func:`pda_walk` in *check mode* checks the uncertain tokens against the
  real stacks of the configuration.

:func:`pda_walk` carries the set of parse stacks from trie node to trie
node, calls and returns followed inside the kernel (frames pushed during a
token live in a pool; frames below come from the stacks handed over).

See :mod:`leapgen.compiler.trie_kernels` for the trie layout.
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.jit import njit, njit_inline
from leapgen.compiler.trie_kernels import (SCAN_DEPTH, WALK_DEPTH, _deeper, _grow, _or_ids, _set_bits,
                                          _set_candidate_bits, _set_ids, build_trie)

#: pda_walk's results.
WALK_DONE = 0
#: A token pops below the frames handed to the kernel, or the walk outgrew its work limit: walk in Python.
WALK_GAVE_UP = 1
#: (internal) A buffer of :func:`_pda_walk` is full.
WALK_FULL = 2
#: The most closure items one trie node of :func:`pda_walk` may hold (buffers grow 4x up to it, then it gives up).
MAX_WALK_BUFFER = 1 << 14
#: The ``link`` of an item that went below the frames handed over in frame mode: any caller may be next.
CONTEXT = -2
#: pda_walk's modes (see its ``frame_mode``).
CHECK, FRAME_RETURN, FRAME_CONTEXT = 0, 1, 2


@njit
def frame_walk(trans_flat, start, leave_row, leave_bytes, node_rec, child_rec, tok_ids, sub_tok_end,
               words_certain, words_uncertain):
    """Sort the trie's tokens from state ``start`` of a rule's byte DFA.

    ``trans_flat`` (int32 ``(n * 256,)``, ``-1`` dead) holds the rule's byte
    transitions; a frame in state ``q`` may leave the rule (call or return)
    and go on with byte ``b`` when ``leave_row[q] >= 0`` and
    ``leave_bytes[leave_row[q], b]``. A token whose every byte has a
    transition is set in ``words_certain``; one whose walk dies after it
    could have left the rule (not at ``start`` itself: leaving there is the
    other expanded frames' business) is set in ``words_uncertain``, with
    every token of the trie subtree where it died. Mutates both bitsets;
    returns whether it set a bit in ``words_uncertain`` (bool).
    Over :func:`~leapgen.compiler.trie_kernels.walk_records`' layout (``sub_tok_end``: the trie's
    own), as :func:`~leapgen.compiler.trie_kernels.row_walk`: the children runs down to
    ``SCAN_DEPTH``, the subtrees below in preorder.
    """
    any_uncertain = False
    state_at = np.empty(WALK_DEPTH, np.int32)
    left_at = np.empty(WALK_DEPTH, np.bool_)  # the prefix could have left the rule
    stack_v = np.empty(WALK_DEPTH, np.int32)
    stack_s = np.empty(WALK_DEPTH, np.int32)  # the state, negated minus one where the prefix could have left
    stack_v[0], stack_s[0] = 0, start
    top = 1
    while top > 0:
        top -= 1
        v, s = stack_v[top], stack_s[top]
        was_left = s < 0
        if was_left:
            s = -s - 1
        row = leave_row[s] if v != 0 else -1
        base = s * 256
        for k in range(node_rec[v, 0], node_rec[v + 1, 0]):
            b, c = child_rec[k, 0], child_rec[k, 1]
            left = was_left or (row >= 0 and leave_bytes[row, b])
            nxt = trans_flat[base + b]
            if nxt < 0:
                if left and node_rec[c, 1] < sub_tok_end[c]:
                    _set_ids(words_uncertain, tok_ids, node_rec[c, 1], sub_tok_end[c])
                    any_uncertain = True
                continue
            _set_ids(words_certain, tok_ids, node_rec[c, 1], node_rec[c + 1, 1])
            if node_rec[c, 2] == c + 1:  # a leaf
                continue
            d0 = node_rec[c, 3] >> 8
            if d0 < SCAN_DEPTH:
                if top == stack_v.shape[0]:
                    stack_v, stack_s = _grow(stack_v), _grow(stack_s)
                stack_v[top], stack_s[top] = c, (-nxt - 1 if left else nxt)
                top += 1
                continue
            state_at, left_at = _deeper(state_at, d0), _deeper(left_at, d0)  # c's subtree, in preorder
            state_at[d0], left_at[d0] = nxt, left
            u, end = c + 1, node_rec[c, 2]
            while u < end:
                info = node_rec[u, 3]
                d, b = info >> 8, info & 255
                q = state_at[d - 1]
                r = leave_row[q]
                left = left_at[d - 1] or (r >= 0 and leave_bytes[r, b])
                q = trans_flat[q * 256 + b]
                if q < 0:
                    if left and node_rec[u, 1] < sub_tok_end[u]:
                        _set_ids(words_uncertain, tok_ids, node_rec[u, 1], sub_tok_end[u])
                        any_uncertain = True
                    u = node_rec[u, 2]
                    continue
                state_at, left_at = _deeper(state_at, d), _deeper(left_at, d)
                state_at[d], left_at[d] = q, left
                _set_ids(words_certain, tok_ids, node_rec[u, 1], node_rec[u + 1, 1])
                u += 1
    return any_uncertain


#: ``_BIT_OF_MOD37[(1 << b) % 37] == b`` for b < 32 (the powers of two are distinct modulo 37).
_BIT_OF_MOD37 = np.zeros(37, np.int64)
_BIT_OF_MOD37[[(1 << b) % 37 for b in range(32)]] = np.arange(32)


@njit
def _bit_positions(words):
    """int64, ascending: the positions of the bits set in uint32 bitset ``words``."""
    n = 0
    for w in range(words.shape[0]):
        x = np.int64(words[w])
        while x:
            x &= x - 1
            n += 1
    out = np.empty(n, np.int64)
    n = 0
    for w in range(words.shape[0]):
        x = np.int64(words[w])
        while x:
            low = x & -x
            out[n] = w * 32 + _BIT_OF_MOD37[low % 37]
            x ^= low
            n += 1
    return out


@njit
def candidate_positions(words, trie_pos):
    """int32, sorted: the trie positions (``trie_pos``, int64 per token id, -1
    for none) of the tokens set in uint32 bitset ``words``. The positions are
    set in a bitset of their own, then read back in order (no sort)."""
    marks = np.zeros(words.shape[0] + 1, np.uint32)
    for t in _bit_positions(words):
        p = trie_pos[t]
        if p >= 0:
            marks[p >> 5] |= np.uint32(1) << np.uint32(p & 31)
    return _bit_positions(marks).astype(np.int32)


@njit
def candidate_trie(words, trie_pos, node_toks, byte_matrix, byte_lengths):
    """A trie of only the tokens set in uint32 bitset ``words``: :func:`build_trie`'s
    arrays over its own rows, the vocabulary row of each (int32), and every
    token's position in it (int32 ``0..n``). See :func:`candidate_positions`."""
    rows = node_toks[candidate_positions(words, trie_pos)]  # in lexicographic order, as build_trie wants
    lengths = np.empty(rows.shape[0], np.int32)
    width = 1
    for i in range(rows.shape[0]):
        lengths[i] = byte_lengths[rows[i]]
        width = max(width, lengths[i])
    matrix = np.empty((rows.shape[0], width), np.uint8)
    for i in range(rows.shape[0]):
        matrix[i] = byte_matrix[rows[i], :width]
    order = np.arange(rows.shape[0]).astype(np.int32)
    return build_trie(matrix, lengths, order), rows, order


@njit_inline
def _child_holding(p, lo, hi, child_node, node_tok_start):
    """The index ``k`` in ``lo:hi`` (children of one trie node, in order) of the
    child whose subtree holds token position ``p``: the last child starting at
    or before ``p`` (binary search)."""
    hi -= 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if node_tok_start[child_node[mid]] <= p:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit_inline
def _push_item(buf, n, gs, link, s, p, d, lo):
    """Write item ``(gs, link, s, p, d)`` at row ``n`` of ``buf`` (int64 ``(m, 5)``,
    ``n < m``: the caller grows it) unless rows ``lo:n`` hold it already; returns
    the new row count. Takes no array back: a returned array costs numba a
    reference count update on every call of the hot loops."""
    for i in range(lo, n):
        if buf[i, 0] == gs and buf[i, 1] == link and buf[i, 2] == s and buf[i, 3] == p:
            return n
    buf[n, 0] = gs
    buf[n, 1] = link
    buf[n, 2] = s
    buf[n, 3] = p
    buf[n, 4] = d
    return n + 1


@njit
def pda_walk(trans_flat, has_bytes, accepting, call_ptr, call_start, call_ret, call_tail, call_guarded, rule_of, ret_ptr, ret_site,
             leave_row, leave_bytes, real_frames, real_count, real_cut, real_depth, max_depth, max_work, frame_mode,
             child_start, child_end, child_byte, child_node, node_tok_start, node_tok_end, node_toks, sub_tok_end,
             node_byte, node_depth, node_end, token_ids, candidate_pos, candidate_words, out_words, uncertain_words):
    """Walk tokens through a pushdown configuration (see the module docstring).

    Parameters (all numpy arrays unless said)
    ----------
    trans_flat : int32 ``(n_states * 256,)``
        Every rule's byte transitions over global state ids, ``-1`` dead.
    has_bytes, accepting : bool ``(n_states,)``
    call_ptr : int32 ``(n_states + 1,)``
        State ``g``'s call edges are ``call_ptr[g]:call_ptr[g + 1]`` of
        ``call_start`` (the callee's start state), ``call_ret`` (the state
        returned to) and ``call_tail`` (bool: the return state can only pop,
        so no return frame is pushed); ``call_guarded`` (bool): a keyed
        object's guarded call (:mod:`leapgen.automata.keyed`), whose outcome
        depends on the frame's keys, not known here: :data:`CHECK` gives up
        there; the frame modes do not follow it at the root of the trie (the
        expansion of the configuration did) and below it treat it as a
        leave point (the subtrees entered with a byte that may follow are
        uncertain).
    rule_of : int32 ``(n_states,)``
        Each state's rule.
    ret_ptr, ret_site : int32 ``(n_rules + 1,)``, ``(m,)``
        The states a frame of rule ``r`` may return to, over every call
        site: ``ret_site[ret_ptr[r]:ret_ptr[r + 1]]``.
    leave_row, leave_bytes : int32 ``(n_states,)``, bool ``(m, 256)``
        The bytes that may follow where a frame in state ``q`` returns:
        ``leave_bytes[leave_row[q]]`` (:meth:`Pda._pack_leave_bytes`).
    real_frames : int32 ``(n_stacks, k)``
        Each stack of the configuration, top frame first, as global states;
        ``real_count`` (int32 ``(n_stacks,)``) frames given, ``real_cut``
        (bool) where the stack goes on below them, ``real_depth`` (int32) the
        stack's depth.
    max_depth, max_work : int
        The deepest stack kept (deeper pushes are cut) and a limit on the
        closure items computed.
    frame_mode : int
        What a stack popping below its frames handed over (``real_cut``
        set) does. :data:`CHECK`: the walk gives up. :data:`FRAME_RETURN`:
        each trie subtree holding a candidate and entered next with a byte
        that may follow the return is set whole in ``uncertain_words``.
        :data:`FRAME_CONTEXT`: the walk goes on in every return site of the
        rule (any caller: the items are marked :data:`CONTEXT`), as
        xgrammar's context expansion looks past a rule's end, and a
        candidate that only such items keep alive is set in
        ``uncertain_words``, not in ``out_words``. Neither at the root:
        leaving before any byte is the business of the other expanded
        frames.
    candidate_pos : int32, sorted
        Positions in ``node_toks`` of the tokens to check; ``candidate_words``
        their uint32 bitset.
    out_words, uncertain_words : uint32
        Mutated: the bit of each candidate token the configuration accepts
        (frame mode: whatever the stack below) is set in ``out_words``;
        ``uncertain_words`` as said above. A candidate in neither is rejected.

    Returns
    -------
    (int, int, int)
        :data:`WALK_DONE` or :data:`WALK_GAVE_UP` (``out_words`` and
        ``uncertain_words`` are then incomplete: the bits set are right, the
        tokens not walked yet are in neither); the most frames the walk
        pushed above the stacks handed over (a bound for every token accepted); and how many frames of each
        stack, from the top, the walk read (one more than a stack holds where
        it tried to pop past its bottom): any configuration whose stacks
        agree that deep, and stay ``pushed`` frames under ``max_depth``, gets
        the same result.

    Notes
    -----
    An item is ``(state, link, stack, below, depth)``: ``link`` is the pool
    entry of the frame under the current one when it was pushed during the
    walk (-1: the real stack's frame ``below`` is next; :data:`CONTEXT`:
    any return site of the state's rule, ``below`` is then 0). The trie walk keeps
    each node's items as a deduplicated set; item sets of the depth-first
    stack live in one buffer, freed in LIFO order.
    """
    size = 256
    while True:
        items = np.empty((4 * size, 5), np.int64)  # item sets of the pending trie nodes
        closure = np.empty((size, 5), np.int64)
        pool = np.empty((2, 4 * size), np.int64)  # frames pushed during the walk: state, parent entry
        dfs = np.empty((3, size), np.int64)  # the depth-first stack: node, its items' rows lo:hi
        status, pushed, read = _pda_walk(
            trans_flat, has_bytes, accepting, call_ptr, call_start, call_ret, call_tail, call_guarded, rule_of, ret_ptr, ret_site,
            leave_row, leave_bytes, real_frames, real_count, real_cut, real_depth, max_depth, max_work, frame_mode,
            child_start, child_end, child_byte, child_node, node_tok_start, node_tok_end, node_toks, sub_tok_end,
            token_ids, candidate_pos, candidate_words, out_words, uncertain_words, items, closure, pool[0], pool[1],
            dfs[0], dfs[1], dfs[2])
        if status != WALK_FULL:  # else again with room: the bits set so far are right, set again
            return status, pushed, read
        size *= 4
        if size > MAX_WALK_BUFFER or frame_mode == FRAME_CONTEXT:  # a context fan-out that big: not worth it
            return WALK_GAVE_UP, pushed, read


@njit
def _pda_walk(trans_flat, has_bytes, accepting, call_ptr, call_start, call_ret, call_tail, call_guarded, rule_of, ret_ptr, ret_site,
              leave_row, leave_bytes, real_frames, real_count, real_cut, real_depth, max_depth, max_work, frame_mode,
              child_start, child_end, child_byte, child_node, node_tok_start, node_tok_end, node_toks, sub_tok_end,
              token_ids, candidate_pos, candidate_words, out_words, uncertain_words, items, closure, pool_state,
              pool_parent, dfs_node, dfs_lo, dfs_hi):
    """:func:`pda_walk` in buffers it is handed (never reassigned, so that
    numba updates no reference count in the loops); returns
    :data:`WALK_FULL` when one is full."""
    n_items = 0
    n_pool = 0
    follow = np.zeros(256, np.bool_)  # FRAME_RETURN: the bytes that may follow a return at this node
    most_pushed = 0
    deepest = 1  # real frames read (or, one past a stack's bottom, tried to read)
    for s in range(real_frames.shape[0]):
        if n_items == items.shape[0]:
            return WALK_FULL, most_pushed, deepest
        n_items = _push_item(items, n_items, real_frames[s, 0], -1, s, 1, real_depth[s], 0)
    dfs_node[0] = 0
    dfs_lo[0] = 0
    dfs_hi[0] = n_items
    top = 1
    work = 0
    while top > 0:
        top -= 1
        v = dfs_node[top]
        lo = dfs_lo[top]
        hi = dfs_hi[top]
        # epsilon closure: follow calls (push) and returns (pop) from the node's items
        n_cl = 0
        for i in range(lo, hi):
            if n_cl == closure.shape[0]:
                return WALK_FULL, most_pushed, deepest
            n_cl = _push_item(closure, n_cl, items[i, 0], items[i, 1], items[i, 2], items[i, 3], items[i, 4], 0)
        pool_mark = n_pool
        left = False
        i = 0
        while i < n_cl:
            if work + n_cl > max_work:
                return WALK_GAVE_UP, most_pushed, deepest
            g = closure[i, 0]
            link = closure[i, 1]
            s = closure[i, 2]
            p = closure[i, 3]
            d = closure[i, 4]
            i += 1
            most_pushed = max(most_pushed, d - real_depth[s])
            for k in range(call_ptr[g], call_ptr[g + 1]):
                if call_guarded[k]:
                    if frame_mode == CHECK:  # the real frames' keys are not handed over: Python walks it
                        return WALK_GAVE_UP, most_pushed, deepest
                    if v == 0:
                        continue  # the expansion of the configuration followed it, keys known
                    if not left:
                        follow[:] = False
                        left = True
                    follow |= leave_bytes[leave_row[g]]
                    continue
                if call_tail[k]:
                    if n_cl == closure.shape[0]:
                        return WALK_FULL, most_pushed, deepest
                    n_cl = _push_item(closure, n_cl, call_start[k], link, s, p, d, 0)
                elif d < max_depth:
                    entry = -1
                    for e in range(pool_mark, n_pool):  # the same return frame pushed twice in one closure
                        if pool_state[e] == call_ret[k] and pool_parent[e] == link:
                            entry = e
                            break
                    if entry < 0:
                        if n_pool == pool_state.shape[0]:
                            return WALK_FULL, most_pushed, deepest
                        pool_state[n_pool] = call_ret[k]
                        pool_parent[n_pool] = link
                        entry = n_pool
                        n_pool += 1
                    if n_cl == closure.shape[0]:
                        return WALK_FULL, most_pushed, deepest
                    n_cl = _push_item(closure, n_cl, call_start[k], entry, s, p, d + 1, 0)
            if accepting[g]:
                if link >= 0:
                    if n_cl == closure.shape[0]:
                        return WALK_FULL, most_pushed, deepest
                    n_cl = _push_item(closure, n_cl, pool_state[link], pool_parent[link], s, p, d - 1, 0)
                    continue
                if link == CONTEXT or (p == real_count[s] and real_cut[s]):
                    if frame_mode == CHECK:
                        return WALK_GAVE_UP, most_pushed, max(deepest, p + 1)
                    if v == 0:
                        continue  # leaving before any byte is the business of the frames expansion reached
                    if frame_mode == FRAME_RETURN:
                        if not left:
                            follow[:] = False
                            left = True
                        follow |= leave_bytes[leave_row[g]]
                        continue
                    r = rule_of[g]
                    for k in range(ret_ptr[r], ret_ptr[r + 1]):  # below the frames given: any caller
                        if n_cl == closure.shape[0]:
                            return WALK_FULL, most_pushed, deepest
                        n_cl = _push_item(closure, n_cl, ret_site[k], CONTEXT, s, 0, d - 1, 0)
                    continue
                deepest = max(deepest, p + 1)
                if p < real_count[s]:
                    if n_cl == closure.shape[0]:
                        return WALK_FULL, most_pushed, deepest
                    n_cl = _push_item(closure, n_cl, real_frames[s, p], -1, s, p + 1, d - 1, 0)
        work += n_cl
        if work > max_work:
            return WALK_GAVE_UP, most_pushed, deepest
        n_items = lo  # this node's set is consumed; the sets above it belong to nodes already walked
        # the children holding a candidate, found from the candidates (a node may have 256 children)
        ci = np.searchsorted(candidate_pos, node_tok_end[v])
        k = child_start[v]
        while ci < candidate_pos.shape[0] and candidate_pos[ci] < sub_tok_end[v]:
            k = _child_holding(candidate_pos[ci], k, child_end[v], child_node, node_tok_start)
            c = child_node[k]
            b = child_byte[k]
            k += 1
            ci = np.searchsorted(candidate_pos, sub_tok_end[c])
            if left and follow[b]:
                _set_bits(uncertain_words, node_toks, token_ids, node_tok_start[c], sub_tok_end[c])
            first = n_items
            own = False  # an item that never went below the frames given is alive
            for j in range(n_cl):
                g = closure[j, 0]
                if has_bytes[g]:
                    nxt = trans_flat[g * 256 + b]
                    if nxt >= 0:
                        if n_items == items.shape[0]:
                            return WALK_FULL, most_pushed, deepest
                        n_items = _push_item(items, n_items, nxt, closure[j, 1], closure[j, 2],
                                             closure[j, 3], closure[j, 4], first)
                        own = own or closure[j, 3] != 0
            if n_items == first:
                continue
            _set_candidate_bits(out_words if own else uncertain_words, candidate_words, node_toks, token_ids,
                                node_tok_start[c], node_tok_end[c])
            if top == dfs_node.shape[0]:
                return WALK_FULL, most_pushed, deepest
            dfs_node[top] = c
            dfs_lo[top] = first
            dfs_hi[top] = n_items
            top += 1
    return WALK_DONE, most_pushed, deepest


@njit
def bitset_any(words):
    """Whether uint32 bitset ``words`` has a bit set (numpy's ``any`` costs a reduction's set-up, ~4 µs)."""
    for w in range(words.shape[0]):
        if words[w]:
            return True
    return False


@njit
def frame_walk_via(trans_flat, start, leave_row, leave_bytes, loop_state, loop_certain, loop_uncertain, in_class,
                   node_rec, child_rec, tok_ids, sub_tok_end, words_certain, words_uncertain):
    """:func:`frame_walk` that jumps where it reaches ``loop_state`` (a LOOP state of a token
    slice, with no leave row) after bytes all in ``in_class`` without having been able to leave
    the rule: the subtree's tokens are then sorted as from ``loop_state`` itself, whose sort is
    ``loop_certain`` / ``loop_uncertain``: a token of that subtree whose prefix so far loops there sorts as
    from ``loop_state`` (a JSON string's escapes lead back to its body).
    Returns False where it surely set no bit in ``words_uncertain`` (bool). The layout and
    order of :func:`frame_walk`."""
    any_uncertain = False
    state_at = np.empty(WALK_DEPTH, np.int32)
    left_at = np.empty(WALK_DEPTH, np.bool_)
    pure_at = np.empty(WALK_DEPTH, np.bool_)
    stack_v = np.empty(WALK_DEPTH, np.int32)
    stack_s = np.empty(WALK_DEPTH, np.int32)
    stack_f = np.empty(WALK_DEPTH, np.int32)  # 1: the prefix could have left the rule; 2: it is pure
    stack_v[0], stack_s[0], stack_f[0] = 0, start, 2
    top = 1
    while top > 0:
        top -= 1
        v, s, flags = stack_v[top], stack_s[top], stack_f[top]
        row = leave_row[s] if v != 0 else -1
        base = s * 256
        for k in range(node_rec[v, 0], node_rec[v + 1, 0]):
            b, c = child_rec[k, 0], child_rec[k, 1]
            left = (flags & 1) != 0 or (row >= 0 and leave_bytes[row, b])
            nxt = trans_flat[base + b]
            if nxt < 0:
                if left and node_rec[c, 1] < sub_tok_end[c]:
                    _set_ids(words_uncertain, tok_ids, node_rec[c, 1], sub_tok_end[c])
                    any_uncertain = True
                continue
            pure = (flags & 2) != 0 and in_class[b] and not left
            if pure and nxt == loop_state:
                _or_ids(words_certain, loop_certain, tok_ids, node_rec[c, 1], sub_tok_end[c])
                _or_ids(words_uncertain, loop_uncertain, tok_ids, node_rec[c, 1], sub_tok_end[c])
                any_uncertain |= node_rec[c, 1] < sub_tok_end[c]
                continue
            _set_ids(words_certain, tok_ids, node_rec[c, 1], node_rec[c + 1, 1])
            if node_rec[c, 2] == c + 1:  # a leaf
                continue
            d0 = node_rec[c, 3] >> 8
            if d0 < SCAN_DEPTH:
                if top == stack_v.shape[0]:
                    stack_v, stack_s, stack_f = _grow(stack_v), _grow(stack_s), _grow(stack_f)
                stack_v[top], stack_s[top], stack_f[top] = c, nxt, (1 if left else 0) | (2 if pure else 0)
                top += 1
                continue
            state_at, left_at, pure_at = _deeper(state_at, d0), _deeper(left_at, d0), _deeper(pure_at, d0)
            state_at[d0], left_at[d0], pure_at[d0] = nxt, left, pure  # c's subtree, in preorder
            u, end = c + 1, node_rec[c, 2]
            while u < end:
                info = node_rec[u, 3]
                d, b = info >> 8, info & 255
                q = state_at[d - 1]
                r = leave_row[q]
                left = left_at[d - 1] or (r >= 0 and leave_bytes[r, b])
                q = trans_flat[q * 256 + b]
                if q < 0:
                    if left and node_rec[u, 1] < sub_tok_end[u]:
                        _set_ids(words_uncertain, tok_ids, node_rec[u, 1], sub_tok_end[u])
                        any_uncertain = True
                    u = node_rec[u, 2]
                    continue
                pure = pure_at[d - 1] and in_class[b] and not left
                if pure and q == loop_state:
                    _or_ids(words_certain, loop_certain, tok_ids, node_rec[u, 1], sub_tok_end[u])
                    _or_ids(words_uncertain, loop_uncertain, tok_ids, node_rec[u, 1], sub_tok_end[u])
                    any_uncertain |= node_rec[u, 1] < sub_tok_end[u]
                    u = node_rec[u, 2]
                    continue
                state_at, left_at, pure_at = _deeper(state_at, d), _deeper(left_at, d), _deeper(pure_at, d)
                state_at[d], left_at[d], pure_at[d] = q, left, pure
                _set_ids(words_certain, tok_ids, node_rec[u, 1], node_rec[u + 1, 1])
                u += 1
    return any_uncertain
