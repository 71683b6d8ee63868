"""EBNF rule options (temperature, max_tokens, max_chars), run on xgrammar and on
leapgen.xgrammar: each scenario's masks, verdicts, completion, jump-forward
strings and temperatures must be the same in both.

Ported (rewritten) from xgrammar's ``tests/python/test_temperature.py``
(inner overrides outer, ambiguous paths take the maximum, the default
temperature, ``batch_fill_temperature``, draft-tree temperatures, invalid
values) and ``test_max_chars.py`` (character budgets, relaxation, nesting,
``accept_string``), plus token budgets from xgrammar's EBNF documentation.
"""

from __future__ import annotations

import warnings

import pytest
from xgr_pair import mask_of

VOCAB = ["</s>", "a", "b", "c", "ab", "abc", "<t>", "</t>", "x", "</t>x", "a</t>", "1", "1a", "<t>a", "<t>ab",
         "b1", "ba", "\u00e9", "\u00e9a", "1b", "aa", ":", "answer", "answer:", "y", "z", "<", ">"]


def _run(xgr, grammar: str, steps, **matcher_kwargs) -> list:
    """The trace of a matcher: masks (as token strings), then per step (verdict,
    mask, completed, jump-forward string, temperature); a str step is
    ``accept_string``, a 1-tuple ``accept_token``."""
    info = xgr.TokenizerInfo(VOCAB)
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info, max_threads=1).compile_grammar(grammar), **matcher_kwargs)

    def snapshot():
        if m.is_terminated():
            return "terminated", m.is_completed(), m.temperature
        return [VOCAB[i] for i in mask_of(xgr, m, len(VOCAB))], m.is_completed(), m.find_jump_forward_string(), \
            m.temperature

    trace = [snapshot()]
    for s in steps:
        ok = m.accept_string(s) if isinstance(s, str) else m.accept_token(VOCAB.index(s[0]))
        trace.append((ok, *snapshot()))
    return trace


@pytest.fixture(scope="module")
def oracle():
    """``oracle(grammar, steps, **kw)``: xgrammar's trace (skips without xgrammar)."""
    X = pytest.importorskip("xgrammar", reason="xgrammar (the oracle) is not installed")
    return lambda grammar, steps, **kw: _run(X, grammar, steps, **kw)


def _same(oracle, grammar, steps, **kw):
    import leapgen.xgrammar as L

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both warn about ambiguous temperatures / relaxed budgets
        expect = oracle(grammar, steps, **kw)
        got = _run(L, grammar, steps, **kw)
    assert got == expect


TEMPERATURES = [
    ('root ::= "answer:" value\nvalue[temperature=0.7] ::= [a-z]+', ["answer", ":", "ab", "c"], {}),
    ('root ::= "answer:" value\nvalue[temperature=0.7] ::= [a-z]+', ["answer", ":", "ab"], {"default_temperature": 0.2}),
    ('root[temperature=0.3] ::= "answer:" value\nvalue[temperature=0.7] ::= [a-z]+', ["answer", ":", "ab"], {}),
    ('root[temperature=0.3] ::= "answer:" value "1"\nvalue ::= [a-z]+', ["answer", ":", "ab", "1"], {}),
    ('root ::= a | b\na[temperature=0.3] ::= "x" "y"\nb[temperature=0.9] ::= "x" "z"', ["x", "y"], {}),
    ('root ::= a | "xz"\na[temperature=0.3] ::= "x" "y"', ["x", "y"], {}),
    ('root ::= a "1"\na[temperature=0.3] ::= "x" "y"', ["x", "y", "1"], {}),
    ('root ::= "x" a\na[temperature=0.3] ::= "y"', ["x", "y"], {}),
    ('root ::= a*\na[temperature=0.3] ::= "y"', ["y", "y"], {}),
    ('root ::= "<" v ">"\nv[temperature=0.5] ::= "a" w "c"\nw[temperature=1.5] ::= "b"', ["<", "a", "b", "c", ">"], {}),
    ('root ::= "<" v ">"\nv[temperature=0.5] ::= "a" w\nw ::= "b" w | "c"', ["<", "a", "b", "b", "c", ">"], {}),
    ('root ::= v\nv[temperature=0.5] ::= "a" w\nw[temperature=0] ::= "b" w | "c"', ["a", "b", "c"], {}),
    ('root ::= "<" v ">"\nv[temperature=1e-1] ::= [a-c]+', [("<",), ("ab",), ("c",), (">",), ("</s>",)], {}),
]


@pytest.mark.parametrize("grammar, steps, kw", TEMPERATURES)
def test_temperatures(oracle, grammar, steps, kw):
    _same(oracle, grammar, steps, **kw)


BUDGETS = [
    ('root ::= "<t>" r "</t>" x\nr[max_tokens=2] ::= [a-c]*\nx ::= "x"', [("<t>",), ("a",), ("ab",)]),
    ('root ::= "<t>" r "</t>" x\nr[max_tokens=2] ::= [a-c]*\nx ::= "x"', ["<t>", "a", "b", "c"]),
    ('root ::= r "</t>"\nr[max_tokens=1] ::= [a-c]*', [("a",), "b", ("</t>",)]),
    ('root ::= r "</t>"\nr[max_tokens=1] ::= [a-c]+ "1"', [("a",), ("b",), ("1",)]),
    ('root ::= r "</t>"\nr[max_tokens=1] ::= [a-c]+ ("1" [a-c]*)', [("a",), ("b",), ("1a",)]),
    ('root ::= r "</t>"\nr[max_tokens=1] ::= [a-c]+ ("1" [a-c]*)', [("a",), ("1",)]),
    ('root ::= "<t>" r "</t>"\nr[max_tokens=1] ::= [a-c]*', [("<t>a",), ("b",)]),
    ('root ::= "<t>" r "</t>"\nr[max_tokens=2] ::= [a-c]*', [("<t>ab",), ("b",), ("c",)]),
    ('root ::= r "</t>"\nr[max_tokens=3] ::= s s\ns[max_tokens=1] ::= [a-c]*', [("a",), ("b",), ("c",)]),
    ('root ::= r "</t>"\nr[max_tokens=1] ::= [a-c]* | "1" [a-c]', [("1",), ("a",)]),
    ('root ::= (r "x")+ "</t>"\nr[max_tokens=1] ::= [a-c]*', [("a",), ("x",), ("b",), ("x",)]),
    ('root ::= r\nr[max_tokens=1] ::= [a-c]*', [("a",), ("</s>",)]),
    ('root[max_tokens=1] ::= [a-c]*', [("a",)]),
    ('root ::= r "</t>"\nr[max_tokens=1] ::= "a" r | "b"', [("a",), ("a",), ("b",), ("</t>",)]),
    ('root ::= r "</t>"\nr[max_tokens=2] ::= s "x"\ns[max_tokens=1] ::= [a-c]*', [("a",), ("x",)]),
    ('root ::= r "</t>"\nr[max_tokens=2, temperature=0.5] ::= "a" q | "b"\nq ::= "a" q | "b"',
     [("a",), ("a",), ("a",), ("b",)]),
    ('root ::= r "</t>"\nr[max_chars=2] ::= [a-c\u00e9]*', [("\u00e9",), ("a",)]),
    ('root ::= r "</t>"\nr[max_chars=2] ::= [a-c\u00e9]*', ["abc", "ab"]),
    ('root ::= r "</t>"\nr[max_chars=1, max_tokens=5] ::= [a-c]*', [("a",)]),
    ('root ::= r "</t>"\nr[max_chars=1] ::= [a-c]+ ("1" [a-c]*)', [("a",), ("1",)]),
    ('root ::= r "</t>"\nr[max_chars=2] ::= [a-c]+ ("1" [a-c]*)', [("a",), ("b1",)]),
    ('root ::= r "</t>"\nr[max_chars=3] ::= [a-c]+ ("1" [a-c]*)', [("abc",)]),
    ('root ::= r r "</t>"\nr[max_chars=1] ::= [a-c]*', [("a",), ("b",)]),
    ('root ::= r "</t>"\nr[max_chars=4] ::= s "x"\ns[max_chars=1] ::= [a-c]*', [("a",), ("x",)]),
    ('root ::= "<t>" r\nr[max_chars=1] ::= [a-c]*', [("<t>ab",), ("<t>a",)]),
    ('root ::= r "</t>"\nr[max_chars=3] ::= [a-c\u00e9]*', [("\u00e9a",), ("a",)]),
]


@pytest.mark.parametrize("grammar, steps", BUDGETS)
def test_budgets(oracle, grammar, steps):
    _same(oracle, grammar, steps)


def test_batch_fill_temperature_and_draft_tree(xgr):
    import torch

    info = xgr.TokenizerInfo(VOCAB)
    compiled = xgr.GrammarCompiler(info, max_threads=1).compile_grammar(
        'root ::= "answer:" value\nvalue[temperature=0.7] ::= [a-z]+')
    plain = xgr.GrammarCompiler(info, max_threads=1).compile_grammar('root ::= "answer:" [a-z]+')
    ms = [xgr.GrammarMatcher(compiled), xgr.GrammarMatcher(compiled, default_temperature=0.25),
          xgr.GrammarMatcher(plain)]
    for m in ms:
        m.accept_string("answer")
    temps = torch.full((5,), 9.0, dtype=torch.float32)
    xgr.BatchGrammarMatcher.batch_fill_temperature(ms, temps, [4, 0, 2])
    assert temps.tolist() == [0.25, 9.0, -1.0, 9.0, -1.0]
    for m in ms:
        m.accept_string(":")
    xgr.BatchGrammarMatcher.batch_fill_temperature(ms, temps)
    assert temps[:3].tolist() == pytest.approx([0.7, 0.7, -1.0])
    with pytest.raises(RuntimeError):
        xgr.BatchGrammarMatcher.batch_fill_temperature(ms, torch.zeros(5, dtype=torch.float64))
    # a draft tree: root(":") -> "ab" -> "c" ; the root -> "1" (rejected)
    m = xgr.GrammarMatcher(compiled)
    m.accept_string("answer:")
    tokens = torch.tensor([21, 4, 3, 11])
    bitmask = torch.zeros((4, 1), dtype=torch.int32)
    out = torch.zeros(4, dtype=torch.float32)
    assert m.traverse_draft_tree(torch.tensor([1, 2, -1, -1]), torch.tensor([-1, 3, -1, -1]), tokens, bitmask,
                                 temperatures=out)
    assert out.tolist() == pytest.approx([0.7, 0.7, 0.7, -1.0])


@pytest.mark.parametrize("grammar", ['root[temperature=-1] ::= "a"', 'root[temperature=abc] ::= "a"',
                                     'root[foo=1] ::= "a"', 'root[max_tokens=-1] ::= "a"',
                                     'root[max_tokens=1.5] ::= "a"', 'root[max_chars=-1] ::= "a"',
                                     'root[max_tokens=1, max_tokens=2] ::= "a"', 'root [max_tokens=1] ::= "a"'])
def test_invalid_rule_options_raise_runtime_error(xgr, grammar):
    with pytest.raises(RuntimeError):
        xgr.Grammar.from_ebnf(grammar)


@pytest.mark.parametrize("temperature", [-0.1, float("inf"), float("nan")])
def test_bad_temperatures_say_what_xgrammar_says(xgr, temperature):
    # engines (and xgrammar's own tests) match the wording "finite non-negative"
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo(["a"])).compile_grammar('root ::= "a"')
    with pytest.raises(RuntimeError, match="finite non-negative"):
        xgr.GrammarMatcher(compiled, default_temperature=temperature)
    with pytest.raises(RuntimeError, match="finite non-negative"):
        xgr.Grammar.from_ebnf(f'root[temperature={"-0.1" if temperature < 0 else "1e999"}] ::= "a"')


def test_budgets_refuse_key_guards():
    """Budgets come from EBNF only, which has no keyed objects: budgeted stacks hold no keys, and a
    budgeted automaton with key guards is refused by name."""
    from types import SimpleNamespace

    from leapgen.compiler.compiled_budget import BudgetedGrammar
    from leapgen.errors import GrammarError

    with pytest.raises(GrammarError, match="keyed JSON objects"):
        BudgetedGrammar(SimpleNamespace(guards=True), None, None)
