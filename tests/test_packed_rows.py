"""Rows a regular grammar computes at a first visit are written into the caller's bitmask and kept
packed (CompiledGrammar._keep_packed): the words that differ from the row's base word, where that
takes at most 1/PACKED_FRACTION of a whole row (a dense-ish row, a string body's, is kept whole: a
copy is faster to fill from than a long list of words).

Every path that hands a row out (the first fill, later fills from the packed entry, ``bitmask_row``,
which keeps the row whole from then on, and a batch pool thread's ``prepare_row``) gives the row of a
brute-force walk of every token through the DFA, written in the tests (``_brute_force`` of
test_structural_tag_masks), into a bitmask holding garbage before; and each row is kept in the form
its density calls for.
"""

from __future__ import annotations

import numpy as np
import pytest

from leapgen import GrammarCompiler
from leapgen.compiler.compact_rows import compact_words
from leapgen.compiler.compiled import PACKED_FRACTION
from test_mask_exactness import unpack, vocab_tables
from test_structural_tag_masks import _brute_force

SCHEMA = {"type": "object", "required": ["city", "days"], "properties": {
    "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer"}, "lat": {"type": "number"}}}
PER_KIND = 8


@pytest.fixture(scope="module", params=["llama3", "gpt2"])
def vocab(request):
    return vocab_tables(request.param)


def _garbage(words: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-2**31, 2**31, words, dtype=np.int64).astype(np.int32)


def _sampled_states(compiled, rng) -> list[int]:
    live = (compiled.dfa.trans >= 0).sum(axis=1)
    out = [int(np.argmax(live))]  # a string's body: most tokens allowed, a row packed against all ones
    # forced text, digits and keys, free text, and where the document may end (the stop tokens' bits)
    for where in (live == 1, (live > 1) & (live < 10), live >= 10, compiled.dfa.accepting):
        states = np.flatnonzero(where)
        assert len(states), "a kind of state is missing"
        out += rng.choice(states, min(PER_KIND, len(states)), replace=False).tolist()
    # free text first: a walk through a string's escape jumps to the string's body (a LOOP state),
    # whose row is kept whole from then on (CompiledGrammar._unpacked)
    return sorted(set(out), key=lambda s: -live[s])


def test_first_fills_later_fills_and_whole_rows_equal_brute_force(vocab):
    compiled = GrammarCompiler(vocab.info).compile_json_schema(SCHEMA)
    assert compiled.is_regular
    has_ff = np.array([0xFF in vocab.token_bytes[i] for i in vocab.by_len_ids.tolist()], bool)
    words = (vocab.info.vocab_size + 31) // 32
    states = _sampled_states(compiled, np.random.default_rng(3))
    before = compiled.memory_size_bytes()
    for k, s in enumerate(states):
        want = _brute_force(vocab, compiled, s, {}, has_ff)
        first, again = _garbage(words, 2 * k), _garbage(words, 2 * k + 1)
        need_first = compiled.write_row(s, first)  # computed in `first`, kept packed
        need_again = compiled.write_row(s, again)  # expanded from the packed entry
        for got in (first, again):
            bad = np.flatnonzero(unpack(got)[:vocab.info.vocab_size] != want)
            assert bad.size == 0, f"state {s}: tokens {bad[:8].tolist()}"
        assert need_first == need_again == (not want.all())
    held = compiled.memory_size_bytes() - before
    packed = 0
    for s in states:  # packed where that takes at most 1/PACKED_FRACTION of a whole row, else whole
        entry, row = compiled._rows[s], np.empty(words, np.uint32)
        compiled.write_row(s, row.view(np.int32))
        idx, val, _, _, _ = compact_words(row, np.zeros(0, np.uint16), vocab.info.vocab_size)
        small = idx.nbytes + val.nbytes <= words * 4 // PACKED_FRACTION
        assert (len(entry) == 4) == small, f"state {s}: kept {'whole' if small else 'packed'}"
        packed += len(entry) == 4
    assert packed >= len(states) // 2 and held < len(states) * words * 4 * 2 / 3
    for s in states:
        row, need = compiled.bitmask_row(s)  # whole from now on
        assert not row.flags.writeable and np.array_equal(unpack(row)[:vocab.info.vocab_size],
                                                          _brute_force(vocab, compiled, s, {}, has_ff))
        out = _garbage(words, s)
        assert compiled.write_row(s, out) == need and np.array_equal(out, row)


def test_rows_prepared_ahead_equal_brute_force(vocab):
    compiled = GrammarCompiler(vocab.info).compile_json_schema({**SCHEMA, "title": "prepared"})
    has_ff = np.array([0xFF in vocab.token_bytes[i] for i in vocab.by_len_ids.tolist()], bool)
    words = (vocab.info.vocab_size + 31) // 32
    for s in _sampled_states(compiled, np.random.default_rng(4)):
        compiled.prepare_row(s)
        assert compiled.has_bitmask_row(s)
        misses = compiled.mask_cache_misses
        out = _garbage(words, s)
        compiled.write_row(s, out)
        assert compiled.mask_cache_misses == misses  # read from the cache, not walked again
        assert np.array_equal(unpack(out)[:vocab.info.vocab_size], _brute_force(vocab, compiled, s, {}, has_ff))


@pytest.mark.parametrize("vocab_size", [32 * 40, 32 * 40 - 7, 33])
def test_compact_words_against_numpy(vocab_size):
    """The packed words, the base and the every-token-allowed flag, against numpy on rows of every
    kind: sparse, mostly ones, every bit set, every token's bit set but the padding's, the first
    word's or the last token's bit off."""
    n = (vocab_size + 31) // 32
    rng = np.random.default_rng(vocab_size)
    tail = (1 << (vocab_size % 32)) - 1 if vocab_size % 32 else 0xFFFFFFFF
    sparse = np.zeros(n, np.uint32)
    sparse[rng.integers(0, n, 3)] = 12345
    dense = np.full(n, 0xFFFFFFFF, np.uint32)
    dense[rng.integers(0, n, 2)] = 7
    exact = np.full(n, 0xFFFFFFFF, np.uint32)
    exact[-1] = tail
    off = exact.copy()
    off[0] ^= 1 << 5
    last_off = exact.copy()
    last_off[-1] ^= 1 << ((vocab_size - 1) % 32)  # the last token's bit
    for words in (sparse, dense, np.full(n, 0xFFFFFFFF, np.uint32), exact, off, last_off):
        idx, val, ones, every, _ = compact_words(words, np.zeros(0, np.uint16), vocab_size)
        base = np.uint32(0xFFFFFFFF) if ones else np.uint32(0)
        assert ones == (np.count_nonzero(words == 0xFFFFFFFF) > np.count_nonzero(words == 0))
        assert np.array_equal(idx, np.flatnonzero(words != base)) and np.array_equal(val, words[words != base])
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab_size]
        assert every == bool(bits.all())
        for bound in (len(idx) - 1, len(idx)):  # too many listed words: nothing filled, the flags kept
            if bound >= 0:
                got = compact_words(words, np.zeros(0, np.uint16), vocab_size, bound)
                assert got[4] == (bound >= len(idx)) and got[2:4] == (ones, every)
                assert len(got[0]) == len(got[1]) == (len(idx) if got[4] else 0)
