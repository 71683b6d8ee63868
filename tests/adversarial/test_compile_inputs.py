"""Adversarial inputs to GrammarCompiler: every bad grammar is a GrammarError
(never a RecursionError, ValueError from int(), TypeError from json...)."""

from __future__ import annotations

import json

import pytest

import leapgen
from leapgen.errors import GrammarError, RegexError, SchemaError


@pytest.fixture(scope="module")
def compiler():
    info = leapgen.TokenizerInfo([bytes([i]) for i in range(256)] + [b""], "raw", stop_token_ids=[256])
    return leapgen.GrammarCompiler(info)


def _nested_object(n):
    s = {"type": "string"}
    for _ in range(n):
        s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
    return s


@pytest.mark.parametrize("pattern", ["(" * 5000 + ")" * 5000, "(?:" * 5000 + "a" + ")" * 5000,
                                     "(?:" * 200 + "a|b" + ")*" * 200, "(?=" * 3000 + "a" + ")" * 3000],
                         ids=["groups", "noncapturing", "starred", "lookaheads"])
def test_deeply_nested_regex_is_a_regex_error(compiler, pattern):
    with pytest.raises(RegexError) as e:
        compiler.compile_regex(pattern)
    assert e.value.where.startswith("offset ")


def test_moderately_nested_regex_still_compiles(compiler):
    g = compiler.compile_regex("(?:" * 60 + "a|b" + ")*" * 60)
    m = leapgen.GrammarMatcher(g)
    assert m.accept_string("abba") and m.is_completed()


@pytest.mark.parametrize("depth", [300, 500])
def test_deeply_nested_gbnf_group_is_a_grammar_error(compiler, depth):
    with pytest.raises(GrammarError) as e:
        compiler.compile_grammar("root ::= " + "( " * depth + '"a"' + " )*" * depth)
    assert e.value.where.startswith("line 1:")


def test_long_gbnf_rule_chain_is_a_grammar_error_not_recursion(compiler):
    text = "root ::= r0\n" + "".join(f'r{i} ::= "a" r{i + 1}\n' for i in range(3000)) + 'r3000 ::= "z"'
    with pytest.raises(GrammarError):
        compiler.compile_grammar(text)


@pytest.mark.parametrize("text", ['root ::= "a"{²}', 'root ::= "a"{1,²}', 'root ::= "a"{٣}'])
def test_gbnf_non_ascii_digits_in_repetition_are_a_grammar_error(compiler, text):
    with pytest.raises(GrammarError) as e:
        compiler.compile_grammar(text)
    assert e.value.where.startswith("line 1:")


@pytest.mark.parametrize("schema", [_nested_object(300), _nested_object(2000),
                                    {"type": "string", "pattern": "(" * 300 + ")" * 300}],
                         ids=["objects300", "objects2000", "pattern300"])
def test_deeply_nested_schema_is_a_grammar_error(compiler, schema):
    with pytest.raises(GrammarError):
        compiler.compile_json_schema(schema)


@pytest.mark.parametrize("text", ['{"a":' * 100000, "[" * 100000], ids=["objects", "arrays"])
def test_deeply_nested_schema_json_text_is_a_schema_error(compiler, text):
    with pytest.raises(SchemaError):
        compiler.compile_json_schema(text)


@pytest.mark.parametrize("schema", [{"enum": {1, 2}}, {"const": b"x"}, {"type": "object", "default": object()}],
                         ids=["set", "bytes", "object"])
def test_schema_that_is_not_json_data_is_a_schema_error(compiler, schema):
    with pytest.raises(SchemaError):
        compiler.compile_json_schema(schema)


def test_deep_failure_is_remembered_and_compiler_still_works(compiler):
    messages = []
    for _ in range(2):
        # A SchemaError at "/" from the front-end's depth guard (HEAD 0c3bd45 raises that, not CompileLimitError).
        with pytest.raises(GrammarError) as e:
            compiler.compile_json_schema(_nested_object(300))
        messages.append(str(e.value))
    assert messages[0] == messages[1] and "deep" in messages[0]
    g = compiler.compile_json_schema(_nested_object(3), any_whitespace=False)
    m = leapgen.GrammarMatcher(g)
    assert m.accept_string(json.dumps({"a": {"a": {"a": "x"}}}, separators=(",", ":"))) and m.is_completed()
