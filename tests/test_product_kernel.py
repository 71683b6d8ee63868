"""The numba product construction against the pure-Python pair construction.

Intersections and differences of random small DFAs must be the same minimal
automaton either way; the state limit and the time limit raise the same
errors.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leapgen.automata import dfa
from leapgen.automata.limits import time_limit
from leapgen.errors import CompileLimitError
from leapgen.grammar import ir
from test_determinize import canonical, ir_nodes

pytestmark = pytest.mark.skipif(dfa._product_kernel is None, reason="numba is not installed")


def python_product(a, b, difference, max_states=dfa.DEFAULT_MAX_STATES, monkeypatch=None):
    monkeypatch.setattr(dfa, "_product_kernel", None)
    try:
        return dfa.product(a, b, difference=difference, max_states=max_states)
    finally:
        monkeypatch.undo()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(ir_nodes, ir_nodes, st.booleans())
def test_kernel_matches_python(monkeypatch, left, right, difference):
    a, b = dfa.compile_dfa(left), dfa.compile_dfa(right)
    got = dfa.product(a, b, difference=difference)
    want = python_product(a, b, difference, monkeypatch=monkeypatch)
    assert canonical(got) == canonical(want)


def _contains(word: bytes) -> ir.Node:
    anything = ir.star(ir.byteset([(97, 122)]))
    return ir.seq(anything, ir.lit(word), anything)


def test_intersection_and_difference_languages():
    a = dfa.compile_dfa(_contains(b"ab"))
    b = dfa.compile_dfa(_contains(b"ba"))
    both = dfa.product(a, b, difference=False)
    only_a = dfa.product(a, b, difference=True)
    assert both.matches(b"aba") and not both.matches(b"ab")
    assert only_a.matches(b"ab") and not only_a.matches(b"aba")


def test_state_limit(monkeypatch):
    ab = ir.byteset([(97, 98)])
    a = dfa.compile_dfa(ir.seq(ir.star(ab), ir.lit(b"a"), *[ab] * 6))
    b = dfa.compile_dfa(ir.seq(ir.star(ab), ir.lit(b"b"), *[ab] * 6))
    with pytest.raises(CompileLimitError, match="more than 50 DFA states"):
        dfa.product(a, b, difference=False, max_states=50)
    with pytest.raises(CompileLimitError, match="more than 50 DFA states"):
        python_product(a, b, False, max_states=50, monkeypatch=monkeypatch)


def test_deadline():
    ab = ir.byteset([(97, 98)])
    a = dfa.compile_dfa(ir.seq(ir.star(ab), ir.lit(b"a"), *[ab] * 11))
    b = dfa.compile_dfa(ir.seq(ir.star(ab), ir.lit(b"b"), *[ab] * 11))
    with time_limit(1e-6):
        with pytest.raises(CompileLimitError, match="product construction"):
            dfa.product(a, b, difference=False)
