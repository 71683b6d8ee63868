"""The walks behind context-free masks: per-frame sorting and the uncertain tokens.

On configurations of recursive grammars (the builtin JSON grammar, nested
arithmetic) reached by seeded walks, the pushdown walk kernel
(``TokenIndex.pushdown_walk``, also with too few stack frames handed over,
where it must give up rather than guess), the numba trie walk over a lazily
built automaton of configurations (``lazy_token_walk``), its numpy-only
fallback (``use_trie=False``) and a literal ``compiled.walk(config,
token_bytes)`` per token agree, for every token of the vocabulary as
candidates and for a random half of them. Without the trie kernels, frames
are sorted more coarsely and the masks agree.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from leapgen import GrammarMatcher
from leapgen.compiler.token_index import TokenIndex
from leapgen.grammar.builtin import JSON_GBNF
from tests.cfg.small_grammars import ARITH_GBNF

pytest.importorskip("numba")

PREFIXES = {JSON_GBNF: [b"", b'{"a": [1, {"b": "x', b"[[[", b'{"k": tr'],
            ARITH_GBNF: [b"", b"((1 + ", b"-(2.5", b"(3)"]}


@functools.lru_cache(maxsize=None)
def numpy_index(family: str) -> TokenIndex:
    from vocab_loaders import load_tokenizer_info

    return TokenIndex(load_tokenizer_info(family), use_trie=False)


def words_of(ids: np.ndarray, n_words: int) -> np.ndarray:
    out = np.zeros(n_words, np.uint32)
    np.bitwise_or.at(out, ids >> 5, np.uint32(1) << (ids & 31).astype(np.uint32))
    return out


@pytest.mark.parametrize("family", ["gpt2"])
@pytest.mark.parametrize("grammar", [JSON_GBNF, ARITH_GBNF], ids=["json", "arith"])
def test_trie_fallback_and_literal_walks_agree(grammar_compiler, family, grammar):
    compiled = grammar_compiler(family).compile_grammar(grammar)
    assert not compiled.is_regular
    index, fallback = compiled.token_index, numpy_index(family)
    token_bytes = compiled.tokenizer_info.token_bytes
    walkable = np.array([i for i, b in enumerate(token_bytes) if b], np.int64)
    rng = np.random.default_rng(0)
    gave_up = False
    for prefix in PREFIXES[grammar]:
        m = GrammarMatcher(compiled)
        assert m.accept_string(prefix)
        config = m.state
        for ids in (walkable, np.sort(rng.choice(walkable, len(walkable) // 2, replace=False))):
            candidates = words_of(ids, index.bitmask_words)
            got = index.lazy_token_walk(config, compiled.step, candidates)
            assert np.array_equal(got, fallback.lazy_token_walk(config, compiled.step, candidates)), prefix
            pda = compiled.pda
            kernel, _, _ = index.pushdown_walk(compiled._automaton, pda.stack_arrays(config, 256),
                                               pda.max_stack_depth, candidates)
            assert kernel is not None and np.array_equal(kernel, got), prefix
            own, _, _ = index.pushdown_walk(compiled._automaton, pda.stack_arrays(config, 256),
                                            pda.max_stack_depth, candidates, walk=index.candidate_walk(candidates))
            assert own is not None and np.array_equal(own, got), prefix  # over the candidates' own trie
            short, _, _ = index.pushdown_walk(compiled._automaton, pda.stack_arrays(config, 1),
                                              pda.max_stack_depth, candidates)
            assert short is None or np.array_equal(short, got), prefix
            gave_up |= short is None
            sample = rng.choice(ids, 400, replace=False)
            want = [compiled.walk(config, token_bytes[t]) is not None for t in sample.tolist()]
            have = (got[sample >> 5] >> (sample & 31).astype(np.uint32)) & 1
            assert have.astype(bool).tolist() == want, prefix
            assert not (got & ~candidates).any()
    assert gave_up  # a token popping below the one frame handed over


@pytest.mark.parametrize("family", ["gpt2"])
@pytest.mark.parametrize("grammar", [JSON_GBNF, ARITH_GBNF], ids=["json", "arith"])
def test_masks_without_the_trie_kernels_agree(grammar_compiler, family, grammar):
    """The numpy-only path sorts frames more coarsely (a token is certain only inside the frame's own
    rule), and the masks come out the same."""
    from leapgen.compiler.compiled_cfg import ContextFreeGrammar

    compiled = grammar_compiler(family).compile_grammar(grammar)
    slow = ContextFreeGrammar(compiled.pda, compiled.tokenizer_info, numpy_index(family), kind="ebnf")
    live = np.ones(len(compiled.pda.has_bytes_flat), np.int8)
    for g in range(len(live)):
        fine = compiled.token_index.frame_sets(compiled._automaton, g, live)[0]
        coarse = slow.token_index.frame_sets(compiled._automaton, g, live)[0]
        assert not (coarse & ~fine).any(), g  # the kernel's certain tokens include the coarse ones
    for prefix in PREFIXES[grammar]:
        m = GrammarMatcher(compiled)
        assert m.accept_string(prefix)
        for data in (b"", b" ", b"1", b"[", b'"'):
            config = compiled.walk(m.state, data)
            if config is not None:
                assert np.array_equal(compiled.bitmask_row(config)[0], slow.bitmask_row(config)[0]), (prefix, data)


@pytest.mark.parametrize("family", ["gpt2"])
def test_walk_results_are_reused_across_depths(grammar_compiler, family):
    """The pushdown walk of a string inside 1..12 nested arrays reads only the top frames: one result
    serves every depth, and each mask equals a grammar's that computed it afresh."""
    from leapgen.compiler.compiled_cfg import ContextFreeGrammar

    compiled = grammar_compiler(family).compile_grammar(JSON_GBNF)
    before = len(compiled._walks)
    for depth in range(1, 13):
        config = compiled.walk(compiled.start_state, b"[" * depth + b'"ab')
        fresh = ContextFreeGrammar(compiled.pda, compiled.tokenizer_info, compiled.token_index, kind="ebnf")
        assert np.array_equal(compiled.bitmask_row(config)[0], fresh.bitmask_row(config)[0]), depth
    assert len(compiled._walks) - before <= 3
