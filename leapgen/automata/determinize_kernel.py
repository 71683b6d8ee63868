"""Subset construction kernel (numba).

Rabin and Scott's subset construction ("Finite automata and their decision
problems", 1959) over byte classes, as in :func:`leapgen.automata.subset.
determinize_reference`, with three changes that keep the language but make
it fast:

- a DFA state is keyed by the *important* NFA states of its epsilon closure
  only (states with a byte edge, and the accepting state): two closures with
  the same important states accept the same continuations (the "important
  states" of Aho, Sethi and Ullman, "Compilers", section 3.9), so this may
  give fewer DFA states than the reference, never more. A closure without
  important states is still a (live) state, not "dead" (the result is not
  trimmed here: callers trim);
- closures are computed on the fly with a stamp array (no per-closure set);
  a move to a single NFA state (common where the NFA embeds DFAs, as rule
  bodies with calls do) is remembered per NFA state and skips the closure
  and the hash lookup;
- subsets are sorted int32 runs in one pool, found through an
  open-addressing hash table keyed by a 64-bit hash, with a full comparison;
- the helpers are inlined in numba's IR (``inline='always'``): a call per
  DFA transition cost a quarter of the kernel's time.

numba cannot call back into Python cheaply, so the time limit arrives as a
``time.monotonic()`` deadline, read every :data:`DEADLINE_EVERY` DFA states
(:func:`leapgen.automata.clock.monotonic_seconds`), and the kernel returns a status code instead of
raising. Used only where numba is installed (see
:func:`leapgen.automata.subset.determinize_classes`).
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.clock import monotonic_seconds
from leapgen.automata.jit import MODE, njit, njit_inline

if MODE == "python":  # pragma: no cover - numba missing: callers use the pure-Python reference
    raise ImportError("the subset construction kernel needs numba (not installed)")

OK, TOO_MANY_STATES, DEADLINE_PASSED = 0, 1, 2
DEADLINE_EVERY = 64
SMALL_SORT = 16
_EMPTY = -1
_HASH_SEED = 0x2545F4914F6CDD1D
_HASH_MUL = 0x100000001B3


@njit_inline
def _hash(values, lo, hi):
    h = np.int64(_HASH_SEED)
    for i in range(lo, hi):
        h = (h ^ np.int64(values[i])) * np.int64(_HASH_MUL)
    return h ^ (h >> 29)


@njit_inline
def _grow1(a, need):
    if need <= a.shape[0]:
        return a
    out = np.empty(max(need, 2 * a.shape[0]), a.dtype)
    out[:a.shape[0]] = a
    return out


@njit_inline
def _grow_rows(a, need):
    if need <= a.shape[0]:
        return a
    out = np.empty((max(need, 2 * a.shape[0]), a.shape[1]), a.dtype)
    out[:a.shape[0]] = a
    return out


@njit_inline
def _closure(seeds, n_seeds, eps_start, eps_dst, important, stamp, mark, stack, out):
    """Important states of the epsilon closure of ``seeds[:n_seeds]``, sorted,
    written to ``out``; returns their count. Sets ``stamp[s] = mark`` on
    every state visited."""
    top = 0
    n_out = 0
    for i in range(n_seeds):
        s = seeds[i]
        if stamp[s] != mark:
            stamp[s] = mark
            stack[top] = s
            top += 1
    while top > 0:
        top -= 1
        s = stack[top]
        if important[s]:
            out[n_out] = s
            n_out += 1
        for j in range(eps_start[s], eps_start[s + 1]):
            t = eps_dst[j]
            if stamp[t] != mark:
                stamp[t] = mark
                stack[top] = t
                top += 1
    if n_out > SMALL_SORT:
        out[:n_out].sort()
        return n_out
    for a in range(1, n_out):  # insertion sort: most closures are small
        v = out[a]
        b = a - 1
        while b >= 0 and out[b] > v:
            out[b + 1] = out[b]
            b -= 1
        out[b + 1] = v
    return n_out


@njit_inline
def _same(pool, lo, hi, subset, n):
    if hi - lo != n:
        return False
    for i in range(n):
        if pool[lo + i] != subset[i]:
            return False
    return True


@njit
def subset_construction(eps_start, eps_dst, move_start, move_class, move_dst, important, starts, end,
                        n_classes, max_states, deadline):
    """Determinize an NFA given as CSR arrays.

    Parameters
    ----------
    eps_start : numpy.ndarray
        int64, ``(n_nfa + 1,)``: epsilon successors of NFA state ``s`` are
        ``eps_dst[eps_start[s]:eps_start[s + 1]]`` (``eps_dst`` int32).
    move_start : numpy.ndarray
        int64, ``(n_nfa + 1,)``: byte-class edges of ``s`` are
        ``move_class[i] -> move_dst[i]`` for ``i`` in
        ``move_start[s]:move_start[s + 1]`` (both int32).
    important : numpy.ndarray
        bool, ``(n_nfa,)``: ``s`` has a byte-class edge or is ``end``.
    starts : numpy.ndarray
        int32, ``(n_starts,)``: NFA start states.
    end : int
        The accepting NFA state.
    n_classes : int
        Number of byte classes (columns of the result).
    max_states : int
        Most DFA states allowed.
    deadline : float
        ``time.monotonic()`` value past which the kernel stops; ``inf``: none.

    Returns
    -------
    status : int
        :data:`OK`, :data:`TOO_MANY_STATES` or :data:`DEADLINE_PASSED`
        (the arrays are then empty).
    table : numpy.ndarray
        int32, ``(n_dfa, n_classes)``; -1 = dead.
    accepting : numpy.ndarray
        bool, ``(n_dfa,)``.
    start_ids : numpy.ndarray
        int32, ``(n_starts,)``: the DFA state of each start.
    """
    n_nfa = eps_start.shape[0] - 1
    timed = deadline < np.inf
    stamp = np.zeros(n_nfa, np.int32)
    mark = 0
    stack = np.empty(n_nfa, np.int32)
    subset = np.empty(n_nfa, np.int32)
    # DFA states: subsets in one pool
    pool = np.empty(max(16, 4 * n_nfa), np.int32)
    pool_len = 0
    set_start = np.zeros(64, np.int64)
    set_hash = np.empty(64, np.int64)
    accepting = np.zeros(64, np.bool_)
    table = np.empty((64, n_classes), np.int32)
    n_sets = 0
    slots = np.full(1024, _EMPTY, np.int32)
    # per-class buckets of move targets
    count = np.zeros(n_classes, np.int64)
    offset = np.zeros(n_classes, np.int64)
    touched = np.empty(n_classes, np.int32)
    targets = np.empty(64, np.int32)
    start_ids = np.empty(starts.shape[0], np.int32)
    by_single = np.full(n_nfa, _EMPTY, np.int32)  # the DFA state of a move to one NFA state

    i = -starts.shape[0]  # negative i: intern the start closures first
    while i < n_sets:
        if i < 0:
            subset[0] = starts[i + starts.shape[0]]
            n_seed_sets = 1
            single = -1
        else:
            if timed and i % DEADLINE_EVERY == 0 and monotonic_seconds() > deadline:
                return DEADLINE_PASSED, table[:0].copy(), accepting[:0].copy(), start_ids
            # bucket every move of the subset by class
            n_touched = 0
            total = 0
            for p in range(set_start[i], set_start[i + 1]):
                s = pool[p]
                for j in range(move_start[s], move_start[s + 1]):
                    c = move_class[j]
                    if count[c] == 0:
                        touched[n_touched] = c
                        n_touched += 1
                    count[c] += 1
                    total += 1
            run = 0
            for t in range(n_touched):
                c = touched[t]
                offset[c] = run
                run += count[c]
            targets = _grow1(targets, total)
            for p in range(set_start[i], set_start[i + 1]):
                s = pool[p]
                for j in range(move_start[s], move_start[s + 1]):
                    c = move_class[j]
                    targets[offset[c]] = move_dst[j]
                    offset[c] += 1
            table[i, :] = -1
            n_seed_sets = n_touched
        for t in range(n_seed_sets):
            mark += 1
            if i < 0:
                n = _closure(subset, 1, eps_start, eps_dst, important, stamp, mark, stack, subset)
            else:
                c = touched[t]
                lo = offset[c] - count[c]
                single = targets[lo] if count[c] == 1 else -1
                count[c] = 0
                if single >= 0 and by_single[single] != _EMPTY:
                    table[i, c] = by_single[single]
                    continue
                n = _closure(targets[lo:offset[c]], offset[c] - lo, eps_start, eps_dst, important, stamp, mark,
                             stack, subset)
            h = _hash(subset, 0, n)
            mask = slots.shape[0] - 1
            k = h & mask
            found = -1
            while slots[k] != _EMPTY:
                q = slots[k]
                if set_hash[q] == h and _same(pool, set_start[q], set_start[q + 1], subset, n):
                    found = q
                    break
                k = (k + 1) & mask
            if found < 0:
                if n_sets >= max_states:
                    return TOO_MANY_STATES, table[:0].copy(), accepting[:0].copy(), start_ids
                found = n_sets
                slots[k] = found
                n_sets += 1
                pool = _grow1(pool, pool_len + n)
                pool[pool_len:pool_len + n] = subset[:n]
                pool_len += n
                set_start = _grow1(set_start, n_sets + 1)
                set_start[n_sets] = pool_len
                set_hash = _grow1(set_hash, n_sets)
                set_hash[found] = h
                accepting = _grow1(accepting, n_sets)
                accepting[found] = stamp[end] == mark
                table = _grow_rows(table, n_sets)
                if 2 * n_sets > slots.shape[0]:
                    slots = np.full(2 * slots.shape[0], _EMPTY, np.int32)
                    mask = slots.shape[0] - 1
                    for q in range(n_sets):
                        k = set_hash[q] & mask
                        while slots[k] != _EMPTY:
                            k = (k + 1) & mask
                        slots[k] = q
            if i < 0:
                start_ids[i + starts.shape[0]] = found
            else:
                table[i, touched[t]] = found
                if single >= 0:
                    by_single[single] = found
        i += 1
    return OK, table[:n_sets].copy(), accepting[:n_sets].copy(), start_ids


@njit
def nfa_arrays(eps, edges, n_nfa, alphabet, end):
    """An NFA's edge lists as the CSR arrays :func:`subset_construction` takes.

    Parameters
    ----------
    eps : numpy.ndarray
        int32, ``(m_eps, 2)``: epsilon edges ``(s, t)``.
    edges : numpy.ndarray
        int32, ``(m, 4)``: symbol-range edges ``(s, lo, hi, t)``.
    n_nfa : int
        NFA states.
    alphabet : int
        Symbols (256 bytes, plus call symbols for a rule body).
    end : int
        The accepting NFA state.

    Returns
    -------
    byte_class : numpy.ndarray
        int32, ``(alphabet,)``: symbols split at every edge range bound,
        classes numbered in symbol order (as
        :func:`leapgen.automata.subset.byte_classes`).
    n_classes : int
    eps_start, eps_dst, move_start, move_class, move_dst, important
        As :func:`subset_construction` takes them; the edges of each state in
        their input order, a range edge split into its classes in order.
    """
    bound = np.zeros(alphabet + 1, np.bool_)
    bound[0] = True
    bound[alphabet] = True
    m = edges.shape[0]
    for r in range(m):
        bound[edges[r, 1]] = True
        bound[edges[r, 2] + 1] = True
    byte_class = np.empty(alphabet, np.int32)
    k = -1
    for b in range(alphabet):
        if bound[b]:
            k += 1
        byte_class[b] = k
    n_classes = k + 1
    eps_start = np.zeros(n_nfa + 1, np.int64)
    for r in range(eps.shape[0]):
        eps_start[eps[r, 0] + 1] += 1
    for q in range(n_nfa):
        eps_start[q + 1] += eps_start[q]
    fill = eps_start[:n_nfa].copy()
    eps_dst = np.empty(eps.shape[0], np.int32)
    for r in range(eps.shape[0]):
        s = eps[r, 0]
        eps_dst[fill[s]] = eps[r, 1]
        fill[s] += 1
    move_start = np.zeros(n_nfa + 1, np.int64)
    important = np.zeros(n_nfa, np.bool_)
    important[end] = True
    for r in range(m):
        s = edges[r, 0]
        move_start[s + 1] += byte_class[edges[r, 2]] - byte_class[edges[r, 1]] + 1
        important[s] = True
    for q in range(n_nfa):
        move_start[q + 1] += move_start[q]
    fill = move_start[:n_nfa].copy()
    move_class = np.empty(move_start[n_nfa], np.int32)
    move_dst = np.empty(move_start[n_nfa], np.int32)
    for r in range(m):
        s = edges[r, 0]
        for c in range(byte_class[edges[r, 1]], byte_class[edges[r, 2]] + 1):
            move_class[fill[s]] = c
            move_dst[fill[s]] = edges[r, 3]
            fill[s] += 1
    return byte_class, n_classes, eps_start, eps_dst, move_start, move_class, move_dst, important
