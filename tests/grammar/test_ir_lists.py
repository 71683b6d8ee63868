"""List nodes of the IR: ir.Subsets (a JSON object's optional members) and ir.Join (array items)."""

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


def test_join_accepts_items_separated_by_the_separator():
    dfa = compile_dfa(ir.join(ir.alt(ir.lit("a"), ir.lit("bb")), ir.lit(",")))
    want = set()
    for n in range(1, 6):  # every list spelled in at most 8 bytes
        for chosen in itertools.product(["a", "bb"], repeat=n):
            want.add(",".join(chosen).encode())
    for n in range(0, 9):
        for chars in itertools.product(b"ab,", repeat=n):
            text = bytes(chars)
            assert dfa.matches(text) == (text in want), text


def test_join_helper_and_its_automaton_size():
    a = ir.lit("a")
    assert ir.join(ir.NOTHING, ir.lit(",")) == ir.NOTHING
    assert ir.join(a, ir.NOTHING) == a
    assert ir.children(ir.join(a, ir.lit(","))) == (a, ir.lit(","))
    item = ir.seq(ir.lit('"'), ir.star(ir.charset([(0x20, 0x10FFFF)])), ir.lit('"'))
    joined = compile_dfa(ir.join(item, ir.lit(",")))
    unrolled = compile_dfa(ir.seq(item, ir.star(ir.seq(ir.lit(","), item))))
    assert joined.n_states == unrolled.n_states  # the same minimal DFA
    assert all(joined.matches(t) == unrolled.matches(t) for t in [b'"x"', b'"x","y"', b'"x",', b'', b'"\xc3\xa9"'])


def test_join_in_patterns_and_compile_time_matching():
    from leapgen.grammar.json.match import matches, nullable
    from leapgen.grammar.json.strings import json_encode_regex

    node = ir.join(ir.plus(ir.charset([(ord("a"), ord("z"))])), ir.lit("."))  # as in the email format
    assert matches(node, "ab.c") and not matches(node, "ab.") and not matches(node, "")
    assert not nullable(node) and nullable(ir.join(ir.EMPTY, ir.lit(".")))
    assert isinstance(json_encode_regex(ir.join(ir.lit("x"), ir.lit('"'))), ir.Join)


def test_join_of_a_rule_reference_in_a_recursive_rule():
    # any JSON value's array: [v (, v)*] with v the rule itself
    from leapgen import GrammarCompiler
    from leapgen.vocab import TokenizerInfo

    info = TokenizerInfo([bytes([b]) for b in range(256)], stop_token_ids=[])
    compiled = GrammarCompiler(info).compile_json_schema({"type": "array", "items": {"$ref": "#"}})
    from leapgen import GrammarMatcher

    for text, ok in [("[[],[[]]]", True), ("[[],]", False)]:
        m = GrammarMatcher(compiled)
        assert m.accept_string(text) == ok and (not ok or m.is_completed())
