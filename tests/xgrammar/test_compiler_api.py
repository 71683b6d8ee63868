"""GrammarCompiler, Grammar, TokenizerInfo and the bitmask functions, run on xgrammar
and on leapgen.xgrammar.

Ported (rewritten on our own data) from the engine-facing parts of xgrammar's
``tests/python/test_grammar_compiler.py`` (compile entry points, the cache and
its size, ``Grammar`` inputs, bad arguments), ``test_tokenizer_info.py``
(constructor, decoded vocabulary, stop / special ids, metadata, vocab sizes),
``test_grammar_union_concat.py`` and ``test_token_bitmask_operations.py``
(allocate, reset, shape, apply with indices, vocab_size, padding, devices).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from xgr_pair import allowed, mask_of

VOCAB = ["</s>", "a", "b", "ab", "1", "12", "{", "}", '"', ":", ",", " ", "x"]


def _compiler(xgr, **kwargs):
    return xgr.GrammarCompiler(xgr.TokenizerInfo(VOCAB), max_threads=1, **kwargs)


def _verdict(xgr, compiled, text: str) -> bool:
    m = xgr.GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


# -- GrammarCompiler ------------------------------------------------------------------------------

def test_compile_entry_points(xgr):
    c = _compiler(xgr)
    assert _verdict(xgr, c.compile_grammar('root ::= "a" [0-9]+'), "a12")
    assert _verdict(xgr, c.compile_grammar(xgr.Grammar.from_ebnf('root ::= "a" [0-9]+')), "a12")
    assert _verdict(xgr, c.compile_grammar('start ::= "x"', root_rule_name="start"), "x")
    assert _verdict(xgr, c.compile_regex(r"a\d{2}"), "a12")
    assert not _verdict(xgr, c.compile_regex(r"a\d{2}"), "a1")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert _verdict(xgr, c.compile_json_schema(schema), '{"a": 12}')
    assert _verdict(xgr, c.compile_json_schema(json.dumps(schema), any_whitespace=False), '{"a": 12}')
    assert not _verdict(xgr, c.compile_json_schema(schema, any_whitespace=False), '{"a":12}')  # (", ", ": ")
    assert _verdict(xgr, c.compile_json_schema(schema, any_whitespace=False, separators=(",", ":")), '{"a":12}')
    assert _verdict(xgr, c.compile_json_schema(schema, any_whitespace=False, indent=2), '{\n  "a": 12\n}')
    assert _verdict(xgr, c.compile_builtin_json_grammar(), '{"b": [1, {}]}')
    compiled = c.compile_regex("ab")
    assert isinstance(compiled, xgr.CompiledGrammar)
    assert compiled.tokenizer_info.vocab_size == len(VOCAB)
    assert isinstance(compiled.grammar, xgr.Grammar) and compiled.memory_size_bytes > 0


def test_empty_vocabulary_matches_strings(xgr):
    # xgrammar.testing's _get_matcher_from_grammar: TokenizerInfo([]), a matcher that only accepts strings.
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False).compile_grammar('root ::= "a" [0-9]+')
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    assert m.accept_string("a") and not m.is_terminated()
    assert m.accept_string("12") and m.is_terminated()
    assert not xgr.GrammarMatcher(compiled, terminate_without_stop_token=True).accept_string("b")


def test_recursion_depth_setting(xgr):
    before = xgr.get_max_recursion_depth()
    with xgr.max_recursion_depth(50):
        assert xgr.get_max_recursion_depth() == 50
    assert xgr.get_max_recursion_depth() == before
    for bad in (-1, 0, 100_000_000):
        with pytest.raises(RuntimeError):
            xgr.set_max_recursion_depth(bad)
    assert xgr.get_max_recursion_depth() == before


def test_pydantic_schema(xgr):
    pydantic = pytest.importorskip("pydantic")

    class Point(pydantic.BaseModel):
        x: int
        y: int

    compiled = _compiler(xgr).compile_json_schema(Point)
    assert _verdict(xgr, compiled, '{"x": 1, "y": 2}')
    assert not _verdict(xgr, compiled, '{"y": 2, "x": 1}')


def test_cache(xgr, is_leapgen):
    c = _compiler(xgr)
    assert c.get_cache_size_bytes() == 0 and c.cache_limit_bytes == -1
    first = c.compile_json_schema({"type": "string"})
    size = c.get_cache_size_bytes()
    assert size > 0
    again = c.compile_json_schema({"type": "string"})
    assert c.get_cache_size_bytes() == size
    assert mask_of(xgr, xgr.GrammarMatcher(first), len(VOCAB)) == mask_of(xgr, xgr.GrammarMatcher(again), len(VOCAB))
    c.clear_cache()
    assert c.get_cache_size_bytes() <= size  # xgrammar keeps a per-rule cache: not 0 there
    if is_leapgen:
        assert c.get_cache_size_bytes() == 0
    limited = _compiler(xgr, cache_limit_bytes=1 << 20)
    assert limited.cache_limit_bytes == 1 << 20
    off = _compiler(xgr, cache_enabled=False)
    off.compile_regex("a+")
    assert off.get_cache_size_bytes() == 0


def test_bad_arguments(xgr):
    with pytest.raises(ValueError):
        xgr.GrammarCompiler(VOCAB)  # a vocabulary, not a TokenizerInfo
    with pytest.raises(ValueError):
        _compiler(xgr).compile_grammar(123)
    for bad in ('root ::= "a', "root ::= undefined_rule", 'start ::= "a"', 'root ::= "a"\nroot ::= "b"'):
        with pytest.raises(RuntimeError):
            _compiler(xgr).compile_grammar(bad)
    with pytest.raises(RuntimeError):
        _compiler(xgr).compile_regex("(ab")
    with pytest.raises(RuntimeError):
        _compiler(xgr).compile_json_schema('{"type": "foo"}')
    with pytest.raises(RuntimeError):
        _compiler(xgr).compile_json_schema("{not json")


# -- Grammar --------------------------------------------------------------------------------------

def test_grammar_constructors_and_str(xgr):
    c = _compiler(xgr)
    for g, text in [(xgr.Grammar.from_ebnf('root ::= "a" b\nb ::= "b"'), "ab"),
                    (xgr.Grammar.from_regex("[ab]+1"), "ab1"),
                    (xgr.Grammar.from_json_schema({"type": "integer"}), "12"),
                    (xgr.Grammar.builtin_json_grammar(), "{}")]:
        assert isinstance(str(g), str) and "::=" in str(g)
        assert _verdict(xgr, c.compile_grammar(g), text)
        assert _verdict(xgr, c.compile_grammar(xgr.Grammar.from_ebnf(str(g))), text)  # str(g) is EBNF again


def test_union_and_concat(xgr):
    c = _compiler(xgr)
    a = xgr.Grammar.from_ebnf('root ::= "a" | "b"')
    num = xgr.Grammar.from_regex("1[0-9]*")
    rec = xgr.Grammar.from_ebnf('root ::= "{" root "}" | "x"')
    union = c.compile_grammar(xgr.Grammar.union(a, num, rec))
    for text, ok in [("a", True), ("12", True), ("{{x}}", True), ("ab", False), ("{x", False)]:
        assert _verdict(xgr, union, text) is ok
    concat = c.compile_grammar(xgr.Grammar.concat(a, num, rec))
    for text, ok in [("a1{x}", True), ("b12x", True), ("a{x}", False), ("1a{x}", False)]:
        assert _verdict(xgr, concat, text) is ok


# -- TokenizerInfo --------------------------------------------------------------------------------

def test_tokenizer_info_constructor(xgr):
    vocab = ["<s>", "</s>", "\u2581a", "<0x0A>", "b", "", "<|endoftext|>"]
    raw = xgr.TokenizerInfo(vocab)
    assert raw.vocab_type == xgr.VocabType.RAW and raw.vocab_size == 7 and not raw.add_prefix_space
    assert raw.decoded_vocab[2] == "\u2581a".encode() and raw.decoded_vocab[3] == b"<0x0A>"
    assert raw.stop_token_ids == [1, 6] and raw.special_token_ids == [5]
    sp = xgr.TokenizerInfo(vocab, xgr.VocabType.BYTE_FALLBACK, vocab_size=9, stop_token_ids=[1],
                           add_prefix_space=True)
    assert sp.decoded_vocab[2] == b" a" and sp.decoded_vocab[3] == b"\n"
    assert sp.stop_token_ids == [1] and sp.special_token_ids == [5, 7, 8] and sp.add_prefix_space
    bl = xgr.TokenizerInfo(["\u0120a", "\u010a"], xgr.VocabType.BYTE_LEVEL)
    assert bl.decoded_vocab == [b" a", b"\n"]
    with pytest.raises(RuntimeError):
        xgr.TokenizerInfo(vocab, vocab_size=3)  # smaller than the vocabulary


def test_tokenizer_info_metadata(xgr):
    info = xgr.TokenizerInfo(["</s>", "a", "\u2581b"], xgr.VocabType.BYTE_FALLBACK, vocab_size=40, add_prefix_space=True)
    meta = json.loads(info.dump_metadata())
    assert {k: meta[k] for k in ("vocab_type", "vocab_size", "add_prefix_space", "stop_token_ids")} == \
        {"vocab_type": 1, "vocab_size": 40, "add_prefix_space": True, "stop_token_ids": [0]}
    again = xgr.TokenizerInfo.from_vocab_and_metadata(["</s>", "a", "\u2581b"], info.dump_metadata())
    assert again.vocab_size == 40 and again.decoded_vocab == info.decoded_vocab
    assert again.stop_token_ids == [0] and again.vocab_type == xgr.VocabType.BYTE_FALLBACK


def test_from_huggingface_takes_the_eos_alone(xgr):
    from vocab_loaders import load_hf_tokenizer

    tok = load_hf_tokenizer("qwen")
    info = xgr.TokenizerInfo.from_huggingface(tok)
    assert info.stop_token_ids == [tok.eos_token_id]
    assert info.vocab_type == xgr.VocabType.BYTE_LEVEL and info.vocab_size == len(tok.get_vocab())
    think = tok.convert_tokens_to_ids("<think>")
    assert info.decoded_vocab[think] == b"<think>"
    padded = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=151936, stop_token_ids=[151643, 151645])
    assert padded.vocab_size == 151936 and padded.stop_token_ids == [151643, 151645]
    assert 151935 in padded.special_token_ids
    smaller = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=151665)
    assert smaller.vocab_size == 151665
    with pytest.raises(ValueError):
        xgr.TokenizerInfo.from_huggingface(tok, stop_token_ids=[])


def test_added_tokens_that_are_not_special_match_their_text(xgr):
    """Qwen3's ``<think>`` is an added token with special=False: text for both."""
    from vocab_loaders import load_hf_tokenizer

    tok = load_hf_tokenizer("qwen")
    info = xgr.TokenizerInfo.from_huggingface(tok)
    think = tok.convert_tokens_to_ids("<think>")
    compiled = xgr.GrammarCompiler(info, max_threads=1).compile_grammar('root ::= "<think>" [a-z]*')
    m = xgr.GrammarMatcher(compiled)
    assert think in mask_of(xgr, m, info.vocab_size)
    assert m.accept_token(think)


# -- bitmask functions ---------------------------------------------------------------------------

def test_allocate_reset_shape(xgr):
    import torch

    assert xgr.get_bitmask_shape(3, 100) == (3, 4)
    bm = xgr.allocate_token_bitmask(3, 100)
    assert bm.shape == (3, 4) and bm.dtype == torch.int32 and bm.device.type == "cpu" and (bm == -1).all()
    assert xgr.bitmask_dtype == torch.int32
    bm.zero_()
    xgr.reset_token_bitmask(bm)
    assert (bm == -1).all()


def _bitmask_of(allowed_rows: list[list[int]], vocab_size: int):
    import torch

    out = torch.zeros((len(allowed_rows), (vocab_size + 31) // 32), dtype=torch.int32)
    arr = out.numpy().view(np.uint32)
    for r, ids in enumerate(allowed_rows):
        for i in ids:
            arr[r, i >> 5] |= np.uint32(1 << (i & 31))
    return out


def test_apply_token_bitmask_inplace(xgr):
    import torch

    V = 70
    rows = [[0, 5, 69], [1, 2, 33], [64]]
    bm = _bitmask_of(rows, V)
    logits = torch.randn(3, V)
    expect = logits.clone()
    for r, ids in enumerate(rows):
        keep = torch.zeros(V, dtype=torch.bool)
        keep[ids] = True
        expect[r][~keep] = float("-inf")
    got = logits.clone()
    xgr.apply_token_bitmask_inplace(got, bm)
    torch.testing.assert_close(got, expect)
    got = logits.clone()
    xgr.apply_token_bitmask_inplace(got, bm, indices=[0, 2])
    torch.testing.assert_close(got[[0, 2]], expect[[0, 2]])
    torch.testing.assert_close(got[1], logits[1])
    got = logits.clone()
    xgr.apply_token_bitmask_inplace(got, bm, indices=torch.tensor([1]))
    torch.testing.assert_close(got[1], expect[1])
    one = logits[0].clone()
    xgr.apply_token_bitmask_inplace(one, bm[0])
    torch.testing.assert_close(one, expect[0])
    got = logits.clone()
    xgr.apply_token_bitmask_inplace(got, bm, vocab_size=40)  # only the first 40 columns
    torch.testing.assert_close(got[:, :40], expect[:, :40])
    torch.testing.assert_close(got[:, 40:], logits[:, 40:])


def test_logits_wider_than_the_bitmask_keep_their_tail(xgr):
    import torch

    bm = _bitmask_of([[1]], 32)  # one word: 32 tokens
    logits = torch.zeros(1, 40)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xgr.apply_token_bitmask_inplace(logits, bm)
    assert caught  # a warning says the tail is left unmasked
    assert torch.isinf(logits[0, :32]).sum() == 31 and torch.isfinite(logits[0, 32:]).all()


def test_apply_bad_arguments(xgr):
    import torch

    bm = _bitmask_of([[1]], 32)
    with pytest.raises(ValueError):
        xgr.apply_token_bitmask_inplace(torch.zeros(1, 32), bm, backend="nope")
    if torch.cuda.is_available():
        with pytest.raises(ValueError):
            xgr.apply_token_bitmask_inplace(torch.zeros(1, 32, device="cuda"), bm)  # not on one device


def test_fill_then_apply(xgr):
    import torch

    c = _compiler(xgr)
    m = xgr.GrammarMatcher(c.compile_regex("ab?1"))
    bm = xgr.allocate_token_bitmask(1, len(VOCAB))
    assert m.fill_next_token_bitmask(bm)
    logits = torch.zeros(1, len(VOCAB))
    xgr.apply_token_bitmask_inplace(logits, bm)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == allowed(bm, len(VOCAB)).tolist() == [1, 3]
