"""Rows computed at a structural tag's compile (RegularGrammar.precompute_rows, kept compact) are exact.

A Hermes-style tool call with flexible JSON whitespace (a state per count of whitespace still
allowed), numbers, an enum, a string with escapes and a bounded string: every state's row comes from
the compact store, and a seeded sample of states from each kind (forced text, whitespace, wider)
equals a brute-force walk of every token through the compiled DFA, written in the tests
(``_brute_force`` of test_structural_tag_masks: marker tokens by their literal's bytes, tokens with a
0xFF byte never, stop tokens where the DFA accepts), on Llama-3, Mistral and Qwen (whose
``<tool_call>`` and ``</tool_call>`` are added tokens: the rows hold token literals).
"""

from __future__ import annotations

import numpy as np
import pytest

from leapgen import GrammarCompiler, GrammarMatcher
from leapgen.compiler.compact_rows import CompactRows
from test_mask_exactness import unpack, vocab_tables
from test_structural_tag_masks import _brute_force, _literal

SCHEMA = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer"}, "lat": {"type": "number"}, "note": {"type": "string"}},
    "required": ["city", "days"]}
TAG = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
    {"begin": '<tool_call>\n{"name": "get_weather", "arguments": ',
     "content": {"type": "json_schema", "json_schema": SCHEMA}, "end": "}\n</tool_call>"}]}}
PER_KIND = 12


@pytest.fixture(scope="module", params=["llama3", "mistral", "qwen"])
def compiled_and_vocab(request):
    v = vocab_tables(request.param)
    return GrammarCompiler(v.info).compile_structural_tag(TAG), v, request.param


def test_every_state_is_precomputed_and_sampled_rows_are_exact(compiled_and_vocab):
    compiled, v, family = compiled_and_vocab
    assert compiled.is_regular
    literals = {t: _literal(t) for t in compiled.token_literals}
    assert bool(literals) == (family == "qwen")  # Qwen's markers are tokens
    has_ff = np.array([0xFF in v.token_bytes[i] for i in v.by_len_ids.tolist()], bool)
    assert all(compiled.has_bitmask_row(s) for s in range(compiled.n_states))
    live = (compiled.dfa.trans >= 0).sum(axis=1)
    kinds = {"forced": live == 1, "whitespace": (live > 1) & (live < 10), "wide": live >= 10}
    rng = np.random.default_rng(17)
    words = (v.info.vocab_size + 31) // 32
    for kind, where in kinds.items():
        states = np.flatnonzero(where)
        assert len(states) >= 3, kind
        for s in rng.choice(states, min(PER_KIND, len(states)), replace=False).tolist():
            out = np.zeros(words, np.int32)
            need_apply = compiled.write_row(s, out)
            row, need = compiled.bitmask_row(s)
            assert (row == out).all() and need == need_apply
            got = unpack(out)[:v.info.vocab_size]
            bad = np.flatnonzero(got != _brute_force(v, compiled, s, literals, has_ff))
            assert bad.size == 0, f"{kind} state {s}: " + ", ".join(
                f"{i} {v.token_bytes[i]!r} mask={got[i]}" for i in bad[:8].tolist())
            assert need_apply == (not got.all())


def test_a_walk_reads_rows_without_computing_any(compiled_and_vocab):
    compiled, v, _ = compiled_and_vocab
    m = GrammarMatcher(compiled)
    bitmask = np.zeros((1, (v.info.vocab_size + 31) // 32), np.int32)
    misses = compiled.mask_cache_misses
    for ch in 'Sure. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>':
        m.fill_next_token_bitmask(bitmask, 0)
        assert m.accept_string(ch)
    assert compiled.mask_cache_misses == misses


def test_compact_rows_round_trip():
    rng = np.random.default_rng(0)
    n_words = 40
    sparse = np.zeros(n_words, np.uint32)
    sparse[[3, 17]] = [5, 0xFFFFFFFF]
    dense = np.full(n_words, 0xFFFFFFFF, np.uint32)
    dense[[0, 39]] = [0, 12345]
    mixed = rng.integers(0, 1 << 32, n_words, dtype=np.uint64).astype(np.uint32)
    store = CompactRows(n_words, 6, 4)
    for state, words in ((0, sparse), (2, dense), (5, mixed), (3, np.zeros(n_words, np.uint32))):
        store.add(state, words, state != 3)
    with pytest.raises(ValueError, match="added twice"):
        store.add(0, sparse, True)
    store.done()
    for state, words in ((0, sparse), (2, dense), (5, mixed), (3, np.zeros(n_words, np.uint32))):
        row, need_apply = store.row(state)
        assert row.dtype == np.uint32 and (row == words).all() and need_apply == (state != 3)
    assert store.row(1) is None and not store.holds(4) and store.holds(5)
    assert store.nbytes < 4 * n_words * 4  # the dense row is kept as its two words that are not all ones


def test_forced_text_rows_keep_tokens_with_a_0xff_byte_out():
    """Before ``a`` then the ``<think>`` marker (an added token, so its literal's lead byte 0xFF may
    follow ``a``), the ordinary token ``a\\xff`` walks the DFA but is no text: it stays out of the
    forced state's row, which the compile computed in the one call for forced text."""
    from leapgen import TokenizerInfo

    vocab = [bytes([b]) for b in range(256)] + [b"a\xff", b"ab", "<think>", "</think>", "<|end|>"]
    info = TokenizerInfo(vocab, "raw", stop_token_ids=[260], special_token_ids=[258, 259, 260])
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "a"},
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}]}}
    compiled = GrammarCompiler(info).compile_structural_tag(tag)
    assert compiled.is_regular and 258 in compiled.token_literals
    assert (compiled.dfa.trans[compiled.start_state] >= 0).sum() == 1 and compiled.has_bitmask_row(
        compiled.start_state)
    bitmask = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)
    GrammarMatcher(compiled).fill_next_token_bitmask(bitmask, 0)
    got = set(np.flatnonzero(unpack(bitmask[0])[:info.vocab_size]).tolist())
    assert got == {ord("a")}, got  # not 256 (a\xff), not 257 (ab)
    m = GrammarMatcher(compiled)
    assert m.accept_string("a") and m.accept_token(258)
