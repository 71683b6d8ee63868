"""Packed token bitmasks (issue #2): allocation, ``apply_token_bitmask_inplace``
against a naive per-token loop, and interoperability with xgrammar's bitmasks
on the Llama-3 vocabulary."""

from __future__ import annotations

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="leapgen.bitmask needs torch (pip install torch)")

from leapgen import GrammarMatcher, allocate_token_bitmask, apply_token_bitmask_inplace  # noqa: E402
from leapgen.bitmask import bitmask_to_bool, reset_token_bitmask  # noqa: E402


def naive_apply(logits: torch.Tensor, bitmask: torch.Tensor, rows_to_bitmask: dict[int, int]) -> torch.Tensor:
    """Expected result: for logits row r masked with bitmask row b, token j keeps
    its logit iff bit j % 32 of word j // 32 is set (j >= 32 * W: masked)."""
    out = logits.clone()
    words = bitmask.shape[-1]
    bm = bitmask.tolist()
    for r, b in rows_to_bitmask.items():
        for j in range(logits.shape[-1]):
            allowed = j < 32 * words and (bm[b][j // 32] >> (j % 32)) & 1
            if not allowed:
                out[r, j] = float("-inf")
    return out


def random_bitmask(rng: np.random.Generator, rows: int, words: int) -> torch.Tensor:
    return torch.from_numpy(rng.integers(-2**31, 2**31, size=(rows, words), dtype=np.int64).astype(np.int32))


# ---------------------------------------------------------------- allocate / reset / unpack


@pytest.mark.parametrize("batch, vocab", [(1, 1), (1, 32), (2, 33), (3, 50257), (4, 128256), (1, 151936)])
def test_allocate_shape_dtype_all_allowed(batch, vocab):
    bm = allocate_token_bitmask(batch, vocab)
    assert bm.shape == (batch, (vocab + 31) // 32) and bm.dtype == torch.int32 and bm.device.type == "cpu"
    assert bool((bm == -1).all())
    assert bool(bitmask_to_bool(bm, vocab).all())


@pytest.mark.parametrize("batch, vocab", [(0, 10), (1, 0), (-1, 5), (2, -32)])
def test_allocate_rejects_bad_sizes(batch, vocab):
    with pytest.raises(ValueError):
        allocate_token_bitmask(batch, vocab)


def test_reset_and_bitmask_to_bool():
    bm = torch.zeros((2, 3), dtype=torch.int32)
    bm[0, 0] = 0b101
    bm[1, 2] = -2**31  # bit 31 of word 2 = token 95
    mask = bitmask_to_bool(bm, 100)
    assert mask.shape == (2, 100) and mask.dtype == torch.bool
    assert mask[0].nonzero().flatten().tolist() == [0, 2]
    assert mask[1].nonzero().flatten().tolist() == [95]
    assert not mask[:, 96:].any()  # past 32 * W
    reset_token_bitmask(bm)
    assert bool((bm == -1).all())


# ---------------------------------------------------------------- apply_token_bitmask_inplace


@pytest.mark.parametrize("batch, vocab", [(1, 7), (3, 64), (4, 97), (2, 1000)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_apply_matches_naive_loop(batch, vocab, dtype):
    rng = np.random.default_rng(batch * 1000 + vocab)
    bm = random_bitmask(rng, batch, (vocab + 31) // 32)
    logits = torch.from_numpy(rng.normal(size=(batch, vocab))).to(dtype)
    want = naive_apply(logits, bm, {r: r for r in range(batch)})
    before = bm.clone()
    apply_token_bitmask_inplace(logits, bm)
    assert torch.equal(logits, want)
    assert torch.equal(bm, before), "the bitmask must not change"


def test_apply_all_ones_and_all_zeros():
    logits = torch.arange(70, dtype=torch.float32).reshape(1, 70)
    apply_token_bitmask_inplace(logits, allocate_token_bitmask(1, 70))
    assert torch.equal(logits, torch.arange(70, dtype=torch.float32).reshape(1, 70))
    apply_token_bitmask_inplace(logits, torch.zeros((1, 3), dtype=torch.int32))
    assert bool(torch.isneginf(logits).all())


def test_apply_with_indices_full_batch_bitmask():
    rng = np.random.default_rng(1)
    logits = torch.from_numpy(rng.normal(size=(5, 90))).float()
    bm = random_bitmask(rng, 5, 3)
    want = naive_apply(logits, bm, {1: 1, 3: 3, 4: 4})  # rows 0 and 2 untouched
    apply_token_bitmask_inplace(logits, bm, indices=[1, 3, 4])
    assert torch.equal(logits, want)


def test_apply_with_indices_out_of_range_raises():
    """indices name rows of both the logits and the bitmask (xgrammar's convention)."""
    rng = np.random.default_rng(2)
    logits = torch.from_numpy(rng.normal(size=(4, 40))).float()
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(logits, random_bitmask(rng, 2, 2), indices=[0, 2])


@pytest.mark.parametrize("vocab, logits_width", [(50257, 50304), (100, 160), (30, 33)])
def test_apply_logits_wider_than_bitmask(vocab, logits_width):
    """Padding columns past 32 * W are masked, the rest as the bitmask says."""
    rng = np.random.default_rng(vocab)
    words = (vocab + 31) // 32
    bm = random_bitmask(rng, 2, words)
    logits = torch.from_numpy(rng.normal(size=(2, logits_width))).float()
    want = naive_apply(logits, bm, {0: 0, 1: 1}) if logits_width <= 400 else None
    ref = logits.clone()
    apply_token_bitmask_inplace(logits, bm)
    assert bool(torch.isneginf(logits[:, 32 * words:]).all())
    if want is not None:
        assert torch.equal(logits, want)
    allowed = bitmask_to_bool(bm, logits_width)
    assert torch.equal(logits[allowed], ref[allowed]) and bool(torch.isneginf(logits[~allowed]).all())


def test_apply_one_dimensional_logits():
    rng = np.random.default_rng(3)
    bm = random_bitmask(rng, 1, 4)
    for bitmask in (bm, bm[0]):
        logits = torch.from_numpy(rng.normal(size=(120,))).float()
        want = naive_apply(logits.unsqueeze(0), bm, {0: 0})[0]
        apply_token_bitmask_inplace(logits, bitmask)
        assert logits.shape == (120,) and torch.equal(logits, want)


def test_apply_rejects_bad_input():
    logits = torch.zeros((2, 64))
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(logits, torch.zeros((2, 2), dtype=torch.int64))
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(logits, torch.zeros((3, 2), dtype=torch.int32))


@pytest.mark.parametrize("indices", [None, [0, 2, 3], [3], [2, 0]])
def test_apply_matches_xgrammar_apply(indices):
    """Same logits and bitmask: leapgen's result equals xgrammar's CPU kernel
    (logits row indices[i] masked with bitmask row indices[i])."""
    xgrammar = pytest.importorskip("xgrammar", reason="xgrammar is not installed (pip install xgrammar)")
    rng = np.random.default_rng(7)
    bm = random_bitmask(rng, 4, 32)
    logits = torch.from_numpy(rng.normal(size=(4, 1000))).float()
    theirs = logits.clone()
    apply_token_bitmask_inplace(logits, bm, indices=indices)
    xgrammar.apply_token_bitmask_inplace(theirs, bm, indices=indices)
    assert torch.equal(logits, theirs)


def test_fill_into_torch_bitmask_row(toy_compiler, toy_info):
    """The matcher writes into a CPU torch bitmask (shared numpy view), one row only."""
    m = GrammarMatcher(toy_compiler.compile_regex("ab|cd"))
    bm = allocate_token_bitmask(3, toy_info.vocab_size)
    assert m.fill_next_token_bitmask(bm, 1) is True
    assert bool((bm[0] == -1).all()) and bool((bm[2] == -1).all())
    allowed = bitmask_to_bool(bm[1], toy_info.vocab_size).nonzero().flatten().tolist()
    assert allowed == [ord("a"), ord("c"), toy_info.token_bytes.index(b"ab")]
    logits = torch.zeros(toy_info.vocab_size)
    apply_token_bitmask_inplace(logits, bm[1])
    assert torch.isfinite(logits).nonzero().flatten().tolist() == allowed


def test_need_apply_false_only_when_everything_is_allowed():
    from leapgen import GrammarCompiler, TokenizerInfo

    ascii_info = TokenizerInfo([bytes([b]) for b in range(128)] + [b"ab", b"<eos>"], stop_token_ids=[129])
    compiler = GrammarCompiler(ascii_info)
    bm = allocate_token_bitmask(1, ascii_info.vocab_size)
    anything = GrammarMatcher(compiler.compile_regex(r"[\x00-\x7f]*"))
    assert anything.fill_next_token_bitmask(bm) is False  # every token and the stop token
    assert bool(bitmask_to_bool(bm, ascii_info.vocab_size).all())
    not_yet = GrammarMatcher(compiler.compile_regex(r"[\x00-\x7f]+"))
    assert not_yet.fill_next_token_bitmask(bm) is True  # the stop token is not allowed yet
    assert bitmask_to_bool(bm, ascii_info.vocab_size)[0].nonzero().flatten().tolist() == list(range(129))


# ---------------------------------------------------------------- xgrammar interoperability

XGR_CASES = [
    (r"[a-z]+ [0-9]{2,4}", ["", "ab", "hello 1", "hello 12"]),
    (r'"[^"\\]*"', ["", '"x', '"日本', '"a b c'], ),
    (r'\{"name": "[^"]{0,10}", "age": [0-9]{1,3}\}', ["", '{"name": "', '{"name": "Bob", "age": 4']),
    (r"(cat|dog|bird)s?|[日月]{2}", ["", "ca", "dog", "日"]),
    (r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", ["", "-", "12", "3.5e"]),
]


@functools.lru_cache(maxsize=None)
def _xgr_compiler(family: str):
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    import xgrammar

    info = load_tokenizer_info(family)
    tok = load_hf_tokenizer(family)
    xinfo = xgrammar.TokenizerInfo.from_huggingface(tok, vocab_size=info.vocab_size,
                                                    stop_token_ids=list(info.stop_token_ids))
    return xgrammar.GrammarCompiler(xinfo), tok, info


@pytest.mark.parametrize("pattern, prefixes", XGR_CASES, ids=[f"xgr{i}" for i in range(len(XGR_CASES))])
def test_bitmask_equals_xgrammar_llama3(grammar_compiler, pattern, prefixes):
    """Same states (same token ids fed to both), same bits, except special
    tokens: this Llama-3 export gives xgrammar no special ids, so it walks
    ``<|begin_of_text|>`` etc. as text; leapgen never lets a special token
    match grammar text (DESIGN.md), and its brute force agrees (empty bytes)."""
    xgrammar = pytest.importorskip("xgrammar", reason="xgrammar is not installed (pip install xgrammar)")
    xcompiler, tok, info = _xgr_compiler("llama3")
    xcompiled = xcompiler.compile_regex(pattern)
    compiled = grammar_compiler("llama3").compile_regex(pattern)
    special = sorted(info.special_token_ids - set(info.stop_token_ids))
    keep = np.ones(info.vocab_size, bool)
    keep[special] = False
    for prefix in prefixes:
        ids = tok.encode(prefix, add_special_tokens=False)
        xm, m = xgrammar.GrammarMatcher(xcompiled), GrammarMatcher(compiled)
        for t in ids:
            assert xm.accept_token(t) and m.accept_token(t), (prefix, t)
        xbm = xgrammar.allocate_token_bitmask(1, info.vocab_size)
        bm = allocate_token_bitmask(1, info.vocab_size)
        xm.fill_next_token_bitmask(xbm)
        m.fill_next_token_bitmask(bm)
        assert xbm.shape == bm.shape and xbm.dtype == bm.dtype
        ours = bitmask_to_bool(bm, info.vocab_size)[0].numpy()
        theirs = bitmask_to_bool(xbm, info.vocab_size)[0].numpy()
        diff = np.flatnonzero((ours != theirs) & keep)
        assert diff.size == 0, (prefix, [(int(i), info.token_bytes[i], bool(ours[i])) for i in diff[:8]])
        assert not ours[special].any()
        assert ours.any()
