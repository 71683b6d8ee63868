"""BatchGrammarMatcher: batched verbs equal the per-matcher ones, serial or threaded."""

from __future__ import annotations

import numpy as np
import pytest

from leapgen import BatchGrammarMatcher, GrammarCompiler, GrammarMatcher, TokenizerInfo

VOCAB = ["a", "b", "c", "ab", "bc", "abc", "1", "12", "-", " ", "</s>"]


@pytest.fixture(scope="module")
def compiler():
    return GrammarCompiler(TokenizerInfo(VOCAB, stop_token_ids=[len(VOCAB) - 1]))


def _matchers(compiler, prefixes):
    out = []
    for pattern, prefix in prefixes:
        m = GrammarMatcher(compiler.compile_regex(pattern))
        if prefix:
            assert m.accept_string(prefix)
        out.append(m)
    return out


PREFIXES = [("(ab|c)+", ""), ("(ab|c)+", "ab"), ("[0-9]+-[a-c]*", "12"), ("[0-9]+-[a-c]*", "1-a"),
            ("(ab|c)+", "abc"), ("[a-c ]{0,6}", "a b")]


@pytest.mark.parametrize("threads", [1, 2, "auto"])
def test_batch_fill_equals_single_fills(compiler, threads):
    compiler.clear_cache()  # new grammars: rows not cached, so threads have work
    matchers = _matchers(compiler, PREFIXES)
    batch = BatchGrammarMatcher(max_threads=threads)
    bitmask = np.zeros((len(matchers) + 3, 1), np.int32)
    indices = [3 + i for i in range(len(matchers))][::-1]
    batch.batch_fill_next_token_bitmask(matchers, bitmask, indices)
    assert not bitmask[:3].any()
    for m, row in zip(matchers, indices):
        single = np.zeros((1, 1), np.int32)
        m.fill_next_token_bitmask(single)
        np.testing.assert_array_equal(bitmask[row], single[0])


def test_batch_fill_torch_tensor(compiler):
    torch = pytest.importorskip("torch")
    matchers = _matchers(compiler, PREFIXES)
    bitmask = torch.zeros((len(matchers), 1), dtype=torch.int32)
    BatchGrammarMatcher().batch_fill_next_token_bitmask(matchers, bitmask)
    for i, m in enumerate(matchers):
        single = np.zeros((1, 1), np.int32)
        m.fill_next_token_bitmask(single)
        assert bitmask[i, 0].item() == single[0, 0]


def test_batch_accept_and_rollback(compiler):
    matchers = _matchers(compiler, [("(ab|c)+", ""), ("[0-9]+-[a-c]*", "")])
    batch = BatchGrammarMatcher(max_threads=1)
    assert batch.batch_accept_token(matchers, [VOCAB.index("ab"), VOCAB.index("ab")]) == [True, False]
    assert batch.batch_accept_string(matchers, ["c", "12-"]) == [True, True]
    assert [m.num_accepted_tokens for m in matchers] == [2, 1]
    batch.batch_rollback(matchers, [2, 1])
    assert [m.num_accepted_tokens for m in matchers] == [0, 0]
    assert batch.batch_accept_string(matchers, ["abab", "1-"]) == [True, True]
    batch.batch_rollback(matchers, 1)
    assert all(m.num_accepted_tokens == 0 for m in matchers)


def test_batch_validation(compiler):
    matchers = _matchers(compiler, PREFIXES[:2])
    batch = BatchGrammarMatcher(max_threads=1)
    with pytest.raises(ValueError):
        batch.batch_accept_token(matchers, [0])
    with pytest.raises(ValueError):
        batch.batch_fill_next_token_bitmask(matchers, np.zeros((2, 1), np.int32), [0])
    with pytest.raises(ValueError):
        batch.batch_rollback(matchers, [1, 2, 3])
    for bad in (0, -1, "many", 1.5, True):
        with pytest.raises(ValueError):
            BatchGrammarMatcher(max_threads=bad)
