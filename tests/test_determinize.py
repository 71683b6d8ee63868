"""The numba subset construction against the pure-Python reference.

Both determinize the same Thompson NFA; after minimization the two DFAs must
be the same automaton up to state numbering (compared in a canonical
breadth-first numbering). Also: several start states at once, the
``max_states`` limit and the compile time limit.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leapgen.automata import subset
from leapgen.automata.dfa import Dfa, minimize, minimize_table
from leapgen.automata.limits import time_limit
from leapgen.automata.nfa import Nfa
from leapgen.errors import CompileLimitError
from leapgen.grammar import ir
from leapgen.grammar.regex import parse_regex

pytestmark = pytest.mark.skipif(subset._kernel is None, reason="numba is not installed")


def canonical(dfa: Dfa) -> tuple:
    """A DFA's transitions and accepting flags in breadth-first numbering from its start."""
    if dfa.is_empty:
        return ()
    order = {dfa.start: 0}
    todo = [dfa.start]
    rows = []
    for q in todo:
        row = []
        for t in dfa.trans[q].tolist():
            if t >= 0 and t not in order:
                order[t] = len(order)
                todo.append(t)
            row.append(order.get(t, -1))
        rows.append((tuple(row), bool(dfa.accepting[q])))
    return tuple(rows)


def nfa_of(node: ir.Node) -> tuple[Nfa, int, int]:
    nfa = Nfa(50_000, None)
    start, end = nfa.build(node)
    return nfa, start, end


def both(nfa: Nfa, starts: list[int], end: int, max_states: int = 100_000, alphabet: int = 256):
    """(kernel, reference) results of :func:`subset.determinize_classes`."""
    fast = subset.determinize_classes(nfa, starts, end, max_states, alphabet=alphabet)
    slow = subset.determinize_reference(nfa, starts, end, max_states, alphabet=alphabet)
    assert np.array_equal(fast[3], slow[3])  # the same byte classes
    return fast, slow


def minimal(result, i: int = 0) -> Dfa:
    """The minimal DFA from start ``i`` of a determinize_classes result."""
    table, accepting, starts, byte_class = result
    return minimize_table(table, accepting, starts[i], byte_class)


def assert_same_moves(fast, slow, i: int = 0) -> None:
    """Untrimmed, state by state: from start ``i``, every string reaches a dead
    state in both results or in neither, and accepting in both or in neither
    (the results are not trimmed: a live dead end must stay apart from dead)."""
    ta, acc_a, starts_a, _ = fast
    tb, acc_b, starts_b, _ = slow
    todo = [(starts_a[i], starts_b[i])]
    seen = set(todo)
    for p, q in todo:
        assert bool(acc_a[p]) == bool(acc_b[q])
        for c in range(ta.shape[1]):
            pair = (int(ta[p, c]), int(tb[q, c]))
            assert (pair[0] < 0) == (pair[1] < 0)
            if pair[0] >= 0 and pair not in seen:
                seen.add(pair)
                todo.append(pair)


def assert_same_language(nfa: Nfa, start: int, end: int) -> None:
    fast, slow = both(nfa, [start], end)
    assert fast[0].shape[0] <= slow[0].shape[0]  # keyed by important states: never more DFA states
    assert_same_moves(fast, slow)
    assert canonical(minimal(fast)) == canonical(minimal(slow))


ranges = st.lists(st.tuples(st.integers(0, 255), st.integers(0, 40)), min_size=1, max_size=3).map(
    lambda rs: ir.byteset([(lo, min(255, lo + w)) for lo, w in rs]))
chars = st.lists(st.tuples(st.integers(0, 0x10FFFF), st.integers(0, 3000)), min_size=1, max_size=2).map(
    lambda rs: ir.charset([(lo, min(0x10FFFF, lo + w)) for lo, w in rs]))
leaves = st.one_of(st.binary(min_size=1, max_size=4).map(ir.lit), ranges, chars,
                   st.sampled_from([ir.lit(b"a"), ir.lit(b"ab"), ir.byteset([(97, 99)])]))


def _extend(children):
    return st.one_of(
        st.lists(children, min_size=2, max_size=4).map(lambda xs: ir.seq(*xs)),
        st.lists(children, min_size=2, max_size=4).map(lambda xs: ir.alt(*xs)),
        st.tuples(children, st.integers(0, 3), st.one_of(st.none(), st.integers(0, 3))).map(
            lambda t: ir.repeat(t[0], t[1], None if t[2] is None else t[1] + t[2])),
    )


ir_nodes = st.recursive(leaves, _extend, max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ir_nodes)
def test_kernel_matches_reference_on_random_ir(node):
    nfa, start, end = nfa_of(node)
    assert_same_language(nfa, start, end)


@pytest.mark.parametrize("pattern", [
    r"[a-z0-9._%+-]{1,20}@[a-z0-9-]{1,20}\.(com|org|net)",
    r"(a|b)*abb(a|b){0,6}",
    r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    r"([^\x00-\x7f]|[0-9_])+x{2,5}",
    r"",
])
def test_kernel_matches_reference_on_regexes(pattern):
    nfa, start, end = nfa_of(parse_regex(pattern))
    assert_same_language(nfa, start, end)


def test_several_starts_share_states():
    """Determinizing from several starts at once: each start must get the DFA
    of its own language."""
    nfa, s1, end = nfa_of(ir.seq(ir.lit(b"ab"), ir.repeat(ir.byteset([(48, 57)]), 1, None)))
    s2 = nfa.new_state()
    nfa.add_edge(s2, ord("x"), ord("x"), s1)
    fast, slow = both(nfa, [s1, s2, s1], end)
    assert fast[2][0] == fast[2][2]
    for i in range(3):
        assert_same_moves(fast, slow, i)
        assert canonical(minimal(fast, i)) == canonical(minimal(slow, i))
    assert minimal(fast, 1).matches(b"xab12") and not minimal(fast, 0).matches(b"xab12")


def test_call_symbols_alphabet():
    """Rule bodies use symbols above 255 (call symbols)."""
    nfa = Nfa(100, None)
    s, e = nfa.new_state(), nfa.new_state()
    mid = nfa.new_state()
    nfa.add_edge(s, 256, 256, mid)
    nfa.add_edge(mid, 97, 97, e)
    nfa.add_eps(mid, e)
    fast, slow = both(nfa, [s], e, 100, alphabet=258)
    assert len(fast[3]) == 258
    assert canonical(minimal(fast)) == canonical(minimal(slow))
    trans, _, _ = subset.determinize(nfa, [s], e, 100, alphabet=258)
    assert trans.shape[1] == 258


def _blowup(n: int) -> tuple[Nfa, int, int]:
    """``(a|b)* a (a|b){n}``: its DFA needs 2**(n+1) states."""
    ab = ir.byteset([(97, 98)])
    return nfa_of(ir.seq(ir.star(ab), ir.lit(b"a"), *[ab] * n))


def test_max_states_raises_the_same_error():
    nfa, start, end = _blowup(10)
    for determinize in (subset.determinize_classes, subset.determinize_reference):
        with pytest.raises(CompileLimitError, match="more than 500 DFA states"):
            determinize(nfa, [start], end, 500)


def test_deadline_stops_the_kernel():
    nfa, start, end = _blowup(17)  # 2**18 states: seconds of work
    with time_limit(0.05):
        with pytest.raises(CompileLimitError, match="0.05 s limit .*subset construction"):
            subset.determinize(nfa, [start], end, 10**7)


def test_live_dead_end_is_not_dead():
    """A byte into an NFA state with no edges (not accepting) gives a live DFA
    state with no way on, as in the reference; only trimming drops it."""
    nfa = Nfa(10, None)
    s, e, stuck = nfa.new_state(), nfa.new_state(), nfa.new_state()
    nfa.add_edge(s, 97, 97, stuck)  # 'a' leads to a state with no way on
    nfa.add_edge(s, 98, 98, e)
    fast, slow = both(nfa, [s], e, 10)
    assert_same_moves(fast, slow)
    trans, acc, starts = subset.determinize(nfa, [s], e, 10)
    assert trans[starts[0], 97] >= 0 and not acc[trans[starts[0], 97]]
    d = minimize(Dfa(trans, acc, starts[0]))
    assert d.matches(b"b") and not d.matches(b"a")
    assert np.all(d.trans[:, 97] < 0)
