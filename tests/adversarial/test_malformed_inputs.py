"""Malformed inputs to the compiler front-ends, the matcher and the CLI: each
is a clear leapgen error (or TypeError/ValueError/IndexError for API misuse)
naming what is wrong and where, never a UnicodeEncodeError, RecursionError or
a silently wrong result."""

from __future__ import annotations

import json

import numpy as np
import pytest

import leapgen
from leapgen.errors import GrammarError, RegexError, SchemaError


@pytest.fixture(scope="module")
def compiler():
    info = leapgen.TokenizerInfo([bytes([i]) for i in range(256)] + [b""], "raw", stop_token_ids=[256])
    return leapgen.GrammarCompiler(info)


# -- lone surrogates: a Python str can hold one (JSON text spells it "\ud800"), UTF-8 cannot ------------

@pytest.mark.parametrize("pattern, offset", [("\ud800", 0), ("ab\udfff", 2), ("[a\udc00]", 2)])
def test_regex_with_a_lone_surrogate_is_a_regex_error_at_its_offset(compiler, pattern, offset):
    with pytest.raises(RegexError) as e:
        compiler.compile_regex(pattern)
    assert e.value.offset == offset and "surrogate" in str(e.value)


@pytest.mark.parametrize("schema, pointer", [
    ({"const": "\udfff"}, "/const"),
    ({"enum": ["ok", "a\ud800"]}, "/enum/1"),
    ({"type": "string", "pattern": "\ud800"}, "/pattern"),
    ({"type": "object", "properties": {"x": {"const": "\ud800"}}}, "/properties/x/const"),
    ({"type": "object", "properties": {"\ud800": {"type": "integer"}}}, "/properties/\\ud800"),
    ('{"const": "\\ud800"}', "/const"),  # JSON text with an escaped lone surrogate
], ids=["const", "enum", "pattern", "nested", "property-name", "json-text"])
def test_schema_with_a_lone_surrogate_is_a_schema_error_at_its_pointer(compiler, schema, pointer):
    with pytest.raises(SchemaError) as e:
        compiler.compile_json_schema(schema)
    assert e.value.pointer == pointer and "surrogate" in str(e.value)


def test_schema_surrogate_check_runs_in_the_front_end_too():
    """GrammarManager.check (the CLI's fail-fast path) calls the front-end directly."""
    from leapgen.grammar.json import json_schema_to_ir

    with pytest.raises(SchemaError) as e:
        json_schema_to_ir({"const": "\ud800"})
    assert e.value.pointer == "/const"


def test_ebnf_with_a_lone_surrogate_is_a_grammar_error_at_line_and_column(compiler):
    with pytest.raises(GrammarError) as e:
        compiler.compile_grammar('root ::= "a"\nb ::= "\ud800"')
    assert e.value.where == "line 2:8"


def test_ebnf_with_non_utf8_bytes_decoded_by_surrogateescape_is_located(compiler):
    text = b'root ::= "ok"\nx ::= "\xff"'.decode("utf-8", "surrogateescape")
    with pytest.raises(GrammarError) as e:
        compiler.compile_grammar(text)
    assert e.value.where == "line 2:8" and "U+DCFF" in str(e.value)


# -- JSON Schema keyword combinations -----------------------------------------------------------------

def test_min_properties_above_max_properties_admits_nothing(compiler):
    with pytest.raises(SchemaError, match="admits no JSON value"):
        compiler.compile_json_schema({"type": "object", "minProperties": 3, "maxProperties": 1})


def test_min_properties_above_max_properties_only_empties_its_branch(compiler):
    schema = {"anyOf": [{"type": "object", "minProperties": 3, "maxProperties": 1}, {"type": "integer"}]}
    m = leapgen.GrammarMatcher(compiler.compile_json_schema(schema, any_whitespace=False))
    assert not m.fork().accept_string("{")
    assert m.accept_string("42") and m.is_completed()


@pytest.mark.parametrize("schema, pointer", [
    ({"if": 5}, "/if"),  # was silently ignored
    ({"if": {"type": "integer"}, "then": 5}, "/then"),  # was /allOf/0/anyOf/0/allOf/1, a pointer into a rewrite
    ({"if": {"type": "integer"}, "else": "x"}, "/else"),
    ({"type": "object", "propertyNames": 5}, "/propertyNames"),  # was /propertyNames/allOf/1
    ({"type": "object", "dependentSchemas": {"a": 5}}, "/dependentSchemas/a"),  # was /anyOf/1/allOf/1
], ids=["if", "then", "else", "propertyNames", "dependentSchemas"])
def test_subschema_that_is_not_a_schema_is_reported_at_the_users_pointer(compiler, schema, pointer):
    with pytest.raises(SchemaError) as e:
        compiler.compile_json_schema(schema)
    assert e.value.pointer == pointer


@pytest.mark.parametrize("text, where", [
    ('root ::= "x" a\na ::= a "b" | "c"', "line 2:1"),
    ('root ::= "x" b\n  b ::= b "y" | "z"', "line 2:3"),
    ('root ::= ("a" r)*\nr ::= r "b" | "c"', "line 2:1"),
    ('root ::= "x"\nc ::= "y"\nroot2 ::= root2', None),  # an unused rule is dropped, not reported
    ('root ::= "a" r\nr ::= "b" r', "line 1:1"),  # reported for root, where the inlined r ends up
], ids=["left-recursive", "indented", "under-a-star", "unused", "never-finishes"])
def test_rule_errors_of_later_passes_name_the_rules_line(compiler, text, where):
    if where is None:
        compiler.compile_grammar(text)
        return
    with pytest.raises(GrammarError) as e:
        compiler.compile_grammar(text)
    assert e.value.where == where, str(e.value)
    with pytest.raises(GrammarError) as again:  # the remembered failure keeps its place
        compiler.compile_grammar(text)
    assert again.value.where == where


# -- matcher API misuse -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def grammar(compiler):
    return compiler.compile_regex("ab|abc")


def test_fill_refuses_a_bitmask_of_the_wrong_dtype_or_shape(grammar):
    m = leapgen.GrammarMatcher(grammar)
    words = (grammar.tokenizer_info.vocab_size + 31) // 32
    with pytest.raises(TypeError, match="int32"):
        m.fill_next_token_bitmask(np.zeros((1, words), np.int64))
    with pytest.raises(TypeError, match="int32"):
        m.fill_next_token_bitmask([[0] * words])
    with pytest.raises(ValueError, match=f"shape \\(batch, {words}\\)"):
        m.fill_next_token_bitmask(np.zeros((1, words - 1), np.int32))
    with pytest.raises(ValueError, match="shape"):
        m.fill_next_token_bitmask(np.zeros(words, np.int32))
    with pytest.raises(IndexError):
        m.fill_next_token_bitmask(np.zeros((2, words), np.int32), 2)
    with pytest.raises(IndexError):  # not Python's "last row"
        m.fill_next_token_bitmask(np.zeros((2, words), np.int32), -1)
    ok = np.zeros((2, words), np.int32)
    m.fill_next_token_bitmask(ok, 1)
    assert ok[0].sum() == 0 and ok[1, ord("a") >> 5] == 1 << (ord("a") & 31)


def test_fill_refuses_a_torch_bitmask_of_the_wrong_dtype(grammar):
    torch = pytest.importorskip("torch")
    words = (grammar.tokenizer_info.vocab_size + 31) // 32
    with pytest.raises(TypeError, match="int32"):
        leapgen.GrammarMatcher(grammar).fill_next_token_bitmask(torch.zeros((1, words), dtype=torch.int64))


def test_accept_refuses_values_that_are_not_tokens_or_strings(grammar):
    m = leapgen.GrammarMatcher(grammar)
    for bad in (1.0, True, "a", None):
        with pytest.raises(TypeError):
            m.accept_token(bad)
    for bad in (5, None, ["a"]):
        with pytest.raises(TypeError):
            m.accept_string(bad)  # bytes(5) would have been five NUL bytes
    with pytest.raises(TypeError):
        m.rollback(1.5)
    assert m.num_accepted_tokens == 0
    assert m.accept_token(np.int64(ord("a"))) and m.accept_string("b") and m.is_completed()


def test_accept_string_with_a_lone_surrogate_is_rejected_unchanged(grammar):
    m = leapgen.GrammarMatcher(grammar)
    assert not m.accept_string("a\ud800")
    assert m.num_accepted_tokens == 0 and m.accept_string("abc")


def test_matcher_needs_a_compiled_grammar():
    with pytest.raises(TypeError, match="CompiledGrammar"):
        leapgen.GrammarMatcher(None)


# -- CLI: fails before loading the model ------------------------------------------------------------------

@pytest.mark.parametrize("content, needle", [
    ("[" * 100000 + "]" * 100000, "nests too deeply"),
    ('{"const": "\\ud800"}', "surrogate"),
])
def test_cli_bad_schema_file_is_a_usage_error(tmp_path, capsys, content, needle):
    from leapgen.cli import EXIT_USAGE, main

    path = tmp_path / "schema.json"
    path.write_text(content, encoding="utf-8")
    assert main(["generate", "--json-schema", str(path), "x"]) == EXIT_USAGE
    assert needle in capsys.readouterr().err


def test_cli_schema_file_with_a_bom_is_read(tmp_path, capsys):
    from leapgen.cli import EXIT_USAGE, main

    path = tmp_path / "schema.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"type": "integer", "minimum": "x"}).encode())
    assert main(["generate", "--json-schema", str(path), "x"]) == EXIT_USAGE
    assert "/minimum" in capsys.readouterr().err  # parsed past the BOM, refused by the schema check


# -- long inputs: lowering must stay linear ------------------------------------------------------------

def test_long_regex_of_classes_compiles_in_linear_time(compiler):
    import time

    # Each term was prepended with its own ir.seq, re-flattening the whole tail: [ab] x 8000 took 4.8 s,
    # x 50000 more than 3 minutes (past any max_compile_seconds: the limit is only checked later). Now ~0.4 s.
    t0 = time.perf_counter()
    g = compiler.compile_regex("[ab]" * 20000)
    assert time.perf_counter() - t0 < 10
    m = leapgen.GrammarMatcher(g)
    assert m.accept_string("ab" * 10000) and m.is_completed()


def test_seq_joins_a_long_literal_run_once():
    from leapgen.grammar import ir

    node = ir.seq(*[ir.Bytes(b"a")] * 50000, ir.Bytes(b""), ir.ANY_CHAR, ir.Bytes(b"b"), ir.Bytes(b"c"))
    assert node == ir.Seq((ir.Bytes(b"a" * 50000), ir.ANY_CHAR, ir.Bytes(b"bc")))
    assert ir.seq(ir.Bytes(b""), ir.Bytes(b"")) == ir.EMPTY
    assert ir.seq(ir.Bytes(b"x"), ir.NOTHING) == ir.NOTHING


@pytest.mark.parametrize("argv, needle", [(["--port", "99999"], "--port"), (["--threads", "0"], "--threads")])
def test_cli_serve_refuses_bad_numbers_before_loading_the_model(capsys, argv, needle):
    from leapgen.cli import EXIT_USAGE, main

    # Both were tracebacks after loading the model (OverflowError from bind(), ValueError from configure_threads).
    assert main(["serve", *argv]) == EXIT_USAGE
    assert needle in capsys.readouterr().err
