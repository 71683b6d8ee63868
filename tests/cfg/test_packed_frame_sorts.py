"""Context-free grammars keep their frame sorts' certain tokens packed (issue 19): the words that
differ from a base word, as the row cache keeps regular grammars' rows (dense-ish sets whole). The
packed sets are the sets the walk finds, joined sorts set the same bits as numpy's OR of whole rows,
and the frame sorts take a fraction of the memory whole bitsets took."""

from __future__ import annotations

import numpy as np
import pytest

from leapgen.compiler.compact_rows import compact_words
from leapgen.compiler.compiled import PACKED_FRACTION, entry_bytes
from leapgen.compiler.compiled_cfg import CERTAIN, _or_entry
from test_pushdown_runtime import JSON_GBNF, _whole


@pytest.fixture(scope="module")
def json_inner(grammar_compiler):
    compiled = grammar_compiler("llama3").compile_grammar(JSON_GBNF)
    return getattr(compiled, "compiled", compiled)


def test_packed_frame_sorts_hold_the_sets_the_walk_finds(json_inner):
    """Every frame sorted at compile time: its certain set, expanded, is the set a walk into a fresh
    bitset finds; it is packed where that takes at most 1/PACKED_FRACTION of a whole bitset (most
    frames), and the sets together take under half of whole bitsets."""
    inner = json_inner
    assert inner._all_sorted
    index = inner.token_index
    frames = inner._frame_tokens
    assert len(frames) >= 20
    for g, f in frames.items():
        plain = index.frame_sets(inner._automaton, g, inner._live)[0]  # no jumps, a fresh bitset
        assert np.array_equal(_whole(inner, f[CERTAIN]), plain), g
    whole = index.bitmask_words * 4
    for g, f in frames.items():  # packed where that takes at most 1/PACKED_FRACTION of a whole row
        idx, val, _, _, _ = compact_words(_whole(inner, f[CERTAIN]), np.zeros(0, np.uint16), index.vocab_size)
        assert (len(f[CERTAIN]) == 4) == (idx.nbytes + val.nbytes <= whole // PACKED_FRACTION), g
    assert sum(len(f[CERTAIN]) == 4 for f in frames.values()) > 0.6 * len(frames)
    held = sum(entry_bytes(f[CERTAIN]) for f in frames.values())
    assert held < len(frames) * whole / 2


@pytest.mark.parametrize("ones", [False, True])
def test_joined_entries_set_the_bits_of_whole_rows(json_inner, ones):
    """``_or_entry`` of a packed entry (over a base of zeros or of ones) and of a whole one sets the
    bits numpy's OR of the expanded rows sets, into a row that held other bits."""
    inner = json_inner
    n = inner.token_index.bitmask_words
    rng = np.random.default_rng(7 + ones)
    row = np.full(n, 0xFFFFFFFF if ones else 0, np.uint32)
    spots = rng.choice(n, 50, replace=False)
    row[spots] = rng.integers(0, 2**32, 50, dtype=np.uint64).astype(np.uint32)
    entry = inner._pack(row)
    assert len(entry) == 4 and bool(entry[2]) == ones  # packed over the base asked for
    whole = inner._pack(rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32))
    assert len(whole) == 2  # random words: no smaller packed
    for e in (entry, whole):
        acc = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        expected = acc | _whole(inner, e)
        _or_entry(acc, e)
        assert np.array_equal(acc, expected)
