"""A finite set of byte strings as a minimal DFA, built as a trie: :func:`trie_dfa`.

One responsibility: the language "exactly one of these strings" without the
general construction. An alternation of ``n`` literals through the NFA and
the subset construction costs a closure per DFA state over every literal that
is still alive; the trie of the sorted strings *is* a DFA already (one state
per distinct prefix), so it is written straight into a transition table over
the bytes the strings use and then minimized as the acyclic automaton it is
(Revuz, 1992, "Minimisation of acyclic deterministic automata in linear
time"): children are numbered after their parent (the trie is built in
preorder), so one pass from the last node to the root gives each node the
class of its signature (accepting, its children's classes), found in a hash
table; equal suffixes (``-ing``, ``-tion``) merge. Both passes are numba
kernels (plain Python without numba: same result, slower).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from leapgen.automata.dfa import EMPTY_DFA, Dfa
from leapgen.automata.jit import njit
from leapgen.automata.limits import check_deadline, too_many_states

#: How many trie nodes per allowed DFA state (the trie shrinks when its equal suffixes merge).
TRIE_NODES_PER_STATE = 16
#: Bound on the trie's transition table (int32, nodes x byte classes) before minimization.
MAX_TRIE_TABLE_BYTES = 512 << 20


@njit
def _trie_size(data, offsets):
    """(lcps, nodes): each sorted string's common prefix with the previous
    one, and the trie's node count (root included)."""
    n = offsets.shape[0] - 1
    lcps = np.zeros(n, np.int64)
    size = 1 + offsets[1] - offsets[0]
    for i in range(1, n):
        a, b = offsets[i - 1], offsets[i]
        la, lb = offsets[i] - a, offsets[i + 1] - b
        k = 0
        while k < la and k < lb and data[a + k] == data[b + k]:
            k += 1
        lcps[i] = k
        size += lb - k
    return lcps, size


@njit
def _build_trie(data, offsets, lcps, symbol_class, size, width):
    """The trie in preorder: (table int32 (size, width), accepting bool)."""
    table = np.full((size, width), -1, np.int32)
    accepting = np.zeros(size, np.bool_)
    longest = 0
    for i in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[i + 1] - offsets[i])
    path = np.zeros(longest + 1, np.int64)  # path[d]: the node of the current string's prefix of length d
    nodes = 1
    for i in range(offsets.shape[0] - 1):
        node = path[lcps[i]]
        for d in range(lcps[i], offsets[i + 1] - offsets[i]):
            table[node, symbol_class[data[offsets[i] + d]]] = nodes
            node = nodes
            path[d + 1] = node
            nodes += 1
        accepting[node] = True
    return table, accepting


@njit
def _minimize_acyclic(table, accepting, symbol_class):
    """Merge the nodes with equal signatures, from the last to the root.

    Returns (minimal table int32 (m, 256) over bytes, widened through
    ``symbol_class``; accepting bool (m,)); the root is state 0 and every
    state's children come after it."""
    n, width = table.shape
    canon = np.empty(n, np.int64)
    rows = np.empty((n, width), np.int32)  # rows[c]: the children of class c (class ids)
    finals = np.zeros(n, np.bool_)
    slots = np.full(1 << max(4, int(np.ceil(np.log2(2 * n + 1)))), -1, np.int64)
    mask = slots.shape[0] - 1
    row = np.empty(width, np.int32)
    m = 0
    for v in range(n - 1, -1, -1):
        h = np.uint64(14695981039346656037) ^ np.uint64(accepting[v])
        for c in range(width):
            t = table[v, c]
            row[c] = -1 if t < 0 else canon[t]
            h = (h ^ np.uint64(row[c] + 1)) * np.uint64(1099511628211)
        s = np.int64(h & np.uint64(mask))  # (int64 throughout: uint64 with int64 would unify to float64)
        while True:
            k = slots[s]
            if k < 0:
                slots[s] = m
                rows[m] = row
                finals[m] = accepting[v]
                canon[v] = m
                m += 1
                break
            if finals[k] == accepting[v]:
                same = True
                for c in range(width):
                    if rows[k, c] != row[c]:
                        same = False
                        break
                if same:
                    canon[v] = k
                    break
            s = (s + np.int64(1)) & np.int64(mask)
    # The root was numbered last: reverse the numbering (root 0, children after parents), widen to bytes.
    out = np.empty((m, 256), np.int32)
    out_final = np.empty(m, np.bool_)
    for k in range(m):
        for c in range(width):
            t = rows[k, c]
            row[c] = -1 if t < 0 else m - 1 - t
        for b in range(256):
            out[m - 1 - k, b] = row[symbol_class[b]]
        out_final[m - 1 - k] = finals[k]
    return out, out_final


def trie_dfa(strings: Iterable[bytes], *, max_states: int) -> Dfa:
    """The minimal DFA of exactly the given byte strings.

    Parameters
    ----------
    strings : iterable of bytes
        The language (duplicates are fine; ``b""`` puts the empty string in it).
    max_states : int
        Limit on the minimal DFA's states; the trie itself (one node per
        distinct prefix, the root included) may have :data:`TRIE_NODES_PER_STATE`
        times as many, within :data:`MAX_TRIE_TABLE_BYTES`.

    Returns
    -------
    Dfa
        Minimal and trimmed, start state 0; :data:`EMPTY_DFA` when
        ``strings`` is empty.

    Raises
    ------
    CompileLimitError
        The trie or the minimal DFA is over its limit, or the compile time
        limit passed.
    """
    ordered = sorted(set(strings))
    if not ordered:
        return EMPTY_DFA
    data = np.frombuffer(b"".join(ordered), np.uint8)
    offsets = np.zeros(len(ordered) + 1, np.int64)
    np.cumsum([len(s) for s in ordered], out=offsets[1:])
    used = np.zeros(256, bool)
    used[data] = True
    width = int(used.sum()) + 1  # the last class: bytes no string uses (always dead)
    symbol_class = np.full(256, width - 1, np.int32)
    symbol_class[used] = np.arange(width - 1, dtype=np.int32)
    lcps, size = _trie_size(data, offsets)
    if size > TRIE_NODES_PER_STATE * max_states or size * width * 4 > MAX_TRIE_TABLE_BYTES:
        raise too_many_states(TRIE_NODES_PER_STATE * max_states, "trie")
    table, accepting = _build_trie(data, offsets, lcps, symbol_class, int(size), width)
    check_deadline("choice trie")
    minimal, finals = _minimize_acyclic(table, accepting, symbol_class)
    if minimal.shape[0] > max_states:
        raise too_many_states(max_states)
    return Dfa(minimal, finals, 0)
