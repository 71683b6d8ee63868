"""EBNF rule options in leapgen's native API: parsing, kept rules, temperatures,
and token / character budgets (masks checked against a byte-by-byte walk).

The semantics are checked against the installed xgrammar in
``tests/xgrammar/test_rule_options.py``; here: leapgen alone, on the toy
vocabulary of ``conftest.py`` (every single byte plus longer pieces).
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

from leapgen import GrammarMatcher
from leapgen.errors import GrammarError
from leapgen.grammar import ir
from leapgen.grammar.cfg import simplify_grammar
from leapgen.grammar.ebnf import parse_ebnf


def test_options_parse_and_keep_their_rule():
    g = parse_ebnf('root ::= "a" v "b"\nv[temperature=0.5, max_tokens=4, max_chars=0] ::= [a-z]*')
    assert g.options == {"v": ir.RuleOptions(temperature=0.5, max_tokens=4, max_chars=0)}
    simple = simplify_grammar(g)
    assert isinstance(simple, ir.Grammar) and "v" in simple.rules and simple.options == g.options
    alone = simplify_grammar(parse_ebnf('root[temperature=1] ::= "a"'))
    assert isinstance(alone, ir.Grammar) and alone.options["root"].temperature == 1.0
    assert not isinstance(simplify_grammar(parse_ebnf('root ::= "a" v\nv ::= "b"')), ir.Grammar)  # no options: inlined


@pytest.mark.parametrize("text, message", [
    ('root[temperature=-1] ::= "a"', "finite non-negative number"), ('root[temperature=nan] ::= "a"', "finite non-negative number"),
    ('root[max_tokens=0] ::= "a"', "max_tokens"), ('root[max_chars=1.5] ::= "a"', "max_chars"),
    ('root[capture] ::= "a"', "not supported"), ('root[lazy] ::= "a"', "not supported"),
    ('root[wat=1] ::= "a"', "unknown rule option"), ('root[temperature] ::= "a"', "needs a value"),
    ('root[temperature=1, temperature=2] ::= "a"', "twice"), ('root[temperature=1 ::= "a"', "closing"),
])
def test_bad_options_name_what_and_where(text, message):
    with pytest.raises(GrammarError, match=message) as info:
        parse_ebnf(text)
    assert info.value.where.startswith("line 1:")


def test_a_class_after_a_rule_name_is_no_option_list():
    g = parse_ebnf('root ::= v[a-z]\nv ::= "x"')
    assert g.options == {} and isinstance(g.rules["root"], ir.Seq)


def test_native_matcher_temperature(toy_compiler):
    compiled = toy_compiler.compile_grammar('root ::= "ab" v\nv[temperature=0.7] ::= [a-z]+')
    m = GrammarMatcher(compiled)
    assert m.temperature is None
    assert GrammarMatcher(compiled, default_temperature=0.3).temperature == 0.3
    m.accept_string("ab")
    assert m.temperature == 0.7
    with pytest.raises(ValueError):
        GrammarMatcher(compiled, default_temperature=-1.0)
    amb = toy_compiler.compile_grammar('root ::= a | b\na[temperature=0.2] ::= "c" "x"\nb[temperature=0.9] ::= "c" "y"')
    m = GrammarMatcher(amb)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert m.temperature == 0.9 and m.temperature == 0.9
    assert len(caught) == 1  # warned once per matcher


def test_tail_calls_keep_an_attributed_frame(toy_compiler):
    """``outer`` ends in a call of a recursive rule: its frame must stay (it is not a tail call)."""
    compiled = toy_compiler.compile_grammar('root ::= "x" outer\nouter[temperature=0.4] ::= "[" items\n'
                                            'items ::= "a" items | "]"')
    m = GrammarMatcher(compiled)
    assert m.temperature is None
    for part in ("x", "[", "a", "a"):
        assert m.accept_string(part)
        assert m.temperature == 0.4, part
    assert m.accept_string("]") and m.is_completed()


BUDGETED = [
    'root ::= "<" r ">"\nr[max_tokens=3] ::= [a-z ]*',
    'root ::= r "}"\nr[max_chars=4] ::= [a-z\u00e9\u65e5]*',
    'root ::= r r "."\nr[max_chars=2, max_tokens=2] ::= [a-c]*',
    'root ::= "[" r "]"\nr[max_tokens=2] ::= s ("," s)*\ns[max_chars=3] ::= [0-9a-z]+',
    'root ::= (r ";")+\nr[max_tokens=1] ::= [a-z]+ ("1" [a-z]*)?',
    'root ::= r\nr[max_chars=3] ::= "(" r ")" | [a-z]+',
    'root ::= "<" r ">" [0-9]\nr[max_chars=3] ::= ([a-c] [0-9])*',
    'root ::= "<" r "\u65e5"\nr[max_chars=2] ::= [a-c\u00e9 ]*',
]


@pytest.mark.parametrize("grammar", BUDGETED)
def test_budget_masks_equal_a_walk_of_every_token(toy_compiler, toy_info, grammar):
    """Along random walks, each token's bit says whether the budget-aware walk accepts it."""
    compiled = toy_compiler.compile_grammar(grammar)
    rng = random.Random(grammar)
    bitmask = np.zeros((1, (toy_info.vocab_size + 31) // 32), np.int32)
    for _ in range(3):
        m = GrammarMatcher(compiled)
        for _ in range(12):
            m.fill_next_token_bitmask(bitmask)
            bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[:toy_info.vocab_size].astype(bool)
            for t, data in enumerate(toy_info.token_bytes):
                if data:
                    assert bits[t] == (compiled.advance(m.state, data, token=True) is not None), (grammar, t, data)
            text_ids = [t for t in np.flatnonzero(bits).tolist() if toy_info.token_bytes[t]]
            if not text_ids:
                break
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a budget relaxed where the rule could not end
                assert m.accept_token(rng.choice(text_ids))


def test_budget_state_survives_rollback_and_fork(toy_compiler):
    compiled = toy_compiler.compile_grammar('root ::= "<" r ">"\nr[max_tokens=2] ::= [a-z]*')
    m = GrammarMatcher(compiled)
    for part in (b"<", b"a", b"b"):
        assert m.accept_token(part[0])
    f = m.fork()
    assert not f.accept_token(ord("c")) and f.accept_token(ord(">"))  # spent: the rule must end
    m.rollback(1)
    assert m.accept_token(ord("c"))  # one token left again
    assert not m.accept_token(ord("d"))


@pytest.mark.parametrize("grammar, text", [
    ('root ::= "<think>" r "</think>" [0-9]+\nr[max_chars=12] ::= [^<]*', ["", "a b", "aaaaaa", "hello wor", "x" * 11]),
    ('root ::= "[" r "]"\nr[max_chars=5] ::= ([a-z]+ ",")* [a-z]*', ["", "ab,", "ab,c"]),
])
def test_vectorized_budget_filter_equals_the_walk(grammar_compiler, grammar, text):
    """On a real vocabulary (Llama-3): the vectorized character-budget filter drops exactly
    what the byte-by-byte walk of every token drops."""
    compiled = grammar_compiler("llama3").compile_grammar(grammar)
    prefix = grammar.split('"')[1]
    for t in text:
        m = GrammarMatcher(compiled)
        assert m.accept_string(prefix + t)
        _, complete, frames = compiled._pruned(m.state)
        plain_row, _ = compiled.plain.bitmask_row(compiled._pruned(m.state)[0])
        least = compiled._least_risky_chars(frames)
        assert least is not None
        fast = np.array(plain_row).view(np.uint32)
        applies = compiled._drop_rejected_fast(frames, fast, least)
        assert applies or np.count_nonzero(compiled.token_chars >= least) < 2000, "the vectorized filter should apply"
        walked = np.array(plain_row).view(np.uint32)
        compiled._drop_rejected(m.state, walked, least)
        assert np.array_equal(fast, walked), t
