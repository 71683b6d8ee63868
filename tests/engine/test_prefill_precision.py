"""Prompt tokens in bfloat16, generated tokens in float32: the precision
follows a token's role, and a bfloat16 prefill stays close to an all-float32
run."""

from __future__ import annotations

import pytest
import torch

from leapgen.engine import LLM, SamplingParams
from leapgen.engine.model_runner import ModelRunner, native_low_precision_dtype
from tests.engine.person import PERSON_PROMPT, PERSON_SCHEMA

pytestmark = pytest.mark.model

ATOL = 1e-4
PROMPTS = ("Hello there, how are you?", "The capital of France is", "Write a JSON object with a name and an age:")


@pytest.fixture(scope="module")
def runner(loaded_model):
    if native_low_precision_dtype(torch.float32, torch.device("cpu")) is None:
        pytest.skip("this CPU has no native bfloat16 kernels (AMX / AVX512-BF16): prefill stays float32")
    return ModelRunner(loaded_model.model, prefill_dtype="auto")


def test_prefill_dtype_values(loaded_model):
    assert ModelRunner(loaded_model.model, prefill_dtype="float32").prefill_dtype is None
    assert ModelRunner(loaded_model.model, prefill_dtype=None).prefill_dtype is None
    assert ModelRunner(loaded_model.model, prefill_dtype="bfloat16").prefill_dtype is torch.bfloat16
    for bad in ("int8", torch.int8, torch.complex64, ["bfloat16"]):
        with pytest.raises(ValueError, match="prefill_dtype"):
            ModelRunner(loaded_model.model, prefill_dtype=bad)


@pytest.mark.parametrize("prefill_dtype", ["auto", "float32"])
def test_num_prompt_must_be_one_int_per_sequence(loaded_model, prefill_dtype):
    runner = ModelRunner(loaded_model.model, prefill_dtype=prefill_dtype)
    ids = [1, 2, 3, 4]
    for bad in ([0, 0, 0], [], [4, None], 4, [2.5, 1]):
        with pytest.raises(ValueError, match="num_prompt"):
            runner.batch_forward([runner.new_cache(), runner.new_cache()], [ids, ids], bad)
    # ints of any integer type, clipped to [0, len(tokens)]
    clipped = runner.batch_forward([runner.new_cache()], [ids], torch.tensor([9]))
    torch.testing.assert_close(clipped[0], runner.forward(runner.new_cache(), ids, num_prompt=len(ids)))


def test_weight_copies_follow_weight_edits(loaded_model, runner):
    """A runner built after the weights changed in place uses the new weights
    (the shared bfloat16 copies are keyed by the parameters' versions)."""
    import copy

    model = copy.deepcopy(loaded_model.model)
    ids = loaded_model.tokenizer.encode(PROMPTS[2])
    ModelRunner(model, prefill_dtype="auto")
    with torch.no_grad():
        for p in model.model.layers[0].mlp.parameters():
            p.mul_(0.5)
    low, full = ModelRunner(model, prefill_dtype="auto"), ModelRunner(model, prefill_dtype="float32")
    diff = low.forward(low.new_cache(), ids, num_prompt=len(ids)) - full.forward(full.new_cache(), ids)
    assert diff.abs().max() < 0.5


def test_prompt_rows_are_bfloat16_and_close_to_float32(runner, loaded_model):
    tok = loaded_model.tokenizer
    for text in PROMPTS:
        ids = tok.encode(text)
        full = runner.forward(runner.new_cache(), ids)  # every row float32
        low = runner.forward(runner.new_cache(), ids, num_prompt=len(ids))
        assert not torch.equal(low, full)  # the bfloat16 path ran
        assert (low - full).abs().max() < 0.5  # logits span ~40
        assert low.argmax() == full.argmax()
        top = set(full.topk(5).indices.tolist())
        assert len(top & set(low.topk(5).indices.tolist())) >= 4


def test_precision_follows_the_role(runner, loaded_model):
    """A prompt prefilled next to a decode and an extend gets the logits it
    gets alone (its bfloat16 GEMMs cover the same prompt rows); the decode
    and the extend (float32) get theirs."""
    tok = loaded_model.tokenizer
    seqs = [tok.encode(t) for t in PROMPTS]
    caches = [runner.new_cache() for _ in seqs]
    runner.forward(caches[1], seqs[1][:-1], num_prompt=len(seqs[1]) - 1)
    runner.forward(caches[2], seqs[2][:-3], num_prompt=len(seqs[2]) - 3)
    # seq 0: a prompt; seq 1: one generated token; seq 2: an extend of 3.
    batch = runner.batch_forward(caches, [seqs[0], seqs[1][-1:], seqs[2][-3:]], [len(seqs[0]), 0, 0])
    alone = runner.forward(runner.new_cache(), seqs[0], num_prompt=len(seqs[0]))
    torch.testing.assert_close(batch[0], alone, atol=ATOL, rtol=0)
    for row, ids, n_new in ((batch[1], seqs[1], 1), (batch[2], seqs[2], 3)):
        cache = runner.new_cache()
        runner.forward(cache, ids[:-n_new], num_prompt=len(ids) - n_new)
        torch.testing.assert_close(row, runner.forward(cache, ids[-n_new:]), atol=ATOL, rtol=0)


def test_engine_output_with_a_bfloat16_prefill(loaded_model, runner):
    """The default engine (bfloat16 prompts here) and an all-float32 one give
    valid outputs for the same constrained request; the greedy texts agree
    on this prompt."""
    import json

    import jsonschema

    params = SamplingParams(json_schema=PERSON_SCHEMA, max_tokens=60)
    outs = {}
    for dtype in ("auto", "float32"):
        llm = LLM(loaded=loaded_model, num_threads=1, prefill_dtype=dtype)
        out = llm.generate(PERSON_PROMPT, params)[0]
        assert out.error is None and out.finish_reason != "length"
        jsonschema.validate(json.loads(out.text), PERSON_SCHEMA)
        outs[dtype] = out.text
    assert llm.model_runner.prefill_dtype is None
    assert outs["auto"] == outs["float32"]
