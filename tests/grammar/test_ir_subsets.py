"""ir.Subsets: non-empty ordered subsets joined by a separator (a JSON object's optional members)."""

from __future__ import annotations

import itertools

from leapgen.automata import compile_dfa
from leapgen.automata.nfa import Nfa
from leapgen.grammar import ir


def _language(items: list[str], sep: str) -> set[bytes]:
    out = set()
    for k in range(1, len(items) + 1):
        for chosen in itertools.combinations(items, k):
            out.add(sep.join(chosen).encode())
    return out


def test_subsets_accepts_exactly_the_ordered_subsets():
    items = ["a", "bb", "c", "ab"]
    dfa = compile_dfa(ir.subsets([ir.lit(i) for i in items], ir.lit(",")))
    want = _language(items, ",")
    for n in range(0, 9):
        for chars in itertools.product(b"abc,", repeat=n):
            text = bytes(chars)
            assert dfa.matches(text) == (text in want), text


def test_subsets_with_a_pattern_separator_and_unordered_items():
    # the separator may be any language, and two items may match the same text
    sep = ir.seq(ir.lit(","), ir.opt(ir.lit(" ")))
    dfa = compile_dfa(ir.subsets([ir.plus(ir.lit("x")), ir.lit("y"), ir.plus(ir.lit("x"))], sep))
    for text, ok in [(b"x", True), (b"xx, y", True), (b"y,x", True), (b"x,y, xxx", True), (b"x,x", True),
                     (b"y,y", False), (b"x,y,x,x", False), (b"", False), (b",x", False), (b"x,", False)]:
        assert dfa.matches(text) == ok, text


def test_subsets_helper_simplifies():
    a, b = ir.lit("a"), ir.lit("b")
    assert ir.subsets([], ir.lit(",")) == ir.NOTHING
    assert ir.subsets([ir.NOTHING, a], ir.lit(",")) == a
    assert ir.subsets([a, b], ir.NOTHING) == ir.alt(a, b)
    assert ir.children(ir.subsets([a, b], ir.lit(","))) == (a, b, ir.lit(","))


def test_subsets_nfa_grows_linearly():
    def nfa_states(k: int) -> int:
        nfa = Nfa(10**6, compile_dfa)
        nfa.build(ir.subsets([ir.lit(f'"k{i}":1') for i in range(k)], ir.lit(",")))
        return nfa.n_states

    assert nfa_states(40) <= 2.1 * nfa_states(20)


def test_subsets_inside_a_recursive_rule():
    # optional members whose values refer to the rule itself stay rule references (the CFG path)
    from leapgen.grammar.cfg import simplify_grammar

    node = ir.seq(ir.lit("{"), ir.opt(ir.subsets([ir.seq(ir.lit("a:"), ir.RuleRef("v")),
                                                  ir.seq(ir.lit("b:"), ir.RuleRef("n"))], ir.lit(","))), ir.lit("}"))
    grammar = simplify_grammar(ir.Grammar({"v": node, "n": ir.lit("1")}, "v"))
    assert isinstance(grammar, ir.Grammar)
    body = grammar.rules["v"]
    assert any(isinstance(n, ir.Subsets) for n in ir.iter_nodes(body))
    assert ir.RuleRef("n") not in set(ir.iter_nodes(body))  # the non-recursive rule was inlined
