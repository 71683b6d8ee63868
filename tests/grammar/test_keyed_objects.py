"""Keys already written as matcher state: no repeated keys where the key set is finite (issue 15, fault 3),
and ``any_order`` objects.

The fault: ``propertyNames: {pattern: "^[a-c]$"}`` with ``minProperties: 2`` accepted ``{"b":1,"b":2}``,
which parses to ``{"b":2}`` and fails the schema. Masks are checked against ``accept_token`` on a fork over
every token of the toy vocabulary (and of Llama-3 where it is installed), at every prefix of the strings.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from leapgen import GrammarMatcher, SchemaError

FAULT = {"type": "object", "propertyNames": {"pattern": "^[a-c]$"}, "additionalProperties": {"type": "integer"},
         "minProperties": 2}
ABC = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
       "required": ["a", "b"]}
TREE = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3},
                                         "kids": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["name"]}


def verdict(compiled, text: str) -> bool:
    m = GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


def check_masks(compiled, texts) -> None:
    """At every byte prefix of ``texts`` (accepted ones): the bitmask equals what accept_token takes."""
    vocab_size = compiled.tokenizer_info.vocab_size
    for text in texts:
        data = text.encode()
        m = GrammarMatcher(compiled)
        for i in range(len(data) + 1):
            bitmask = np.zeros((1, (vocab_size + 31) // 32), np.int32)
            m.fill_next_token_bitmask(bitmask)
            got = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)
            want = np.array([m.fork().accept_token(t) for t in range(vocab_size)])
            assert np.array_equal(got, want), (text, data[:i], np.flatnonzero(got != want)[:8])
            if i < len(data):
                assert m.accept_string(data[i:i + 1])


@pytest.mark.parametrize("any_whitespace", [False, True])
def test_a_finite_key_set_never_repeats_a_key(toy_compiler, any_whitespace):
    compiled = toy_compiler.compile_json_schema(FAULT, any_whitespace=any_whitespace)
    assert not compiled.warnings
    for text, want in [('{"b":1,"b":2}', False), ('{"b":1,"a":2}', True), ('{"a":1,"b":2,"c":3}', True),
                       ('{"a":1,"b":2,"c":3,"a":4}', False), ('{"c":1}', False), ('{}', False),
                       ('{"d":1,"a":2}', False)]:
        assert verdict(compiled, text) is want, text
    check_masks(compiled, ['{"b":1,"a":2}', '{"c":3,"a":1,"b":2}'])
    m = GrammarMatcher(compiled)  # every key written: no comma may follow (it would lead nowhere)
    assert m.accept_string('{"a":1,"b":2,"c":3')
    assert not m.fork().accept_string(",") and m.fork().accept_string("}")


def test_the_fault_on_llama3(grammar_compiler):
    compiled = grammar_compiler("llama3").compile_json_schema(FAULT, any_whitespace=False)
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"b":1,"')
    tokens = compiled.tokenizer_info.token_bytes
    assert not m.fork().accept_string('b"') and m.fork().accept_string('a"')
    bitmask = np.zeros((1, (len(tokens) + 31) // 32), np.int32)
    m.fill_next_token_bitmask(bitmask)
    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")
    for text, want in [(b'b":', False), (b'a":', True), (b'c', True), (b'b', False)]:
        if text in tokens:
            assert bool(bits[tokens.index(text)]) is want, text


@pytest.mark.parametrize("any_whitespace", [False, True])
def test_any_order_each_key_once_required_present(toy_compiler, any_whitespace):
    compiled = toy_compiler.compile_json_schema(ABC, any_whitespace=any_whitespace, any_order=True)
    assert not compiled.warnings
    for text, want in [('{"a":1,"b":"x"}', True), ('{"b":"x","a":1}', True), ('{"c":true,"b":"x","a":1}', True),
                       ('{"b":"x","c":true}', False), ('{"a":1,"b":"x","a":2}', False), ('{"a":1}', False),
                       ('{"a":1,"b":"x","d":0}', False), ('{"b":1,"a":1}', False), ('{}', False)]:
        assert verdict(compiled, text) is want, text
    default = toy_compiler.compile_json_schema(ABC, any_whitespace=any_whitespace)
    assert verdict(default, '{"a":1,"b":"x"}') and not verdict(default, '{"b":"x","a":1}')  # the default: schema order
    check_masks(compiled, ['{"c":true,"b":"x","a":1}'])


def test_any_order_jump_forward_rollback_and_fork(toy_compiler):
    compiled = toy_compiler.compile_json_schema({**ABC, "additionalProperties": False, "required": ["a", "b", "c"]},
                                                any_whitespace=False, any_order=True)
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"c":true,"a":1,')
    assert m.find_jump_forward_string() == '"b":"'  # the one key left
    before = GrammarMatcher(compiled)
    assert before.accept_string('{"c":true,')
    fork = before.fork()
    assert fork.accept_string('"a":1,"b":"x"}') and fork.is_completed()
    assert not before.accept_string('"c"')  # the fork did not write into the original's keys
    n = before.num_accepted_tokens
    assert before.accept_string('"a":1,') and before.accept_string('"b":"x"}')
    before.rollback(2)
    assert before.num_accepted_tokens == n and not before.accept_string('"c"') and before.accept_string('"b"')


def test_any_order_with_extra_keys_counts_min_and_max(toy_compiler):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "null"},
              "minProperties": 2, "maxProperties": 3}
    compiled = toy_compiler.compile_json_schema(schema, any_whitespace=False, any_order=True)
    assert any("repeated extra key is not detected" in w for w in compiled.warnings)
    for text, want in [('{"x":null,"a":1}', True), ('{"x":null,"y":null}', True), ('{"a":1}', False),
                       ('{"x":null,"y":null,"z":null,"w":null}', False), ('{"x":null,"a":1,"a":2}', False),
                       ('{"a":1,"x":1}', False)]:
        assert verdict(compiled, text) is want, text


def test_nested_and_recursive_objects_keep_their_own_keys(toy_compiler):
    compiled = toy_compiler.compile_json_schema(TREE, any_whitespace=False, any_order=True)
    for text, want in [('{"kids":[{"name":"x"}],"name":"y"}', True), ('{"name":"y","kids":[{"kids":[],"name":"z"}]}',
                       True), ('{"kids":[{"kids":[]}],"name":"y"}', False),
                       ('{"kids":[{"name":"x","name":"w"}],"name":"y"}', False),
                       ('{"kids":[{"name":"x"}],"kids":[],"name":"y"}', False)]:
        assert verdict(compiled, text) is want, text
    check_masks(compiled, ['{"kids":[{"name":"x"}],"name":"y"}'])


def test_schema_order_then_finite_extras(toy_compiler):
    schema = {"type": "object", "properties": {"p": {"type": "integer"}, "q": {"type": "integer"}},
              "required": ["q"], "patternProperties": {"^x[0-2]$": {"type": "null"}}, "additionalProperties": False}
    compiled = toy_compiler.compile_json_schema(schema, any_whitespace=False)
    for text, want in [('{"p":1,"q":2,"x1":null,"x0":null}', True), ('{"q":2,"x1":null}', True),
                       ('{"q":2,"p":1}', False), ('{"x1":null,"q":2}', False), ('{"q":2,"x1":null,"x1":null}', False),
                       ('{"p":1}', False)]:
        assert verdict(compiled, text) is want, text
    check_masks(compiled, ['{"p":1,"q":2,"x2":null,"x0":null}'])


def test_unsatisfiable_counts_admit_nothing(toy_compiler):
    with pytest.raises(SchemaError, match="admits no JSON value"):
        toy_compiler.compile_json_schema({**FAULT, "minProperties": 4})  # three names at most
    with pytest.raises(SchemaError, match="admits no JSON value"):
        toy_compiler.compile_json_schema({**ABC, "maxProperties": 1}, any_order=True)  # two required


def test_thirty_optional_properties_stay_linear(toy_compiler):
    """Nothing enumerates orders or subsets: states grow linearly with the properties."""
    def states(n):
        schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(n)}}
        return toy_compiler.compile_json_schema(schema, any_whitespace=False, any_order=True).n_states
    s10, s20, s30 = states(10), states(20), states(30)
    assert s30 - s20 == s20 - s10 <= 30 * 10, (s10, s20, s30)  # two small rules per property
    compiled = toy_compiler.compile_json_schema(
        {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(30)}}, any_order=True)
    doc = json.dumps({f"k{i}": i for i in reversed(range(0, 30, 3))}, separators=(",", ":"))
    assert verdict(compiled, doc)


def test_the_engine_takes_json_any_order():
    from leapgen.engine.grammar_manager import GrammarManager
    from leapgen.engine.sampling_params import SamplingParams

    params = SamplingParams(json_schema=ABC, json_any_order=True)
    GrammarManager.check(params)  # the front-end takes the option
    manager = GrammarManager(tokenizer=None, vocab_size=1, stop_token_ids=())  # no compile: the call only
    kind, _, kwargs = manager._compile_call(params)
    assert kind == "compile_json_schema" and kwargs["any_order"] is True
