"""``GrammarCompiler.compile_choice`` (the trie), the builtin JSON grammars
(xgrammar's object-or-array root, any value under its own name) and JSON's
``whitespace_pattern``.

Oracles: a Python set of the choices' bytes (brute-force masks over the toy
vocabulary), the ``regex`` module, ``json``, and the regex alternation of the
same choices compiled through the general construction (a minimal DFA is
unique, so both must have the same number of states)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import regex as re_oracle

from leapgen import GrammarMatcher, allocate_token_bitmask
from leapgen.backends.base import choice_regex
from leapgen.errors import CompileLimitError, GrammarError, RegexError


def _allowed(matcher: GrammarMatcher, vocab_size: int) -> set[int]:
    bitmask = allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    words = bitmask[0].numpy().view(np.uint32)
    return {t for t in range(vocab_size) if (words[t >> 5] >> (t & 31)) & 1}


def _brute_force(info, choices: list[bytes], prefix: bytes) -> set[int]:
    """Tokens t with prefix + bytes(t) a prefix of some choice; stop tokens when prefix is one."""
    out = set()
    for t, data in enumerate(info.token_bytes):
        if t in info.stop_token_ids:
            if prefix in choices:
                out.add(t)
        elif data and t not in info.special_token_ids and any(c.startswith(prefix + data) for c in choices):
            out.add(t)
    return out


def _random_choices(rng: random.Random, count: int) -> list[str]:
    alphabet = "abc12 é日"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(count)]


@pytest.mark.parametrize("seed", range(4))
def test_choice_masks_equal_a_brute_force_walk(toy_compiler, toy_info, seed):
    rng = random.Random(seed)
    choices = _random_choices(rng, rng.randint(1, 12))
    encoded = [c.encode() for c in choices]
    compiled = toy_compiler.compile_choice(choices)
    for target in rng.sample(encoded, min(3, len(encoded))):
        matcher = GrammarMatcher(compiled)
        for i in range(len(target) + 1):
            assert _allowed(matcher, toy_info.vocab_size) == _brute_force(toy_info, encoded, target[:i]), (choices, i)
            if i < len(target):
                assert matcher.accept_token(target[i])  # ids 0-255 are the single bytes
        assert matcher.is_completed()


def test_choice_language_is_exactly_the_choices(toy_compiler):
    choices = ["yes", "no", "maybe", "no", "", "日本", "yes!"]
    compiled = toy_compiler.compile_choice(choices)
    for text in choices:
        m = GrammarMatcher(compiled)
        assert m.accept_string(text) and m.is_completed(), text
    for text in ["ye", "maybe ", "nope", "日", "yes!!"]:
        m = GrammarMatcher(compiled)
        assert not (m.accept_string(text) and m.is_completed()), text
    # the minimal DFA is unique: the trie minimized equals the alternation through the general construction
    alternation = toy_compiler.compile_regex(choice_regex(choices))
    assert compiled.n_states == alternation.n_states


def test_choice_regex_escapes_match_the_choices_only():
    choices = ["a.b", "c|d", "(x)", "p\\q", "[z]{2}", "1/2", "*+?^$"]
    pattern = choice_regex(choices)
    for text in choices:
        assert re_oracle.fullmatch(pattern, text), text
    for text in ["axb", "c", "x", "zz", "12"]:
        assert not re_oracle.fullmatch(pattern, text), text


def test_ten_thousand_choices_compile_and_match(grammar_compiler):
    compiler = grammar_compiler("llama3")
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(400)]
    choices = sorted({f"{rng.choice(words)} {rng.choice(words)}" for _ in range(12000)})[:10000]
    compiled = compiler.compile_choice(choices)
    assert compiled.kind == "choice" and compiled.compile_ms < 5000  # a limit far above the measured ~100 ms
    for text in rng.sample(choices, 20):
        m = GrammarMatcher(compiled)
        assert m.accept_string(text) and m.is_completed(), text
    words_set = set(choices)
    for text in (f"{a} {b}" for a, b in zip(words, reversed(words))):
        m = GrammarMatcher(compiled)
        assert (m.accept_string(text) and m.is_completed()) == (text in words_set), text


@pytest.mark.parametrize("bad, needle", [([], "at least one"), ("yes", "list of str"), (["a", 3], "item 1"),
                                         (["ok", "\ud800"], "choice[1]")])
def test_bad_choices_are_grammar_errors(toy_compiler, bad, needle):
    with pytest.raises(GrammarError, match=re_oracle.escape(needle)):
        toy_compiler.compile_choice(bad)


def test_too_many_choice_states_is_a_limit():
    from leapgen.automata.trie import trie_dfa

    rng = random.Random(1)
    strings = ["".join(rng.choice("abcdefgh") for _ in range(12)).encode() for _ in range(600)]
    assert trie_dfa(strings, max_states=10_000).n_states > 2000  # random strings share few suffixes
    with pytest.raises(CompileLimitError, match="2000 DFA"):
        trie_dfa(strings, max_states=2000)  # the minimal DFA is over the limit
    with pytest.raises(CompileLimitError, match="trie"):
        trie_dfa(strings, max_states=100)  # the trie itself is (over 16 x 100 nodes)


def test_builtin_json_grammar_is_an_object_or_an_array_and_the_value_grammar_any_value(toy_compiler):
    builtin, value = toy_compiler.compile_builtin_json_grammar(), toy_compiler.compile_json_value_grammar()
    for doc in ['{"a": [1, {"b": null}]}', "[]", "[true, -0.5e3]"]:
        json.loads(doc)
        for compiled in (builtin, value):
            m = GrammarMatcher(compiled)
            assert m.accept_string(doc) and m.is_completed(), doc
    for doc in ['"text"', "12", "null", "true"]:
        json.loads(doc)
        assert not GrammarMatcher(builtin).accept_string(doc[:1]), doc
        m = GrammarMatcher(value)
        assert m.accept_string(doc) and m.is_completed(), doc


def test_whitespace_pattern_sets_the_json_whitespace(toy_compiler):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
              "additionalProperties": False}
    compiled = toy_compiler.compile_json_schema(schema, whitespace_pattern=r"[ \n]?")
    for doc, ok in [('{"a":1}', True), ('{ "a" :\n1 }', True), ('{  "a":1}', False), ('{\t"a":1}', False)]:
        m = GrammarMatcher(compiled)
        assert (m.accept_string(doc) and m.is_completed()) == ok, doc
        if ok:
            assert json.loads(doc) == {"a": 1}
    # a pattern is part of the cache key: without it the default layout comes back
    assert toy_compiler.compile_json_schema(schema) is not compiled
    with pytest.raises(GrammarError, match="not JSON whitespace"):
        toy_compiler.compile_json_schema(schema, whitespace_pattern="x*")
    with pytest.raises(RegexError):
        toy_compiler.compile_json_schema(schema, whitespace_pattern="[ ")
