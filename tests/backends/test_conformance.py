"""One conformance suite for every installed backend (``leapgen.backends``).

Tables of passing/failing texts per grammar (llguidance's idiom), walked
token by token on the Llama-3 vocabulary: a text passes when every token is
in the filled bitmask and accepted, and a stop token is allowed at the end.
Then the state verbs: rollback, fork, termination, accept_string and
jump-forward where the backend has them, and error mapping.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from backend_helpers import mask_of

from leapgen.backends import available_backends
from leapgen.errors import GrammarError, SchemaError

BACKENDS = available_backends()

PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
ARITH = r"""
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")"
"""

CASES = [  # (kind, source, passing, failing)
    ("regex", r"(cat|dog)s?", ["cat", "dogs"], ["cow", "cats!", "ca"]),
    ("regex", r"[0-9]{3}-[0-9]{4}", ["555-1234"], ["55-1234", "555-12345", "555 1234"]),
    ("regex", r"[α-ω]+ ?(ok|👍)", ["αβγ ok", "ω👍"], ["abc ok", "αβ  ok"]),
    ("json_schema", json.dumps(PERSON), ['{"name":"Al","age":3}', '{"name":"","age":-12}'],
     ['{"name": "Al","age":3}', '{"name":"Al"}', '{"name":"Al","age":3.5}', '{"name":"Al","age":3,"x":1}']),
    ("ebnf", ARITH, ["(1+2)*3", "((4))"], ["(1+2", "1++2", "()"]),
]


def _compile(backend, kind, source):
    if kind == "regex":
        return backend.compile_regex(source)
    if kind == "json_schema":
        return backend.compile_json_schema(source, any_whitespace=False)
    return backend.compile_grammar(source)


NO_CFG = {"outlines-core"}  # backends without context-free grammars: they must refuse EBNF cleanly
TABLE = [(name, case) for name in BACKENDS for case in CASES if not (case[0] == "ebnf" and name in NO_CFG)]


@pytest.mark.parametrize("name", sorted(NO_CFG & set(BACKENDS)))
def test_backends_without_cfg_refuse_ebnf(backend_named, name):
    with pytest.raises(GrammarError):
        backend_named(name).compile_grammar(ARITH)


def walk_text(backend, compiled, ids: list[int]) -> bool:
    """Walk ``ids``; the mask must agree with accept_token at every step."""
    state = backend.new_state(compiled)
    stop = backend.tokenizer_info.stop_token_ids[0]
    for token in ids:
        in_mask = token in set(mask_of(backend, state).tolist())
        accepted = state.accept_token(token)
        assert in_mask == accepted, f"{backend.name}: mask says {in_mask}, accept_token says {accepted}"
        if not accepted:
            return False
    return stop in set(mask_of(backend, state).tolist()) and state.is_completed()


@pytest.mark.parametrize("name,case", TABLE, ids=[f"{n}-{c[0]}{CASES.index(c)}" for n, c in TABLE])
def test_passing_and_failing(backend_named, encode, name, case):
    kind, source, passing, failing = case
    backend = backend_named(name)
    compiled = _compile(backend, kind, source)
    for text in passing:
        assert walk_text(backend, compiled, encode(text)), f"{name} should accept {text!r}"
    for text in failing:
        assert not walk_text(backend, compiled, encode(text)), f"{name} should reject {text!r}"


@pytest.mark.parametrize("name", BACKENDS)
def test_rollback_restores_mask(backend_named, encode, name):
    backend = backend_named(name)
    compiled = backend.compile_json_schema(PERSON, any_whitespace=False)
    ids = encode('{"name":"Bob","age":42}')
    state = backend.new_state(compiled)
    masks = [mask_of(backend, state)]
    for token in ids:
        assert state.accept_token(token)
        masks.append(mask_of(backend, state))
    for k in (1, 3, len(ids) - 1):
        state.rollback(k)
        np.testing.assert_array_equal(mask_of(backend, state), masks[len(ids) - k])
        for token in ids[len(ids) - k:]:
            assert state.accept_token(token)
    with pytest.raises(ValueError):
        state.rollback(len(ids) + 1)


@pytest.mark.parametrize("name", BACKENDS)
def test_termination_and_rollback_of_stop(backend_named, encode, name):
    backend = backend_named(name)
    state = backend.new_state(backend.compile_regex(r"(cat|dog)s?"))
    stop = backend.tokenizer_info.stop_token_ids[0]
    assert not state.accept_token(stop)  # not complete yet
    for token in encode("cat"):
        assert state.accept_token(token)
    assert state.is_completed() and not state.is_terminated()
    assert state.accept_token(stop) and state.is_terminated()
    assert not state.accept_token(encode("s")[0])
    assert mask_of(backend, state).size == 0  # after a stop token nothing is allowed
    state.rollback(1)
    assert not state.is_terminated() and state.accept_token(encode("s")[0])


@pytest.mark.parametrize("name", BACKENDS)
def test_fork_is_independent(backend_named, encode, name):
    backend = backend_named(name)
    compiled = backend.compile_json_schema(PERSON, any_whitespace=False)
    state = backend.new_state(compiled)
    if not state.can_fork:
        pytest.skip(f"{name} cannot fork")
    ids = encode('{"name":"Bob","age":42}')
    for token in ids[:3]:
        state.accept_token(token)
    before = mask_of(backend, state)
    other = state.fork()
    for token in ids[3:]:
        assert other.accept_token(token)
    np.testing.assert_array_equal(mask_of(backend, state), before)
    assert other.is_completed() and not state.is_completed()
    for token in ids[3:]:
        assert state.accept_token(token)
    np.testing.assert_array_equal(mask_of(backend, state), mask_of(backend, other))


def _state_of(backend_named, name):
    backend = backend_named(name)
    return backend.new_state(backend.compile_json_schema(PERSON, any_whitespace=False))


@pytest.mark.parametrize("name", BACKENDS)
def test_capability_flags_are_honest(backend_named, name):
    """A backend without accept_string / jump-forward says so, and refuses / forces nothing."""
    state = _state_of(backend_named, name)
    if not state.can_accept_string:
        with pytest.raises(NotImplementedError):
            state.accept_string('{"name"')
    if not state.can_jump_forward:
        assert state.find_jump_forward_string() == ""


@pytest.mark.parametrize("name", [n for n in BACKENDS if n != "outlines-core"])
def test_accept_string(backend_named, name):
    backend = backend_named(name)
    state = backend.new_state(backend.compile_json_schema(PERSON, any_whitespace=False))
    assert state.can_accept_string
    before = mask_of(backend, state)
    assert not state.accept_string('{"nope"')
    np.testing.assert_array_equal(mask_of(backend, state), before)  # unchanged after a rejection
    assert state.accept_string('{"name":"Zoë",')
    assert state.accept_string('"age":7}') and state.is_completed()
    state.rollback(1)
    assert not state.is_completed()


@pytest.mark.parametrize("name", [n for n in BACKENDS if n != "outlines-core"])
def test_jump_forward(backend_named, name):
    state = _state_of(backend_named, name)
    assert state.can_jump_forward
    assert state.find_jump_forward_string() == '{"name":"'
    if state.can_accept_string:
        assert state.accept_string('{"name":"Al"')
        assert state.find_jump_forward_string() == ',"age":'


@pytest.mark.parametrize("name", BACKENDS)
def test_errors_are_leapgen_errors(backend_named, name):
    backend = backend_named(name)
    with pytest.raises(GrammarError):
        backend.compile_regex("a(b")
    with pytest.raises(SchemaError):
        backend.compile_json_schema('{"type":')
    with pytest.raises(GrammarError):
        backend.compile_grammar("root ::= undefined_rule")


@pytest.mark.parametrize("name", BACKENDS)
def test_batch_fill_matches_single_fills(backend_named, encode, name):
    backend = backend_named(name)
    compiled = backend.compile_json_schema(PERSON, any_whitespace=False)
    ids = encode('{"name":"Bob","age":42}')
    states = []
    for k in range(len(ids)):
        state = backend.new_state(compiled)
        for token in ids[:k]:
            state.accept_token(token)
        states.append(state)
    bitmask = backend.allocate_bitmask(len(states) + 2)
    bitmask[:] = 0
    rows = list(range(2, len(states) + 2))
    backend.batch_fill_next_token_bitmask(states, bitmask, rows)
    assert not bitmask[:2].any()
    for state, row in zip(states, rows):
        single = backend.allocate_bitmask(1)
        state.fill_next_token_bitmask(single, 0)
        np.testing.assert_array_equal(bitmask[row], single[0])
