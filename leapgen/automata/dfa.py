"""Byte-level DFAs: subset construction, trimming, minimization, products.

- Determinization: Rabin-Scott subset construction over *byte classes*
  (:mod:`leapgen.automata.subset`, a numba kernel).
- Trimming keeps only states that are reachable and can still reach an
  accepting state, so every state a matcher can be in has a completion: a
  token mask built on a trimmed DFA never leads into a dead end.
- Minimization: Valmari and Lehtinen's partition refinement over byte
  classes (:mod:`leapgen.automata.minimize_kernel`).
- Products: intersection and difference of languages by the usual pair
  construction.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from leapgen.automata.dfa_table import EMPTY_DFA, Dfa, minimize_table
from leapgen.automata.limits import check_deadline, current_deadline, deadline_error, intern_state, too_many_states
from leapgen.automata.nfa import Nfa
from leapgen.automata.subset import determinize_classes
from leapgen.automata.tables import full_table
from leapgen.automata.trim_kernel import useful_states
from leapgen.grammar import ir

try:
    from leapgen.automata import product_kernel as _product_kernel
except ImportError:  # pragma: no cover - numba missing: the pure-Python pair construction
    _product_kernel = None

DEFAULT_MAX_STATES = 100_000
SUB_DFA_CACHE_ENTRIES = 512
#: Bound on the summed transition-table bytes of the sub-DFA cache; a DFA over a quarter of it is not kept
#: (a whole grammar's DFA goes through the cache too: kept whole, distinct heavy grammars grew every process
#: by their size, past the compiled-grammar cache's own byte bound).
SUB_DFA_CACHE_BYTES = 32 << 20
# DFAs of repeated IR fragments, by value (IR nodes are immutable): shared by all compiles.
_SUB_DFA_CACHE: OrderedDict = OrderedDict()
_SUB_DFA_LOCK = threading.Lock()
_sub_dfa_bytes = 0


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
    if isinstance(node, ir.Quotient) and rule_ids is None:
        return right_quotient(compile_dfa(node.left, max_states=max_states), node.suffix)
    if isinstance(node, ir.Embed) and rule_ids is None:
        return compile_dfa(node.item, max_states=max_states)
    if rule_ids is not None and not ir.contains_ruleref(node):
        # a rule calling no rule (a string with its lengths written out, ~5,000 states at maxLength 255):
        # its bytes-only automaton, from the cache that other grammars' equal rules filled, widened
        return _with_call_columns(compile_dfa(node, max_states=max_states), len(rule_ids))
    if rule_ids is None:
        with _SUB_DFA_LOCK:
            got = _SUB_DFA_CACHE.get((node, max_states))
        if got is not None:
            return got
    nfa = Nfa(max_states, lambda n: compile_dfa(n, max_states=max_states), rule_ids=rule_ids)
    nfa.root = node
    start, end = nfa.build(node)
    alphabet = 256 + (len(rule_ids) if rule_ids else 0)
    table, accepting, starts, byte_class = determinize_classes(nfa, [start], end, max_states, alphabet=alphabet)
    out = minimize_table(table, accepting, starts[0], byte_class)
    if rule_ids is None:
        _keep_sub_dfa((node, max_states), out)
    return out


def compile_counted_dfa(node: ir.Node, *, max_states: int = DEFAULT_MAX_STATES
                        ) -> tuple[Dfa, tuple[tuple[int, int | None], ...]]:
    """:func:`compile_dfa`, keeping each :class:`~leapgen.grammar.ir.Counted` region as a loop
    with its count left to the matcher (:mod:`leapgen.automata.counted`).

    Parameters
    ----------
    node : ir.Node
        The language (no rule reference).
    max_states : int
        Limit on NFA and DFA states.

    Returns
    -------
    (Dfa, tuple of (int, int or None))
        The minimal trimmed DFA, over bytes and two symbols per region bounds: ``256 + 2k`` (an
        item of region ``k`` starts) and ``257 + 2k`` (region ``k`` ends); and the bounds
        ``(lo, hi)`` of each ``k``. Without counted regions: :func:`compile_dfa`'s DFA and ``()``.

    Raises
    ------
    CompileLimitError
        The automaton would exceed ``max_states``.
    """
    if isinstance(node, (ir.Intersect, ir.Diff, ir.Quotient, ir.Embed)):  # built apart: nothing counted there
        return compile_dfa(node, max_states=max_states), ()
    with _SUB_DFA_LOCK:
        got = _SUB_DFA_CACHE.get((node, max_states))
    if got is not None:
        return got, ()
    counting: dict = {}
    nfa = Nfa(max_states, lambda n: compile_dfa(n, max_states=max_states), counting=counting)
    nfa.root = node
    start, end = nfa.build(node)
    table, accepting, starts, byte_class = determinize_classes(nfa, [start], end, max_states,
                                                               alphabet=256 + 2 * len(counting))
    out = minimize_table(table, accepting, starts[0], byte_class)
    if not counting:
        _keep_sub_dfa((node, max_states), out)
    return out, tuple(sorted(counting, key=counting.__getitem__))


def right_quotient(dfa: Dfa, suffix: bytes) -> Dfa:
    """The DFA of ``L / suffix`` (the strings ``w`` with ``w + suffix`` in ``L``): the same
    transitions, accepting where ``suffix`` walks to an accepting state; minimized. Pure."""
    if dfa.is_empty:
        return dfa
    q = np.arange(dfa.n_states)
    for b in suffix:
        q = np.where(q >= 0, dfa.trans[np.maximum(q, 0), b], -1)
    accepting = np.zeros(dfa.n_states, bool)
    accepting[q >= 0] = dfa.accepting[q[q >= 0]]
    return minimize(Dfa(dfa.trans, accepting, dfa.start))


def _with_call_columns(dfa: Dfa, n_rules: int) -> Dfa:
    """``dfa`` (256 columns) with ``n_rules`` call columns, all dead: a rule body's automaton. Pure."""
    if dfa.is_empty:
        return dfa
    trans = full_table((dfa.n_states, 256 + n_rules), -1, np.int32)
    trans[:, :256] = dfa.trans
    return Dfa(trans, dfa.accepting, dfa.start)


def _keep_sub_dfa(key: tuple, dfa: Dfa) -> None:
    """Put ``dfa`` in the sub-DFA cache, LRU-bounded in entries and table bytes (mutates the cache)."""
    global _sub_dfa_bytes
    size = int(dfa.trans.nbytes)
    if size > SUB_DFA_CACHE_BYTES // 4:
        return
    with _SUB_DFA_LOCK:
        old = _SUB_DFA_CACHE.pop(key, None)
        if old is not None:
            _sub_dfa_bytes -= int(old.trans.nbytes)
        if not _SUB_DFA_CACHE:
            _sub_dfa_bytes = 0  # (a test may clear the dict itself)
        _SUB_DFA_CACHE[key] = dfa
        _sub_dfa_bytes += size
        while len(_SUB_DFA_CACHE) > 1 and (len(_SUB_DFA_CACHE) > SUB_DFA_CACHE_ENTRIES
                                           or _sub_dfa_bytes > SUB_DFA_CACHE_BYTES):
            _, evicted = _SUB_DFA_CACHE.popitem(last=False)
            _sub_dfa_bytes -= int(evicted.trans.nbytes)


def trim(dfa: Dfa) -> Dfa:
    """Drop states that are unreachable or cannot reach an accepting state.

    Returns a new DFA (possibly :data:`EMPTY_DFA`); does not mutate ``dfa``.
    """
    if dfa.n_states == 0:
        return dfa
    got = _trim_table(dfa.trans, dfa.accepting, dfa.start)
    return EMPTY_DFA if got is None else Dfa(*got)


def _trim_table(table: np.ndarray, accepting: np.ndarray, start: int):
    """:func:`trim` on a table of any width (bytes or classes): ``(table,
    accepting, start)`` renumbered, or None when the language is empty."""
    keep = useful_states(table, start, accepting, np.arange(table.shape[1]))
    if not keep[start]:
        return None
    n = table.shape[0]
    new_id = np.full(n + 1, -1, np.int32)  # index n maps the dead marker -1
    new_id[np.flatnonzero(keep)] = np.arange(int(keep.sum()), dtype=np.int32)
    t = table[keep]
    return new_id[np.where(t >= 0, t, n)], accepting[keep].copy(), int(new_id[start])


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
    if dfa.n_states == 0:
        return dfa
    symbol_class, table = column_classes(dfa.trans)
    return minimize_table(table, dfa.accepting, dfa.start, symbol_class)


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
    if _product_kernel is not None:
        return _product_numba(a, b, difference, max_states)
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
            row[ok & (keys == key)] = intern_state(ids, pairs, pair, max_states)
        rows.append(row)
        i += 1
    if difference:
        accepting = np.array([a.accepting[p] and not (q >= 0 and b.accepting[q]) for p, q in pairs], bool)
    else:
        accepting = np.array([a.accepting[p] and b.accepting[q] for p, q in pairs], bool)
    return minimize(Dfa(np.array(rows, np.int32), accepting, 0))


def _product_numba(a: Dfa, b: Dfa, difference: bool, max_states: int) -> Dfa:
    """:func:`product` by the kernel of :mod:`leapgen.automata.product_kernel`, over the symbol
    classes of both tables."""
    symbol_class, joint = column_classes(np.concatenate((a.trans, b.trans)))
    deadline = current_deadline()
    status, table, accepting = _product_kernel.product_pairs(
        np.ascontiguousarray(joint[:a.n_states]), np.ascontiguousarray(joint[a.n_states:]), a.start, b.start,
        a.accepting, b.accepting, difference, max_states, np.inf if deadline is None else deadline)
    if status == _product_kernel.DEADLINE_PASSED:
        raise deadline_error("product construction")
    if status == _product_kernel.TOO_MANY_STATES:
        raise too_many_states(max_states)
    return minimize_table(table, accepting, 0, symbol_class)
