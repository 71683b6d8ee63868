"""A finite set of byte strings as a DFA, built as a trie: :func:`trie_dfa`.

One responsibility: the language "exactly one of these strings" without the
general construction. An alternation of ``n`` literals through the NFA and
the subset construction costs a closure per DFA state over every literal
that is still alive; the trie of the sorted strings *is* a DFA already (one
state per distinct prefix), so it is written straight into a transition
table over the bytes the strings use and only minimized (Valmari-Lehtinen,
which merges the equal suffixes: ``-ing``, ``-tion``). Sorting puts strings
that share a prefix next to each other, so each string adds the nodes past
its longest common prefix with the previous one (Daciuk et al., 2000,
"Incremental construction of minimal acyclic finite-state automata", the
sorted-input case, with the minimization done once at the end).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from leapgen.automata.dfa import EMPTY_DFA, Dfa, minimize_table
from leapgen.automata.limits import check_deadline, too_many_states

#: How many trie nodes per allowed DFA state (the trie shrinks when its equal suffixes merge).
TRIE_NODES_PER_STATE = 16
#: Bound on the trie's transition table (int32, nodes x byte classes) before minimization.
MAX_TRIE_TABLE_BYTES = 512 << 20


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
        Minimal and trimmed; :data:`EMPTY_DFA` when ``strings`` is empty.

    Raises
    ------
    CompileLimitError
        The trie or the minimal DFA is over its limit, or the compile time
        limit passed.
    """
    ordered = sorted(set(strings))
    if not ordered:
        return EMPTY_DFA
    lcps = [0] * len(ordered)
    size = 1 + len(ordered[0])
    for i in range(1, len(ordered)):
        a, b = ordered[i - 1], ordered[i]
        n = min(len(a), len(b))
        k = 0
        while k < n and a[k] == b[k]:
            k += 1
        lcps[i] = k
        size += len(b) - k
    used = np.zeros(256, bool)
    for s in ordered:
        used[np.frombuffer(s, np.uint8)] = True
    if size > TRIE_NODES_PER_STATE * max_states or size * (int(used.sum()) + 1) * 4 > MAX_TRIE_TABLE_BYTES:
        raise too_many_states(TRIE_NODES_PER_STATE * max_states, "trie")
    check_deadline("choice trie")
    symbol_class = np.full(256, int(used.sum()), np.int32)  # the last class: bytes no string uses (dead)
    symbol_class[used] = np.arange(int(used.sum()), dtype=np.int32)
    table = np.full((size, int(used.sum()) + 1), -1, np.int32)
    accepting = np.zeros(size, bool)
    path = [0]  # path[d]: the node of the previous string's prefix of length d
    nodes = 1
    for s, k in zip(ordered, lcps):
        del path[k + 1 :]
        node = path[k]
        for byte in s[k:]:
            table[node, symbol_class[byte]] = nodes
            node = nodes
            path.append(node)
            nodes += 1
        accepting[node] = True
    check_deadline("choice trie")
    dfa = minimize_table(table, accepting, 0, symbol_class)
    if dfa.n_states > max_states:
        raise too_many_states(max_states)
    return dfa
