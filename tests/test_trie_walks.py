"""The row walk over the trie's walk records (:func:`leapgen.compiler.trie_kernels.row_walk`)
against a per-token walk of the DFA table written here (the oracle shares no code with the trie).

The vocabularies are deep and dense over a few bytes, so that live and dead nodes meet on both
sides of ``SCAN_DEPTH`` (depth first above it, preorder scan below), and empty or one-token
vocabularies cover the records' edges.
"""

from __future__ import annotations

import numpy as np
import pytest

from leapgen.compiler import trie_kernels

ALPHABET = b"ab\"{"


def _trie(tokens: list[bytes]):
    """The trie arrays, the token id of each row (ids are the list's positions, shuffled rows)."""
    rows = list(range(len(tokens)))
    width = max((len(t) for t in tokens), default=1) or 1
    mat = np.zeros((len(tokens), width), np.uint8)
    for r, t in enumerate(tokens):
        mat[r, :len(t)] = list(t)
    lengths = np.array([len(t) for t in tokens], np.int32)
    order = np.array(sorted(rows, key=lambda r: tokens[r]), np.int32)
    return trie_kernels.build_trie(mat, lengths, order), np.array(rows, np.int32)


def _random_vocabulary(rng):
    """Up to 400 distinct tokens of 1-8 bytes over ``ALPHABET``, in random order: the tokens, their
    trie's arrays, its walk records and the words of a bitset over them."""
    lengths = rng.integers(1, 9, size=int(rng.integers(1, 400)))
    tokens = sorted({bytes(rng.choice(list(ALPHABET), size=k).tolist()) for k in lengths})
    rng.shuffle(tokens)
    trie, ids = _trie(tokens)
    return tokens, trie, trie_kernels.walk_records(trie, ids), (len(tokens) + 31) // 32


def _random_leaves(rng, n_states, p):
    """A leave row per state (-1 for none, with probability ``1 - p``) and three rows of leave bytes."""
    leave_row = np.where(rng.random(n_states) < p, rng.integers(0, 3, size=n_states), -1).astype(np.int32)
    return leave_row, rng.random((3, 256)) < 0.5


def _oracle(tokens, trans, start, state_class, init):
    """Bit set per token id: in ``init``, or every byte has a transition and the end state is of class 1."""
    words = init.copy()
    for t, data in enumerate(tokens):
        q = start
        for b in data:
            q = trans[q, b]
            if q < 0:
                break
        if q >= 0 and data and state_class[q] == 1:
            words[t >> 5] |= np.uint32(1 << (t & 31))
    return words


def _random_dfa(rng, n_states, density):
    trans = np.full((n_states, 256), -1, np.int32)
    for q in range(n_states):
        for b in ALPHABET:
            if rng.random() < density:
                trans[q, b] = rng.integers(n_states)
    return trans


@pytest.mark.parametrize("seed", range(12))
def test_row_walk_matches_a_per_token_walk(seed):
    rng = np.random.default_rng(seed)
    tokens, _, records, n_words = _random_vocabulary(rng)
    for density in (0.3, 0.7, 1.0):
        trans = _random_dfa(rng, 6, density)
        state_class = rng.integers(0, 2, size=6).astype(np.int8)
        for start in range(6):
            init = np.zeros(n_words, np.uint32)
            if start % 2:
                init[rng.integers(n_words)] = np.uint32(rng.integers(1 << 32))
            got = trie_kernels.row_walk(trans.reshape(-1), start, state_class, init, bool(start % 2), *records,
                                        np.full(n_words, 0xFFFFFFFF, np.uint32))  # overwritten
            assert np.array_equal(got, _oracle(tokens, trans, start, state_class, init)), (density, start)


@pytest.mark.parametrize("tokens", [[], [b"a"], [b"abab\"{ab"], [b"a", b"ab", b"aba", b"abab"], [b"b", b"ba"],
                                    [b"a", b"ab", b"abb"], [b"{", b"{a", b"{ab", b"{b"]])
def test_row_walk_small_vocabularies(tokens):
    trie, ids = _trie(tokens)
    trans = np.full((1, 256), -1, np.int32)
    trans[0, list(ALPHABET)] = 0  # every byte of the alphabet loops
    live = np.ones(1, np.int8)
    init = np.zeros(max((len(tokens) + 31) // 32, 1), np.uint32)
    got = trie_kernels.row_walk(trans.reshape(-1), 0, live, init, False, *trie_kernels.walk_records(trie, ids),
                                np.full(len(init), 0xFFFFFFFF, np.uint32))
    assert np.array_equal(got, _oracle(tokens, trans, 0, live, init))


def _frame_oracle(tokens, trans, start, leave_row, leave_bytes, loop_state, loop_certain, loop_uncertain, in_class):
    """Certain: every byte has a transition. Uncertain: the walk dies at a byte after which (or at which)
    the frame could have left its rule, leaving at ``start`` itself not counted. A token whose prefix
    reaches ``loop_state`` by bytes all in ``in_class`` (the frame unable to leave on the way) is
    sorted as the loop state's sets say."""
    certain, uncertain = set(), set()
    for t, data in enumerate(tokens):
        q, left, pure = start, False, True
        for i, b in enumerate(data):
            if i > 0 and leave_row[q] >= 0 and leave_bytes[leave_row[q], b]:
                left = True
            nxt = trans[q, b]
            if nxt < 0:
                if left:
                    uncertain.add(t)
                break
            pure = pure and in_class[b] and not left
            if pure and nxt == loop_state:
                certain |= {t} & loop_certain
                uncertain |= {t} & loop_uncertain
                break
            q = nxt
        else:
            if data:
                certain.add(t)
    return certain, uncertain


def _bits(words):
    return {w * 32 + i for w in range(len(words)) for i in range(32) if (int(words[w]) >> i) & 1}


@pytest.mark.parametrize("seed", range(8))
def test_frame_walk_matches_a_per_token_walk(seed):
    from leapgen.compiler import pda_kernels

    rng = np.random.default_rng(100 + seed)
    tokens, trie, records, n_words = _random_vocabulary(rng)
    for density in (0.3, 0.7, 1.0):
        trans = _random_dfa(rng, 6, density)
        leave_row, leave_bytes = _random_leaves(rng, 6, 0.5)
        for start in range(6):
            certain, uncertain = np.zeros(n_words, np.uint32), np.zeros(n_words, np.uint32)
            got = pda_kernels.frame_walk(trans.reshape(-1), start, leave_row, leave_bytes, *records, trie[7],
                                         certain, uncertain)
            want_certain, want_uncertain = _frame_oracle(tokens, trans, start, leave_row, leave_bytes, -1, set(), set(),
                                                       np.zeros(256, np.bool_))
            assert _bits(certain) == want_certain and _bits(uncertain) == want_uncertain, (density, start)
            assert bool(got) == bool(want_uncertain)


@pytest.mark.parametrize("seed", range(8))
def test_frame_walk_via_matches_a_per_token_walk(seed):
    from leapgen.compiler import pda_kernels

    rng = np.random.default_rng(200 + seed)
    tokens, trie, records, n_words = _random_vocabulary(rng)
    in_class = np.zeros(256, np.bool_)
    in_class[list(b"ab")] = True
    for density in (0.5, 1.0):
        trans = _random_dfa(rng, 6, density)
        leave_row, leave_bytes = _random_leaves(rng, 6, 0.4)
        loop_sets = [rng.integers(0, 1 << 32, size=n_words, dtype=np.uint64).astype(np.uint32) for _ in range(2)]
        for start in range(6):
            loop_state = int(rng.integers(6))
            certain, uncertain = np.zeros(n_words, np.uint32), np.zeros(n_words, np.uint32)
            got = pda_kernels.frame_walk_via(trans.reshape(-1), start, leave_row, leave_bytes, loop_state, *loop_sets,
                                             in_class, *records, trie[7], certain, uncertain)
            want_certain, want_uncertain = _frame_oracle(tokens, trans, start, leave_row, leave_bytes, loop_state,
                                                       *(_bits(w) for w in loop_sets), in_class)
            assert _bits(certain) == want_certain and _bits(uncertain) == want_uncertain, (density, start)
            assert bool(got) or not want_uncertain
