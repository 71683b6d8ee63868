"""leapgen's error classes: a bad grammar, regex or schema is a ``RuntimeError``
(what xgrammar raises and what the xgrammar backends of vLLM and SGLang catch)
and still a ``ValueError`` (leapgen's own contract), in the native API."""

from __future__ import annotations

import pytest

from leapgen import errors


@pytest.mark.parametrize("cls", [errors.GrammarError, errors.RegexError, errors.SchemaError, errors.CompileLimitError,
                                 errors.TokenizerError, errors.DeserializeFormatError, errors.DeserializeVersionError,
                                 errors.InvalidJSONError])
def test_error_classes_are_runtime_and_value_errors(cls):
    assert issubclass(cls, errors.LeapgenError) and issubclass(cls, ValueError) and issubclass(cls, RuntimeError)


@pytest.mark.parametrize("compile_call", [
    lambda c: c.compile_regex("(ab"),
    lambda c: c.compile_json_schema({"type": "foo"}),
    lambda c: c.compile_grammar('root ::= "a'),
    lambda c: c.compile_grammar('root ::= root "a" | "b"'),  # left recursion, found at compile time
])
def test_native_compiles_raise_what_engines_catch(toy_compiler, compile_call):
    with pytest.raises(RuntimeError) as caught:
        compile_call(toy_compiler)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, errors.GrammarError)


def test_where_survives_the_new_bases():
    e = errors.RegexError("unbalanced", pattern="(a", offset=2)
    assert e.where == "offset 2" and "offset 2" in str(e)
