"""Whole rows shared by content across the grammars of one vocabulary (leapgen.compiler.shared_rows).

A dense row (a string body's) that one grammar computed is kept once: a second grammar of the same
compiler whose state has the same row keeps the same read-only array. Sharing is exact: the table
compares rows word by word, so with every row forced onto one hash the masks still equal a
brute-force walk of every token through the DFA (``_brute_force`` of test_structural_tag_masks,
written in the tests). The table's kernels are checked against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from leapgen import GrammarCompiler
from leapgen.compiler import shared_rows
from leapgen.compiler.compact_rows import matches_whole, row_hash
from leapgen.compiler.shared_rows import SharedRows
from test_mask_exactness import unpack, vocab_tables
from test_structural_tag_masks import _brute_force

WORDS = 40


def _schema(name: str) -> dict:
    """A string (its body's row is dense) and a lower-case note (another dense row)."""
    return {"type": "object", "required": [name, "note"],
            "properties": {name: {"type": "string"}, "note": {"type": "string", "pattern": "^[a-z ]*$"}}}


@pytest.fixture(scope="module")
def vocab():
    return vocab_tables("llama3")


def _row(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 32, WORDS, dtype=np.uint64).astype(np.uint32)


def test_row_hash_sees_every_bit_and_matches_whole_is_equality():
    salt = np.random.default_rng(1).integers(0, 1 << 63, WORDS, dtype=np.uint64) | np.uint64(1)
    row = _row(2)
    hashes = {int(row_hash(row, salt))}
    for w in range(WORDS):
        for bit in (0, 13, 31):
            other = row.copy()
            other[w] ^= np.uint32(1 << bit)
            hashes.add(int(row_hash(other, salt)))
            assert not matches_whole(row, other) and matches_whole(other, other.copy())
    assert len(hashes) == 1 + 3 * WORDS  # every word's every tested bit changes the hash
    swapped = row.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    assert row_hash(swapped, salt) != row_hash(row, salt)  # positions count


def test_found_only_when_equal_even_on_one_hash(monkeypatch):
    monkeypatch.setattr(shared_rows, "row_hash", lambda words, salt: 7)  # every row collides
    table = SharedRows(WORDS)
    a, b = _row(3), _row(4)
    assert table.find(a) == (None, 7)
    entry = table.add(7, (a.copy().view(np.int32), True))
    assert not entry[0].flags.writeable
    assert table.find(a.copy())[0] is entry
    assert table.find(b)[0] is None  # same hash, another row: not shared
    assert (table.hits, table.misses) == (1, 2)
    with pytest.raises(ValueError, match="words"):
        table.find(a[:-1])


def test_least_recently_used_rows_go_first():
    table = SharedRows(WORDS, max_bytes=2 * 4 * WORDS)  # two rows
    rows = [_row(10 + i) for i in range(3)]
    keys = []
    for r in rows[:2]:
        _, key = table.find(r)
        keys.append(key)
        table.add(key, (r.copy().view(np.int32), True))
    assert table.find(rows[0])[0] is not None  # row 0 used last: row 1 goes
    _, key = table.find(rows[2])
    table.add(key, (rows[2].copy().view(np.int32), False))
    assert len(table) == 2 and table.find(rows[1])[0] is None and table.find(rows[0])[0] is not None


def _body_state(compiled) -> int:
    """The string body's state: the one from which most bytes may follow."""
    return int(np.argmax((compiled.dfa.trans >= 0).sum(axis=1)))


@pytest.mark.parametrize("collide", [False, True])
def test_two_grammars_share_a_string_body_row_and_every_row_is_exact(vocab, monkeypatch, collide):
    if collide:
        monkeypatch.setattr(shared_rows, "row_hash", lambda words, salt: 7)
    compiler = GrammarCompiler(vocab.info)
    has_ff = np.array([0xFF in vocab.token_bytes[i] for i in vocab.by_len_ids.tolist()], bool)
    words = (vocab.info.vocab_size + 31) // 32
    grammars = [compiler.compile_json_schema(_schema(name)) for name in ("city", "name", "town")]
    bodies = []
    for compiled in grammars:
        for s in range(compiled.n_states):
            out = np.full(words, -1, np.int32)  # garbage: every bit set
            compiled.write_row(s, out)
            want = _brute_force(vocab, compiled, s, {}, has_ff)
            bad = np.flatnonzero(unpack(out)[:vocab.info.vocab_size] != want)
            assert bad.size == 0, f"state {s}: tokens {bad[:8].tolist()}"
        entry = compiled._rows[_body_state(compiled)]
        assert len(entry) == 2, "a string body's row is dense: kept whole"
        bodies.append(entry[0])
    assert not bodies[0].flags.writeable
    dense = {id(e[0]) for g in grammars for e in g._rows.values() if len(e) == 2}
    if collide:  # each new row replaces the one kept under the shared hash: exact, rarely shared
        assert len(compiler.token_index.shared_rows) == 1 and len(dense) >= 2
    else:
        assert bodies[0] is bodies[1] is bodies[2]
