"""The GBNF front-end against public grammar corpora (issue #4).

- xgrammar's EBNF test vectors (``corpora/xgrammar/test_vectors.jsonl``, the
  records with ``grammar_kind == "ebnf"``): leapgen must give the recorded
  accept/reject verdict on at least 95%; the only grammar it refuses is
  left-recursive (listed in ``LEFT_RECURSIVE``), and it must refuse it with a
  clear error.
- The nine GBNF grammars llguidance copied from llama.cpp
  (``corpora/llguidance/sample_parser/data/from-llama.cpp``): they ship no
  sample documents, so each gets strings written by hand from the grammar text
  (and json.gbnf also takes llguidance's ``blog.sample.json``).
- outlines' Lark grammars, rewritten here as GBNF (``tests/grammars/*.gbnf``),
  must accept outlines' sample documents (``corpora/outlines/pr587/tests/
  benchmark/cfg_samples``) and reject hand-written near misses; the Lark
  grammar of Lark must accept every ``.lark`` file of the corpora.
- Syntax errors carry ``line L:C``.

Acceptance is checked with ``accept_string`` + ``is_completed`` over a small
byte vocabulary (the verdicts do not depend on the tokenizer).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leapgen import GrammarCompiler, GrammarError, GrammarMatcher, TokenizerInfo
from vocab_loaders import shared_missing

SHARED = Path(__file__).resolve().parents[3] / "shared"  # ../shared beside the repository root
CORPORA = SHARED / "corpora"
GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"

needs_shared = pytest.mark.skipif(not CORPORA.is_dir(),
                                  reason=shared_missing(CORPORA))

# The xgrammar EBNF grammars leapgen refuses on purpose (left recursion): first line -> reason.
LEFT_RECURSIVE = {
    "root ::= rule1 [0-9]?": "rule 'rule1' is left-recursive",
}


@pytest.fixture(scope="module")
def compiler() -> GrammarCompiler:
    vocab = [bytes((b,)) for b in range(256)] + [b"</s>"]
    return GrammarCompiler(TokenizerInfo(vocab, stop_token_ids=[256]))


def accepts(compiled, text: str | bytes) -> bool:
    matcher = GrammarMatcher(compiled)
    return matcher.accept_string(text) and matcher.is_completed()


# -- xgrammar EBNF vectors ------------------------------------------------------------------------


def xgrammar_ebnf_records() -> list[dict]:
    path = CORPORA / "xgrammar" / "test_vectors.jsonl"
    if not path.is_file():
        return []
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [r for r in records if r["grammar_kind"] == "ebnf"]


def refusal_reason(grammar: str) -> str | None:
    return LEFT_RECURSIVE.get(grammar.strip().splitlines()[0].strip())


@needs_shared
def test_xgrammar_ebnf_vectors(compiler):
    records = xgrammar_ebnf_records()
    assert len(records) >= 200
    agree, refused, wrong = 0, [], []
    for r in records:
        root = r.get("root_rule", "root")
        reason = refusal_reason(r["grammar"])
        if reason is not None:
            with pytest.raises(GrammarError, match=reason):
                compiler.compile_grammar(r["grammar"], root_rule_name=root)
            refused.append(r["test"])
            continue
        compiled = compiler.compile_grammar(r["grammar"], root_rule_name=root)
        if accepts(compiled, r["instance"]) == r["accepted"]:
            agree += 1
        else:
            wrong.append((r["test"], r["instance"][:60], r["accepted"]))
    assert not wrong, f"verdicts differ from xgrammar's: {wrong}"
    assert agree / len(records) >= 0.95
    assert agree == len(records) - len(refused)
    assert refused == ["test_predict_complete"]  # the one left-recursive grammar of the corpus (1 record)


def test_left_recursion_is_refused_with_a_clear_error(compiler):
    with pytest.raises(GrammarError, match=r"rule 'expr' is left-recursive .*rewrite it with repetition"):
        compiler.compile_grammar('root ::= expr\nexpr ::= expr "+" term | term\nterm ::= [0-9]+')
    # indirect, through a nullable prefix
    with pytest.raises(GrammarError, match="left-recursive"):
        compiler.compile_grammar('root ::= a\na ::= b "x" | "y"\nb ::= [ ]* a')
    # the same language with repetition compiles
    compiled = compiler.compile_grammar('root ::= expr\nexpr ::= term ("+" term)*\nterm ::= [0-9]+')
    assert accepts(compiled, "1+22+333") and not accepts(compiled, "1+")


# -- llama.cpp GBNF grammars (from llguidance's corpus) ------------------------------------------

LLAMA_CPP = CORPORA / "llguidance" / "sample_parser" / "data" / "from-llama.cpp"

# Hand-written from each grammar's text: (accepted, rejected).
LLAMA_CPP_CASES = {
    "arithmetic": (["1+2= 3\n", "(a+b)*c = x\n", "x1=2\ny = (3 +4)\n"],
                   ["1+2=3", "1+=3\n", "(1=2\n", "y = (3 + 4)\n"]),  # a term never starts with a space
    "c": (["int main(){return 0;}", "float f(int x){x = x*2;while(x<10){x = x+1;}return x;}",
           "int f(){// c\n}", "char g(){/* a * b */}"],
          ["int main(){return 0}", "intmain(){}", "int main(){x=1;}"]),  # ws ::= [ \t\n]+ is required
    "chess": (["1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. c4 dxc4\n3. O-O-O Qxd8#\n"],
              ["1. e4 e5\n", "1. e9 e5\n2. Nf3 Nc6\n", "1.e4 e5\n2. Nf3 Nc6\n"]),
    "english": (["Hello, world!", "It's 5 o'clock.\nTime: now"], ["Hello  world", " Hello", "h\u00e9llo"]),
    "japanese": (["\u3053\u3093\u306b\u3061\u306f \u4e16\u754c",
                  "\u30ab\u30bf\u30ab\u30ca\u3001\u3072\u3089\u304c\u306a\u3002"],
                 ["hello", "\u3053\u3093\u306b\u3061\u306f  \u4e16\u754c", "\u3053\u3093\u306b\u3061\u306f "]),
    "json": (['{"a": 1}', '{"name": "x", "list": [1, 2.5, -3e4, true, null], "o": {}}'],
             ["[1]", '{"a": 01}', '{"a": 1,}', '{"a":\t1}']),
    "json_arr": (['[\n{"a": 1},\n"x"]', "[\n]"], ["[1]", "[\n1]\n", "[\n1,2]"]),
    "list": (["- apples\n- pears\n"], ["- apples", "* apples\n", "- \n"]),
    "vllm-sql": (["SELECTcol_1fromtable_2wherecol_2=1"],  # no whitespace anywhere in that grammar
                 ["SELECT col_1 from table_1 where col_1=1", "SELECTcol_3fromtable_1wherecol_1=1"]),
}


@needs_shared
def test_llama_cpp_grammars_are_all_covered():
    assert {p.stem for p in LLAMA_CPP.glob("*.gbnf")} == set(LLAMA_CPP_CASES)


@needs_shared
@pytest.mark.parametrize("name", sorted(LLAMA_CPP_CASES))
def test_llama_cpp_grammar(compiler, name):
    compiled = compiler.compile_grammar((LLAMA_CPP / f"{name}.gbnf").read_text("utf-8"))
    good, bad = LLAMA_CPP_CASES[name]
    for text in good:
        assert accepts(compiled, text), text
    for text in bad:
        assert not accepts(compiled, text), text


@needs_shared
def test_llama_cpp_json_accepts_llguidance_sample(compiler):
    compiled = compiler.compile_grammar((LLAMA_CPP / "json.gbnf").read_text("utf-8"))
    sample = (CORPORA / "llguidance" / "sample_parser" / "data" / "blog.sample.json").read_text("utf-8")
    assert accepts(compiled, sample)
    assert not accepts(compiled, sample.replace('"age": 30', '"age": 030'))


# -- outlines' Lark grammars as GBNF --------------------------------------------------------------

OUTLINES_SAMPLES = CORPORA / "outlines" / "pr587" / "tests" / "benchmark" / "cfg_samples"

# Hand-written near misses each GBNF version must reject.
OUTLINES_REJECT = {
    "arithmetic": ["1 +", "(1 * 2", "1 2", "1 ** 2", "()", "1 + (2))"],
    "json": ['{"a": 1,}', "[1, 2", '{"a" 1}', "tru", '{"a": [}', '"unterminated'],
    "csv": ["ID,Name\n1,Andrew\n", "# ID,Name", "# ID,Name\n\n"],  # header must start with '#'; a row follows
    "sql_select": ["SELECT * FROM", "SELECT FROM foo", "SELECT * FROM foo WHERE a =",
                   "SELECT * FROM foo LIMIT 0", "SELECT a b c FROM t", "SELECT * FROM (SELECT * FROM t",
                   "SELECT * FROM t WHERE a = 'x", "SELECT COUNT(* FROM t"],
    "lark": ["start: (a", 'start: "unterminated', "a b: c", "%include x", "start: a -> B"],
}
OUTLINES_EXTRA_ACCEPT = {
    "arithmetic": ["-(-1.5e3)\t/ .5", "((((1))))"],
    "json": [' {"a": [1, -2.5E+3, "x\\"y", {}], "b": null} ', "[]"],
    "csv": ["# a b\n1 2.5 x;y\n-3.0e2,Word\r\n"],
    "sql_select": ["select a from t", "SELECT DISTINCT a AS b FROM t WHERE a IN (1, 2) -- done",
                   "SELECT CAST(a AS INTEGER) FROM t UNION SELECT b FROM u"],
    "lark": ["start: a\n     | b\n"],
}


def outline_samples(name: str) -> list[Path]:
    return sorted((OUTLINES_SAMPLES / name).glob("*.test"))


@pytest.fixture(scope="module")
def outlines_grammars(compiler):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = compiler.compile_grammar((GRAMMARS / f"{name}.gbnf").read_text("utf-8"))
        return cache[name]

    return get


@needs_shared
@pytest.mark.parametrize("name", ["arithmetic", "json", "csv", "sql_select", "lark"])
def test_outlines_grammar_accepts_its_samples(outlines_grammars, name):
    compiled = outlines_grammars(name)
    samples = outline_samples(name)
    assert samples, f"no samples for {name}"
    for path in samples:
        text = path.read_text("utf-8")
        if name == "arithmetic":
            text = text.rstrip("\n")  # the corpus README: Lark parses them only without the final newline
        assert accepts(compiled, text), path.name
    for text in OUTLINES_EXTRA_ACCEPT[name]:
        assert accepts(compiled, text), text
    for text in OUTLINES_REJECT[name]:
        assert not accepts(compiled, text), text


@needs_shared
def test_lark_grammar_accepts_every_lark_file_of_the_corpora(outlines_grammars):
    compiled = outlines_grammars("lark")
    files = sorted(CORPORA.rglob("*.lark"))
    assert len(files) >= 10
    for path in files:
        assert accepts(compiled, path.read_text("utf-8")), path


def test_grammar_files_compile_without_shared(outlines_grammars):
    """The GBNF files of tests/grammars compile, and the recursive ones are context-free."""
    expected_regular = {"csv": True, "arithmetic": False, "json": False, "sql_select": False, "lark": False}
    assert {p.stem for p in GRAMMARS.glob("*.gbnf")} == set(expected_regular)
    for name, regular in expected_regular.items():
        assert outlines_grammars(name).is_regular == regular, name


# -- syntax errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("text,where,message", [
    ('root ::= ( "a" | "b"\n', "line 1:10", "expected '\\)' to close the group"),  # where it opened
    ('root ::= "a"\nx ::= "b" )', "line 2:11", "unbalanced '\\)'"),
    ('root ::= "a" sub\n', "line 1:14", "rule 'sub' is not defined"),
    ('root ::= "a\\q"', "line 1:12", "unknown escape '\\\\q'"),
    ('root ::= "\\x4"', "line 1:11", "expected 2 hex digits"),
    ('root ::= "\\uD800"', "line 1:11", "not a Unicode scalar value"),
    ('root "a"', "line 1:6", "expected '::=' after rule name 'root'"),
    ('root ::= "a"\nnext = "b"', "line 2:6", "expected a literal, character class, rule name or '\\(', found '='"),
    ('root ::= [a-', "line 1:10", "unterminated character class"),
    ('root ::= [z-a]', "line 1:10", "character range out of order"),
    ('root ::= "abc\n"', "line 1:10", "unterminated string literal"),
    ('root ::= "a"{3,1}', "line 1:13", "bounds out of order"),
    ('root ::= "a"\nroot ::= "b"', "line 2:1", "defined twice"),
    ('root ::= "a"\n  ::= "b"', "line 2:3", "found ':'"),
])
def test_syntax_errors_give_line_and_column(compiler, text, where, message):
    with pytest.raises(GrammarError, match=message) as info:
        compiler.compile_grammar(text)
    assert info.value.where == where
    assert f"(at {where})" in str(info.value)


def test_group_error_points_at_the_opening_paren(compiler):
    with pytest.raises(GrammarError) as info:
        compiler.compile_grammar('root ::= "x"\n  rest ::= ( "a"\n')
    assert info.value.where == "line 2:12"


def test_missing_root_and_non_text(compiler):
    with pytest.raises(GrammarError, match="no root rule 'start'"):
        compiler.compile_grammar('root ::= "a"', root_rule_name="start")
    with pytest.raises(GrammarError, match="must be a str"):
        compiler.compile_grammar(b'root ::= "a"')  # type: ignore[arg-type]


def test_spaces_before_quantifiers(compiler):
    """llama.cpp and xgrammar allow spaces between an item and its quantifier."""
    compiled = compiler.compile_grammar('root ::= "a" * "b" + ( "c" ) ? "d" {2}')
    assert accepts(compiled, "aaabbcdd") and accepts(compiled, "bdd") and not accepts(compiled, "bd")
