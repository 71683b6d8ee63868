"""Jump-forward strings of context-free grammars against xgrammar (issue #4).

The same GBNF text is compiled by both engines (leapgen's ``compile_grammar``;
xgrammar's ``Grammar.from_ebnf`` + ``GrammarCompiler.compile_grammar``), over
the same Llama-3 vocabulary. Both matchers are fed the same input, one
character (or one token, or one byte) at a time, and after every step
``find_jump_forward_string()`` must return the same text. Grammars: the
builtin JSON grammar's text, recursive grammars (arithmetic, trees, a tool
call, nested brackets), small edge cases, and the GBNF versions of outlines'
Lark grammars in ``tests/grammars`` on outlines' sample documents.

Semantics checked to agree (no difference was found on these walks):

- the forced text stops where more than one byte may follow, and before any
  point where the input may end (``"a" " "?`` forces nothing after ``a``);
- it never splits a UTF-8 character, and is empty while the matcher stands
  inside one (after a token or byte string that ends mid-character);
- forced text runs through rule calls and returns (``"(((" ... ")))"``).

Where the two engines differ, only what both mean the same is compared:

- Builtin JSON grammars: xgrammar's root is an object or an array with
  unbounded whitespace; leapgen's is any JSON value with whitespace runs of at
  most 64. They are compared on object/array documents with short whitespace
  runs; :func:`test_bounded_whitespace_forces_the_colon` pins the one visible
  consequence of the bound (after 64 spaces leapgen forces the ``:``).
- xgrammar 0.2.9 bug, avoided here with ``cache_enabled=False``: with its
  compile cache on, ``compile_grammar(Grammar.from_ebnf(text))`` recompiles the
  printed grammar, which writes ``"éb"`` as ``"\\xe9b"``, read back as U+0E9B:
  ``root ::= "éb"`` then rejects ``éb`` and forces ``"ປ"``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from leapgen import GrammarCompiler, GrammarMatcher
from leapgen.grammar.builtin import JSON_GBNF, JSON_VALUE_GBNF
from tests.cfg.small_grammars import ARITH_GBNF
from vocab_loaders import shared_missing

xgr = pytest.importorskip("xgrammar", reason="xgrammar is not installed (pip install xgrammar)")

FAMILY = "llama3"
GRAMMAR_FILES = Path(__file__).resolve().parents[1] / "grammars"
OUTLINES_SAMPLES = (Path(__file__).resolve().parents[3] / "shared" / "corpora" / "outlines" / "pr587" / "tests"
                    / "benchmark" / "cfg_samples")


# A recursive JSON-shaped tree with fixed keys: most of the text is forced.
TREE_GBNF = r"""
root ::= node
node ::= "{\"name\": " str ", \"children\": [" ( node ( ", " node )* )? "]}"
str  ::= "\"" [a-z0-9\u00e9]* "\""
"""

# A tool call: forced keys, a choice of names that share a prefix, nested arguments.
CALL_GBNF = r"""
root  ::= "<call>{\"name\": \"" fname "\", \"arguments\": " args "}</call>"
fname ::= "get_weather" | "get_time" | "set_alarm"
args  ::= "{" ( pair ( ", " pair )* )? "}"
pair  ::= "\"" [a-z_]+ "\": " val
val   ::= [0-9]+ | "\"" [^"\\]* "\"" | args | "[" ( val ( ", " val )* )? "]"
"""

# Right recursion, nested parentheses and a suffix that must close them all.
PARENS_GBNF = r"""
root  ::= "begin " block " end"
block ::= "(" block ")" | "[" block "]" | "x" rest
rest  ::= "" | "," rest
"""

CASES = {
    "json": (JSON_VALUE_GBNF, [
        '{"name": "Alice", "age": 30, "tags": ["a", "b", {"x": [1, 2.5e3, null, true]}], '
        '"nested": {"deep": [[[]]]}, "s": "h\\u00e9llo \\"q\\" \u00e9", "f": false}',
        '[\n  {"a": [], "b": {}},\n  -0.5E-7, "\u65e5\u672c", true, false, null\n]',
        '"just a string"', "-12.5e+3", "null",
    ]),
    "arith": (ARITH_GBNF, ["((1 + 2) * -(3 / 4)) - 5", "-(-(-(7.25)))", "((((((9))))))"]),
    "tree": (TREE_GBNF, [
        '{"name": "r", "children": [{"name": "a", "children": []}, '
        '{"name": "b\u00e9", "children": [{"name": "c", "children": []}]}]}',
    ]),
    "call": (CALL_GBNF, [
        '<call>{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2, {"hours": [3]}]}}</call>',
        '<call>{"name": "set_alarm", "arguments": {}}</call>',
    ]),
    "parens": (PARENS_GBNF, ["begin (([x,,,])) end", "begin x end"]),
}
PAIRS = [(name, i) for name, (_, docs) in CASES.items() for i in range(len(docs))]


@pytest.fixture(scope="module")
def engines():
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    tokenizer = load_hf_tokenizer(FAMILY)
    xgr_compiler = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tokenizer), cache_enabled=False)
    leap_compiler = GrammarCompiler(load_tokenizer_info(FAMILY))
    return tokenizer, xgr_compiler, leap_compiler


def matchers(engines, text: str):
    _, xc, lc = engines
    return (xgr.GrammarMatcher(xc.compile_grammar(xgr.Grammar.from_ebnf(text))),
            GrammarMatcher(lc.compile_grammar(text)))


def assert_same_forced(xm, lm, where: str) -> str:
    theirs, ours = xm.find_jump_forward_string(), lm.find_jump_forward_string()
    assert ours == theirs, f"{where}: leapgen forces {ours!r}, xgrammar {theirs!r}"
    return ours


@pytest.mark.parametrize("name,index", PAIRS)
def test_same_forced_text_character_by_character(engines, name, index):
    text, docs = CASES[name]
    doc = docs[index]
    xm, lm = matchers(engines, text)
    forced_somewhere = 0
    for i, ch in enumerate(doc):
        forced = assert_same_forced(xm, lm, f"after {doc[:i]!r}")
        if forced:
            forced_somewhere += 1
            assert doc[i:].startswith(forced)  # the document goes the forced way
        assert xm.accept_string(ch) and lm.accept_string(ch), f"{ch!r} after {doc[:i]!r}"
    assert_same_forced(xm, lm, "at the end")
    assert xm.is_completed() and lm.is_completed()
    if name in ("tree", "call"):
        assert forced_somewhere > 10  # the comparison saw real forced text, not only ""


@pytest.mark.parametrize("name,index", PAIRS)
def test_same_forced_text_token_by_token(engines, name, index):
    """Tokens of the real tokenizer: some end inside a multi-byte character."""
    tokenizer = engines[0]
    text, docs = CASES[name]
    ids = tokenizer.encode(docs[index], add_special_tokens=False)
    xm, lm = matchers(engines, text)
    for i, t in enumerate(ids):
        assert_same_forced(xm, lm, f"after tokens {ids[:i]}")
        assert xm.accept_token(t) and lm.accept_token(t)
    assert_same_forced(xm, lm, "at the end")


@pytest.mark.parametrize("name,index", PAIRS)
def test_same_forced_text_byte_by_byte(engines, name, index):
    """Every byte boundary, inside multi-byte characters included (forced text is "" there)."""
    text, docs = CASES[name]
    data = docs[index].encode()
    xm, lm = matchers(engines, text)
    for i in range(len(data)):
        forced = assert_same_forced(xm, lm, f"after {data[:i]!r}")
        if i and 0x80 <= data[i] < 0xC0:
            assert forced == ""  # standing inside a character
        assert xm.accept_string(data[i:i + 1]) and lm.accept_string(data[i:i + 1])


@pytest.mark.parametrize("text,prefix,forced", [
    ('root ::= "ab" | "ac"', "", "a"),
    ('root ::= "x"{3} "y"', "x", "xxy"),
    ('root ::= "a" " "?', "a", ""),
    ('root ::= "\u00e9" | "\u00e8"', "", ""),  # only the shared first byte is forced: no whole character
    ('root ::= "(" root ")" | ""', "((()", "))"),
    ('root ::= "a" [\\u00e9] "b"', "", "a\u00e9b"),
    ('root ::= "pre" ("fix" | "fox")', "", "pref"),
    ('root ::= "\U0001F600x"', "", "\U0001F600x"),
    ('root ::= a "z"\na ::= "q" a | "w"', "qqw", "z"),
])
def test_small_grammars(engines, text, prefix, forced):
    xm, lm = matchers(engines, text)
    assert xm.accept_string(prefix) and lm.accept_string(prefix)
    assert lm.find_jump_forward_string() == forced
    assert xm.find_jump_forward_string() == forced


def test_builtin_json_grammars_agree_where_their_semantics_agree(engines):
    """xgrammar's builtin JSON grammar against leapgen's: object/array roots, short whitespace."""
    tokenizer, xc, lc = engines
    xg, lg = xc.compile_builtin_json_grammar(), lc.compile_builtin_json_grammar()
    for doc in CASES["json"][1][:2] + ["{}", "[]", '{ "k" : { } , "l" : [ null ] }']:
        xm, lm = xgr.GrammarMatcher(xg), GrammarMatcher(lg)
        for i, ch in enumerate(doc):
            assert_same_forced(xm, lm, f"after {doc[:i]!r}")
            assert xm.accept_string(ch) and lm.accept_string(ch)
        assert_same_forced(xm, lm, "at the end")
        xm, lm = xgr.GrammarMatcher(xg), GrammarMatcher(lg)
        ids = tokenizer.encode(doc, add_special_tokens=False)
        for i, t in enumerate(ids):
            assert_same_forced(xm, lm, f"after tokens {ids[:i]}")
            assert xm.accept_token(t) and lm.accept_token(t)


def test_bounded_whitespace_forces_the_colon(engines):
    """The documented difference: leapgen's builtin JSON bounds whitespace runs (64), so after
    a key and 64 spaces only ':' may follow; xgrammar's builtin (unbounded) forces nothing.
    Compiled from the same text, xgrammar agrees with leapgen: the grammar differs, not the engine."""
    _, xc, lc = engines
    prefix = '{"a"' + " " * 64
    lm = GrammarMatcher(lc.compile_builtin_json_grammar())
    assert lm.accept_string(prefix)
    assert lm.find_jump_forward_string() == ":"
    assert not lm.fork().accept_string(" ")
    xm = xgr.GrammarMatcher(xc.compile_builtin_json_grammar())
    assert xm.accept_string(prefix)
    assert xm.find_jump_forward_string() == ""
    xm_same_text, _ = matchers(engines, JSON_GBNF)
    assert xm_same_text.accept_string(prefix)
    assert xm_same_text.find_jump_forward_string() == ":"


@pytest.mark.parametrize("name", ["arithmetic", "json", "csv", "sql_select", "lark"])
def test_outlines_gbnf_versions_on_their_samples(engines, name):
    """tests/grammars/*.gbnf (outlines' Lark grammars as GBNF): both engines accept the samples
    and force the same text at every character (the first 1,500 characters of each)."""
    samples = sorted((OUTLINES_SAMPLES / name).glob("*.test"))
    if not samples:
        pytest.skip(shared_missing(OUTLINES_SAMPLES))
    text = (GRAMMAR_FILES / f"{name}.gbnf").read_text("utf-8")
    _, xc, lc = engines
    xg, lg = xc.compile_grammar(xgr.Grammar.from_ebnf(text)), lc.compile_grammar(text)
    for path in samples:
        doc = path.read_text("utf-8")
        if name == "arithmetic":
            doc = doc.rstrip("\n")  # as the corpus README says
        xm, lm = xgr.GrammarMatcher(xg), GrammarMatcher(lg)
        for i, ch in enumerate(doc[:1500]):
            assert_same_forced(xm, lm, f"{path.name} after {doc[max(0, i - 30):i]!r}")
            assert xm.accept_string(ch) and lm.accept_string(ch), f"{path.name} at {i}"
        if len(doc) <= 1500:
            assert xm.is_completed() and lm.is_completed(), path.name
