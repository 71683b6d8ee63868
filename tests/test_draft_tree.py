"""GrammarMatcher.traverse_draft_tree: one bitmask row per draft node (xgrammar's tree encoding)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from leapgen import GrammarCompiler, GrammarMatcher, TokenizerInfo

VOCAB = ["c", "at", "og", "s", "x", "a", "t", "</s>"]
C, AT, OG, S, X, A, T, STOP = range(len(VOCAB))


@pytest.fixture(scope="module")
def matcher():
    compiler = GrammarCompiler(TokenizerInfo(VOCAB, stop_token_ids=[STOP]))
    m = GrammarMatcher(compiler.compile_regex("(cat|dog)s?"))
    assert m.accept_token(C)
    return m


def _ids(row: np.ndarray) -> list[int]:
    return np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist()


def _expected_row(matcher, path: list[int]) -> list[int]:
    m = matcher.fork()
    for t in path:
        assert m.accept_token(t)
    bitmask = np.zeros((1, 1), np.int32)
    m.fill_next_token_bitmask(bitmask)
    return _ids(bitmask[0])


def test_rows_follow_paths(matcher):
    #  0 "c" -> 1 "at" -> 3 "s" -> 5 "x" (rejected)
    #        |          -> 4 </s> (terminated: zero row)
    #        -> 2 "og" (rejected after "c")     6 "a" (sibling of 1) -> 7 "t"
    tokens = [C, AT, OG, S, STOP, X, A, T]
    first_child = [1, 3, -1, 5, -1, -1, 7, -1]
    next_sibling = [-1, 2, 6, 4, -1, -1, -1, -1]
    bitmask = np.full((9, 1), -1, np.int32)
    before = matcher.num_accepted_tokens
    assert matcher.traverse_draft_tree(first_child, next_sibling, tokens, bitmask)
    assert matcher.num_accepted_tokens == before  # the caller's matcher is unchanged
    assert _ids(bitmask[0]) == _expected_row(matcher, [])
    assert _ids(bitmask[1]) == _expected_row(matcher, [AT])
    assert _ids(bitmask[3]) == _expected_row(matcher, [AT, S]) == [STOP]
    assert _ids(bitmask[6]) == _expected_row(matcher, [A])
    assert _ids(bitmask[7]) == _expected_row(matcher, [A, T])
    for rejected_or_stopped in (2, 4, 5):
        assert _ids(bitmask[rejected_or_stopped]) == []
    assert bitmask[8, 0] == -1  # rows past the tree untouched


def test_time_threshold(matcher, monkeypatch):
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(clock)))
    bitmask = np.full((3, 1), -1, np.int32)
    assert not matcher.traverse_draft_tree([1, 2, -1], [-1, -1, -1], [C, AT, S], bitmask, time_threshold=5.0)
    assert _ids(bitmask[0]) == _expected_row(matcher, [])  # the root's row is filled before time is checked
    assert not bitmask[1:].any()  # ran out before node 1: the rest zero


def test_invalid_trees(matcher):
    bitmask = np.zeros((3, 1), np.int32)
    with pytest.raises(ValueError):
        matcher.traverse_draft_tree([1, -1], [-1, -1, -1], [C, AT, S], bitmask)
    with pytest.raises(ValueError):
        matcher.traverse_draft_tree([5, -1, -1], [-1, -1, -1], [C, AT, S], bitmask)
    with pytest.raises(ValueError):
        matcher.traverse_draft_tree([1, 2, 1], [-1, -1, -1], [C, AT, S], bitmask)  # a cycle
    with pytest.raises(ValueError):
        matcher.traverse_draft_tree([1, 2, -1], [-1, -1, -1], [C, AT, S], np.zeros((2, 1), np.int32))


def test_same_rows_as_xgrammar():
    """The same tree on Llama-3 through xgrammar and leapgen gives identical rows."""
    xgr = pytest.importorskip("xgrammar")
    torch = pytest.importorskip("torch")
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    tok, info = load_hf_tokenizer("llama3"), load_tokenizer_info("llama3")
    enc = lambda s: tok.encode(s, add_special_tokens=False)[0]  # noqa: E731
    pattern = r'\{"a": (true|false|[0-9]{1,3})(, "b": "[a-z]{0,5}")?\}'
    tokens = torch.tensor([enc("{"), enc('"a'), enc('":'), enc(" true"), enc(" "), enc("12"), enc("}"), enc(","),
                           enc("x"), enc(' "'), info.stop_token_ids[0]])
    first_child = torch.tensor([1, 2, 3, 6, 5, 7, -1, 9, -1, -1, -1])
    next_sibling = torch.tensor([-1, -1, -1, 4, 8, -1, 10, -1, -1, -1, -1])
    xm = xgr.GrammarMatcher(xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(
        tok, vocab_size=info.vocab_size, stop_token_ids=list(info.stop_token_ids))).compile_regex(pattern))
    lm = GrammarMatcher(GrammarCompiler(info).compile_regex(pattern))
    assert xm.accept_token(int(tokens[0])) and lm.accept_token(int(tokens[0]))
    words = (info.vocab_size + 31) // 32
    theirs, mine = (torch.full((11, words), -1, dtype=torch.int32) for _ in range(2))
    assert xm.traverse_draft_tree(first_child, next_sibling, tokens, theirs)
    assert lm.traverse_draft_tree(first_child, next_sibling, tokens, mine)
    for i in range(11):
        assert torch.equal(theirs[i], mine[i]), f"row {i}"
