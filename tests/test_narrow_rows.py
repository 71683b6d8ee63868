"""Rows of a regular grammar's narrow states (leapgen.compiler.compact_rows.narrow_byte / narrow_row).

A state from which no byte, or one byte and at most one after it, may follow (a JSON key's letters,
``":``, the end) takes its row from a walk of that byte's subtree of the vocabulary trie only, kept
packed. Checked here: every state's first-visit row of a few grammars against a brute-force walk of
every token through the DFA (``_brute_force`` of test_structural_tag_masks, written in the tests),
and the narrow classification against numpy on the transition table.
"""

from __future__ import annotations

import numpy as np
import pytest

from leapgen import GrammarCompiler
from leapgen.compiler.compact_rows import narrow_byte
from test_mask_exactness import unpack, vocab_tables
from test_structural_tag_masks import _brute_force

SCHEMAS = [
    {"type": "object", "required": ["name", "count"],
     "properties": {"name": {"type": "string"}, "count": {"type": "integer"}}},
    {"type": "object", "required": ["status"],
     "properties": {"status": {"enum": ["approved", "rejected", "pending review"]}}},
    {"type": "array", "items": {"const": "x"}, "maxItems": 3},
]


@pytest.fixture(scope="module")
def vocab():
    return vocab_tables("llama3")


def _expected_narrow(trans: np.ndarray, state: int, lead: int) -> int:
    """narrow_byte's answer, from numpy: -1 no live byte, the byte where one (not ``lead``) and at
    most one after it, else -2."""
    live = np.flatnonzero(trans[state] >= 0)
    if len(live) == 0:
        return -1
    if len(live) > 1 or live[0] == lead:
        return -2
    return int(live[0]) if (trans[trans[state, live[0]]] >= 0).sum() <= 1 else -2


@pytest.mark.parametrize("schema", SCHEMAS, ids=["keys", "enum", "const-items"])
def test_every_state_row_is_exact_and_narrow_states_are_kept_packed(vocab, schema):
    compiled = GrammarCompiler(vocab.info).compile_json_schema(schema, any_whitespace=False)
    has_ff = np.array([0xFF in vocab.token_bytes[i] for i in vocab.by_len_ids.tolist()], bool)
    words = (vocab.info.vocab_size + 31) // 32
    trans = compiled.dfa.trans
    narrow = [s for s in range(compiled.n_states) if _expected_narrow(trans, s, -1) > -2]
    assert len(narrow) >= 3, "the grammar has narrow states to check"
    for s in range(compiled.n_states):
        assert narrow_byte(compiled.trans_flat, s, -1) == _expected_narrow(trans, s, -1), f"state {s}"
        out = np.full(words, -1, np.int32)  # garbage: every bit set
        compiled.write_row(s, out)
        want = _brute_force(vocab, compiled, s, {}, has_ff)
        bad = np.flatnonzero(unpack(out)[:vocab.info.vocab_size] != want)
        assert bad.size == 0, f"state {s}: tokens {bad[:8].tolist()}"
    for s in narrow:
        entry = compiled._rows[s]
        assert len(entry) == 4 and not entry[2], f"state {s}: a narrow row is kept packed, zero base"
        assert np.all(np.diff(entry[0].astype(np.int64)) > 0), "its words in increasing order"


def test_narrow_byte_refuses_a_token_literals_lead_and_a_wide_second_byte():
    trans = np.full((5, 256), -1, np.int32)
    trans[0, ord("a")] = 1  # "a" then "b": narrow
    trans[1, ord("b")] = 2
    trans[2, ord('"')] = 3  # a quote then any letter: wide after its one byte
    trans[3, ord("a"):ord("z") + 1] = 3
    trans[4, 0xFF] = 0  # a token literal's lead byte
    flat = trans.reshape(-1)
    assert narrow_byte(flat, 0, -1) == ord("a")
    assert narrow_byte(flat, 1, -1) == ord("b")
    assert narrow_byte(flat, 2, -1) == -2
    assert narrow_byte(flat, 3, -1) == -2
    assert narrow_byte(flat, 4, -1) == 0xFF
    assert narrow_byte(flat, 4, 0xFF) == -2
