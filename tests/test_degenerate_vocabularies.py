"""Degenerate vocabularies (issue 15, fault 4).

``GrammarCompiler(TokenizerInfo([]))`` raised ``IndexError`` in the token
index's warm-up on the numba path, which marked the first walkable token as
its probe; a vocabulary of special tokens only has none. Now a vocabulary
with one token, or with special, stop, padding ids and holes only, compiles
every kind of grammar and masks exactly; an empty one (no token id at all: no
logits to mask) is refused with a clear ``ValueError``.
"""

from __future__ import annotations

import numpy as np
import pytest

from leapgen import GrammarCompiler, GrammarMatcher, TokenizerError, TokenizerInfo
from leapgen.automata.jit import HAVE_NUMBA
from leapgen.compiler.token_index import TokenIndex

VOCABULARIES = {
    "one token": dict(encoded_vocab=[b"a"]),
    "one stop token": dict(encoded_vocab=[b"</s>"], stop_token_ids=[0]),
    "special tokens only": dict(encoded_vocab=[b"<s>", b"</s>", b"<pad>"], special_token_ids=[0, 2],
                                stop_token_ids=[1]),
    "holes only": dict(encoded_vocab=[None, None]),
    "padding only": dict(encoded_vocab=[], vocab_size=5),
}


def _grammars(compiler: GrammarCompiler):
    """(compiled grammar, a text it accepts) of each front-end, regular and pushdown."""
    return [(compiler.compile_regex("a+"), "a"),
            (compiler.compile_json_schema({"type": "object", "properties": {"a": {"type": "string"}}}), '{"a":"'),
            (compiler.compile_builtin_json_grammar(), "[["),
            (compiler.compile_grammar('root ::= "(" root ")" | "a"'), "((")]


def _mask(matcher: GrammarMatcher, vocab_size: int) -> np.ndarray:
    bitmask = np.zeros((1, (vocab_size + 31) // 32), np.int32)
    matcher.fill_next_token_bitmask(bitmask)
    return np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


@pytest.mark.parametrize("name", sorted(VOCABULARIES))
def test_degenerate_vocabulary_compiles_and_masks_exactly(name):
    assert HAVE_NUMBA  # a dependency of leapgen: the warm-up that crashed is the numba path's
    info = TokenizerInfo(**VOCABULARIES[name])
    compiler = GrammarCompiler(info)
    assert compiler.token_index.use_trie
    for compiled, text in _grammars(compiler):
        matcher = GrammarMatcher(compiled)
        for step in (None, text):
            if step is not None:
                assert matcher.accept_string(step)
            got = _mask(matcher, info.vocab_size)
            want = np.array([matcher.fork().accept_token(t) for t in range(info.vocab_size)])
            assert np.array_equal(got, want), (name, compiled.kind, step)
        assert matcher.find_jump_forward_string() is not None


@pytest.mark.parametrize("name", sorted(VOCABULARIES))
def test_degenerate_vocabulary_without_the_trie_kernels(name):
    info = TokenizerInfo(**VOCABULARIES[name])
    index = TokenIndex(info, use_trie=False)
    loop = np.zeros(256, np.int32)  # one state, every byte back to it
    words, _ = index.token_sets(loop, 0, np.ones(1, np.int8))
    walkable = [t for t in range(info.vocab_size) if info.token_bytes[t]]
    got = np.unpackbits(words.view(np.uint8), bitorder="little")[:info.vocab_size]
    assert np.flatnonzero(got).tolist() == walkable


@pytest.mark.parametrize("kwargs", [dict(encoded_vocab=[]), dict(encoded_vocab=[], vocab_size=0)])
def test_empty_vocabulary_is_refused_clearly(kwargs):
    with pytest.raises(TokenizerError, match="at least one token id") as info:
        TokenizerInfo(**kwargs)
    assert isinstance(info.value, ValueError)
