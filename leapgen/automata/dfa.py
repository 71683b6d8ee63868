"""Byte-level DFAs: subset construction, trimming, minimization, products.

- Determinization: Rabin-Scott subset construction over *byte classes* (bytes
  no edge tells apart share a class), so work scales with the alphabet the
  grammar really uses rather than 256.
- Trimming keeps only states that are reachable and can still reach an
  accepting state, so every state a matcher can be in has a completion: a
  token mask built on a trimmed DFA never leads into a dead end.
- Minimization: Hopcroft's partition refinement ("An n log n algorithm for
  minimizing states in a finite automaton", 1971) over byte classes.
- Products: intersection and difference of languages by the usual pair
  construction.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from leapgen.automata.limits import check_deadline
from leapgen.automata.minimize_kernel import minimize_blocks
from leapgen.errors import CompileLimitError
from leapgen.grammar import ir

DEFAULT_MAX_STATES = 100_000
SUB_DFA_CACHE_ENTRIES = 512
# DFAs of repeated IR fragments, by value (IR nodes are immutable): shared by all compiles.
_SUB_DFA_CACHE: OrderedDict = OrderedDict()
_SUB_DFA_LOCK = threading.Lock()


@dataclass(frozen=True, eq=False)
class Dfa:
    """An immutable, trimmed byte-level DFA.

    Attributes
    ----------
    trans : numpy.ndarray
        int32, shape ``(n_states, 256)``; ``trans[q, b]`` is the next state,
        ``-1`` where byte ``b`` leads nowhere (dead).
    accepting : numpy.ndarray
        bool, shape ``(n_states,)``.
    start : int
        The start state (0 after :func:`minimize`).
    """

    trans: np.ndarray
    accepting: np.ndarray
    start: int = 0

    @property
    def n_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def is_empty(self) -> bool:
        """True when the language is empty."""
        return self.n_states == 0

    def matches(self, data: bytes) -> bool:
        """Whether the whole of ``data`` is in the language (for tests and tools)."""
        if self.is_empty:
            return False
        q = self.start
        for b in data:
            q = int(self.trans[q, b])
            if q < 0:
                return False
        return bool(self.accepting[q])


EMPTY_DFA = Dfa(np.zeros((0, 256), np.int32), np.zeros(0, bool), 0)


def compile_dfa(node: ir.Node, *, max_states: int = DEFAULT_MAX_STATES, rule_ids: dict[str, int] | None = None) -> Dfa:
    """Compile IR to a minimized, trimmed byte-level DFA.

    Parameters
    ----------
    node : ir.Node
        The language (must contain no :class:`~leapgen.grammar.ir.RuleRef`).
    max_states : int
        Limit on NFA and DFA states.
    rule_ids : dict of str to int, optional
        For a rule body of a context-free grammar: ``RuleRef(name)`` becomes
        the *call symbol* ``256 + rule_ids[name]`` and the DFA's alphabet is
        ``256 + len(rule_ids)`` wide.

    Returns
    -------
    Dfa
        Minimal DFA; :data:`EMPTY_DFA` (0 states) for the empty language.

    Raises
    ------
    CompileLimitError
        The automaton would exceed ``max_states``.
    GrammarError
        The IR holds a rule reference.
    """
    from leapgen.automata.nfa import Nfa

    # (a rule body goes through the NFA below, which embeds the product: its alphabet has the call symbols)
    if isinstance(node, ir.Intersect) and rule_ids is None:
        out = compile_dfa(node.items[0], max_states=max_states)
        for item in node.items[1:]:
            out = product(out, compile_dfa(item, max_states=max_states), difference=False, max_states=max_states)
        return out
    if isinstance(node, ir.Diff) and rule_ids is None:
        left = compile_dfa(node.left, max_states=max_states)
        right = compile_dfa(node.right, max_states=max_states)
        return product(left, right, difference=True, max_states=max_states)
    if rule_ids is None:
        with _SUB_DFA_LOCK:
            got = _SUB_DFA_CACHE.get((node, max_states))
        if got is not None:
            return got
    nfa = Nfa(max_states, lambda n: compile_dfa(n, max_states=max_states), rule_ids=rule_ids)
    nfa.root = node
    start, end = nfa.build(node)
    alphabet = 256 + (len(rule_ids) if rule_ids else 0)
    trans, accepting, starts = determinize(nfa, [start], end, max_states, alphabet=alphabet)
    out = minimize(Dfa(trans, accepting, starts[0]))
    if rule_ids is None:
        with _SUB_DFA_LOCK:
            _SUB_DFA_CACHE[(node, max_states)] = out
            while len(_SUB_DFA_CACHE) > SUB_DFA_CACHE_ENTRIES:
                _SUB_DFA_CACHE.popitem(last=False)
    return out


def _byte_classes(nfa, alphabet: int) -> tuple[np.ndarray, int]:
    bounds = {0, alphabet}
    for es in nfa.edges:
        for lo, hi, _ in es:
            bounds.add(lo)
            bounds.add(hi + 1)
    cuts = sorted(bounds)
    byte_class = np.empty(alphabet, np.int32)
    for i in range(len(cuts) - 1):
        byte_class[cuts[i]:cuts[i + 1]] = i
    return byte_class, len(cuts) - 1


def determinize(nfa, starts: list[int], end: int, max_states: int, *,
                alphabet: int = 256) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Subset construction from one or more NFA start states.

    Returns
    -------
    trans : numpy.ndarray
        int32, shape ``(n_states, alphabet)``, -1 = dead.
    accepting : numpy.ndarray
        bool, ``(n_states,)``: the subset holds ``end``.
    start_ids : list of int
        The DFA state of each NFA start (subsets are shared between starts).
    """
    byte_class, k = _byte_classes(nfa, alphabet)
    bc = byte_class.tolist()
    moves: list[dict[int, list[int]]] = []
    for es in nfa.edges:
        d: dict[int, list[int]] = {}
        for lo, hi, t in es:
            for c in range(bc[lo], bc[hi] + 1):
                d.setdefault(c, []).append(t)
        moves.append(d)
    eps = nfa.eps
    closure_cache: dict[frozenset, frozenset] = {}

    def closure(seeds: frozenset) -> frozenset:
        got = closure_cache.get(seeds)
        if got is None:
            seen = set(seeds)
            stack = list(seeds)
            while stack:
                for t in eps[stack.pop()]:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            got = closure_cache[seeds] = frozenset(seen)
        return got

    ids: dict[frozenset, int] = {}
    sets: list[frozenset] = []
    start_ids = []
    for start in starts:
        first = closure(frozenset((start,)))
        if first not in ids:
            ids[first] = len(sets)
            sets.append(first)
        start_ids.append(ids[first])
    rows: list[list[int]] = []
    i = 0
    while i < len(sets):
        check_deadline("subset construction")
        acc: dict[int, set[int]] = {}
        for s in sets[i]:
            for c, ts in moves[s].items():
                got = acc.get(c)
                if got is None:
                    acc[c] = set(ts)
                else:
                    got.update(ts)
        row = [-1] * k
        for c, ts in acc.items():
            target = closure(frozenset(ts))
            j = ids.get(target)
            if j is None:
                if len(sets) >= max_states:
                    raise CompileLimitError(f"grammar needs more than {max_states} DFA states")
                j = ids[target] = len(sets)
                sets.append(target)
            row[c] = j
        rows.append(row)
        i += 1
    table = np.array(rows, np.int32).reshape(len(rows), k)
    accepting = np.array([end in s for s in sets], bool)
    return np.ascontiguousarray(table[:, byte_class]), accepting, start_ids


def trim(dfa: Dfa) -> Dfa:
    """Drop states that are unreachable or cannot reach an accepting state.

    Returns a new DFA (possibly :data:`EMPTY_DFA`); does not mutate ``dfa``.
    """
    n = dfa.n_states
    if n == 0:
        return dfa
    trans = dfa.trans
    reach = np.zeros(n, bool)
    reach[dfa.start] = True
    frontier = np.array([dfa.start])
    while frontier.size:
        nxt = np.unique(trans[frontier])
        nxt = nxt[nxt >= 0]
        nxt = nxt[~reach[nxt]]
        reach[nxt] = True
        frontier = nxt
    src, _ = np.nonzero(trans >= 0)
    dst = trans[trans >= 0]
    order = np.argsort(dst, kind="stable")
    src_sorted, dst_sorted = src[order], dst[order]
    starts = np.searchsorted(dst_sorted, np.arange(n + 1))
    live = dfa.accepting.copy()
    frontier = np.flatnonzero(live)
    while frontier.size:
        preds = np.concatenate([src_sorted[starts[q]:starts[q + 1]] for q in frontier]) if frontier.size else frontier
        preds = np.unique(preds)
        preds = preds[~live[preds]]
        live[preds] = True
        frontier = preds
    keep = reach & live
    if not keep[dfa.start]:
        return EMPTY_DFA
    new_id = np.full(n + 1, -1, np.int32)  # index n maps the dead marker -1
    new_id[np.flatnonzero(keep)] = np.arange(int(keep.sum()), dtype=np.int32)
    t = trans[keep]
    t = new_id[np.where(t >= 0, t, n)]
    return Dfa(t.astype(np.int32), dfa.accepting[keep].copy(), int(new_id[dfa.start]))


def column_classes(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group identical columns of a transition table.

    Returns
    -------
    symbol_class : numpy.ndarray
        int64, ``(n_symbols,)``: the class of each column.
    table : numpy.ndarray
        ``(n_states, n_classes)``: one representative column per class.
    """
    cols = np.ascontiguousarray(trans.T)
    ids: dict[bytes, int] = {}
    symbol_class = np.array([ids.setdefault(c.tobytes(), len(ids)) for c in cols], np.int64)
    first = np.unique(symbol_class, return_index=True)[1]
    return symbol_class, np.ascontiguousarray(trans[:, first])


def minimize(dfa: Dfa) -> Dfa:
    """Trim, then minimize (Valmari and Lehtinen's partition refinement, see
    :mod:`leapgen.automata.minimize_kernel`); the start state becomes 0.
    Does not mutate ``dfa``."""
    dfa = trim(dfa)
    n = dfa.n_states
    if n == 0:
        return dfa
    symbol_class, table = column_classes(dfa.trans)  # table: (n, k), class-level
    src, lab = np.nonzero(table >= 0)
    dst = table[src, lab]
    blocks = minimize_blocks(n, src.astype(np.int64), lab.astype(np.int64), dst.astype(np.int64),
                             np.ascontiguousarray(dfa.accepting))
    n_blocks = int(blocks.max()) + 1
    # renumber so the start's block is 0
    perm = np.arange(n_blocks)
    start_block = int(blocks[dfa.start])
    perm[[0, start_block]] = perm[[start_block, 0]]
    blocks = perm[blocks]
    rep = np.empty(n_blocks, np.int64)
    rep[blocks[::-1]] = np.arange(n)[::-1]
    new_table = np.full((n_blocks, table.shape[1]), -1, np.int32)
    new_table[blocks[src], lab] = blocks[dst]
    return Dfa(np.ascontiguousarray(new_table[:, symbol_class]), dfa.accepting[rep].copy(), 0)


def product(a: Dfa, b: Dfa, *, difference: bool, max_states: int = DEFAULT_MAX_STATES) -> Dfa:
    """Intersection (``difference=False``) or difference ``a \\ b`` of two DFAs.

    Returns a minimized DFA; does not mutate the inputs.

    Raises
    ------
    CompileLimitError
        The product exceeds ``max_states``.
    """
    if a.is_empty:
        return EMPTY_DFA
    if b.is_empty:
        return EMPTY_DFA if not difference else a
    ids = {(a.start, b.start): 0}
    pairs = [(a.start, b.start)]
    rows = []
    i = 0
    while i < len(pairs):
        check_deadline("product construction")
        p, q = pairs[i]
        na = a.trans[p]
        nb = b.trans[q] if q >= 0 else np.full(256, -1, np.int32)
        ok = na >= 0 if difference else (na >= 0) & (nb >= 0)
        row = np.full(256, -1, np.int32)
        keys = na.astype(np.int64) * (b.n_states + 1) + (nb + 1)
        for key in np.unique(keys[ok]).tolist():
            pair = (key // (b.n_states + 1), key % (b.n_states + 1) - 1)
            j = ids.get(pair)
            if j is None:
                if len(pairs) >= max_states:
                    raise CompileLimitError(f"grammar needs more than {max_states} DFA states")
                j = ids[pair] = len(pairs)
                pairs.append(pair)
            row[ok & (keys == key)] = j
        rows.append(row)
        i += 1
    if difference:
        accepting = np.array([a.accepting[p] and not (q >= 0 and b.accepting[q]) for p, q in pairs], bool)
    else:
        accepting = np.array([a.accepting[p] and b.accepting[q] for p, q in pairs], bool)
    return minimize(Dfa(np.array(rows, np.int32), accepting, 0))
