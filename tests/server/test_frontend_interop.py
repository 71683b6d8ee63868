"""SGLang's frontend language over HTTP against leapgen's own server:
``sgl.set_default_backend(sgl.RuntimeEndpoint(url))`` and the programs run as
written, the issue's example and a ``select`` ranked by prompt
log-probabilities (SGLang's default method), which ``/generate`` answers
with ``max_new_tokens: 0``, ``logprob_start_len`` and
``meta_info.input_token_logprobs``; ``GET /get_model_info`` names the model
whose chat template the frontend picks.
With ``LEAPGEN_SGLANG_PYTHON`` set, the real ``sglang`` package's own
``RuntimeEndpoint`` runs the example, a ``regex`` ``gen`` and a ``select`` too
(``sglang_program.py``).

Oracles: ``jsonschema``; and for log-probabilities the Hugging Face model
itself (``model(ids).logits``), with SGLang's alignment written out here. The
server prefills prompts in bfloat16 where the CPU has native bfloat16 units
(``prefill_dtype="auto"``), hence the tolerance."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import httpx
import jsonschema
import pytest
import torch

import leapgen.frontend as sgl

pytestmark = pytest.mark.model

TOL = 0.15  # natural-log units: bfloat16 prefill rows against the float32 model (seen: up to 0.07)
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


@sgl.function
def extract(s, text):
    s += sgl.user(text)
    s += sgl.assistant_begin()
    s += sgl.gen("person", json_schema=json.dumps({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"}
        }
    }))
    s += sgl.assistant_end()


@sgl.function
def bright(s, method=sgl.token_length_normalized):
    s += sgl.user("Is the sun bright? Answer yes or no.")
    s += sgl.assistant(sgl.select("bright", choices=["yes", "no", "maybe not"], choices_method=method))


def hf_logprobs(server, ids: list[int]) -> list[float]:
    """log p(ids[j] | ids[:j]) for j >= 1, from the Hugging Face model."""
    model = server[1].llm.loaded.model
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].float(), -1)
    return [float(logp[j - 1, ids[j]]) for j in range(1, len(ids))]


def test_the_example_runs_as_written(server):
    sgl.set_default_backend(sgl.RuntimeEndpoint(server[0]))
    try:
        state = extract.run(text="Ada Lovelace is 36 years old.", temperature=0)  # (greedy: see test_dsl_engine)
    finally:
        sgl.set_default_backend(None)
    jsonschema.validate(json.loads(state["person"]), PERSON)
    # The chat template the frontend matched to /get_model_info's model_path: SmolLM2's ChatML.
    assert "<|im_start|>user\nAda Lovelace is 36 years old.<|im_end|>\n<|im_start|>assistant\n" in state.text()
    meta = state.get_meta_info("person")
    assert meta["finish_reason"]["type"] == "stop" and meta["jump_forward_tokens"] >= 1


def test_a_select_runs_as_written_and_ranks_as_sglang_does(server):
    sgl.set_default_backend(sgl.RuntimeEndpoint(server[0]))
    try:
        state = bright.run()
    finally:
        sgl.set_default_backend(None)
    choices = ["yes", "no", "maybe not"]
    assert state["bright"] in choices
    prompt = state.text()[: -len(state["bright"] + "<|im_end|>\n")]
    tok = server[1].llm.tokenizer
    start = len(tok.encode(prompt)) - 2  # SGLang's logprob_start_len: the prompt's length less 2
    # SGLang's ranking: the mean of the scored entries from `start` on (its first entry is unscored).
    expected = [sum(lps := hf_logprobs(server, tok.encode(prompt + c))[start:]) / len(lps) for c in choices]
    got = state.get_meta_info("bright")["normalized_prompt_logprobs"]
    assert all(abs(g - e) < TOL for g, e in zip(got, expected)), (got, expected)
    ranked = sorted(expected, reverse=True)
    if ranked[0] - ranked[1] > 2 * TOL:
        assert state["bright"] == choices[expected.index(ranked[0])]


@pytest.mark.parametrize("method", [sgl.greedy_token_selection, sgl.unconditional_likelihood_normalized,
                                    sgl.constrained_decoding])
def test_the_other_choice_methods_run_over_http(server, method):
    state = bright.run(method=method, backend=sgl.RuntimeEndpoint(server[0], chat_template_name="chatml"))
    assert state["bright"] in ("yes", "no", "maybe not")
    if method is sgl.unconditional_likelihood_normalized:
        assert all(v == v for v in state.get_meta_info("bright")["normalized_unconditional_prompt_logprobs"])


def test_generate_scores_the_prompt_as_sglang_aligns_it(server):
    texts = ["The capital of France is Paris.", "Two plus two is four."]
    r = httpx.post(server[0] + "/generate", json={
        "text": texts, "sampling_params": {"max_new_tokens": 0, "temperature": 0}, "return_logprob": True,
        "return_text_in_logprobs": True, "logprob_start_len": 2, "top_logprobs_num": 2}, timeout=60)
    assert r.status_code == 200, r.text
    tok = server[1].llm.tokenizer
    for text, item in zip(texts, r.json()):
        ids = tok.encode(text)
        meta = item["meta_info"]
        assert (item["text"], meta["completion_tokens"], meta["output_token_logprobs"]) == ("", 0, [])
        assert meta["finish_reason"]["type"] == "length" and meta["prompt_tokens"] == len(ids)
        entries, tops = meta["input_token_logprobs"], meta["input_top_logprobs"]
        assert [e[1] for e in entries] == ids[2:] and entries[0][0] is None and tops[0] is None
        assert [e[2] for e in entries] == [tok.decode([t]) for t in ids[2:]]
        expected = hf_logprobs(server, ids)[2:]
        assert all(abs(e[0] - x) < TOL for e, x in zip(entries[1:], expected)), (entries, expected)
        assert all(len(t) == 2 and t[0][0] >= t[1][0] for t in tops[1:])


def test_logprob_start_len_default_and_bounds(server):
    def post(**body):
        return httpx.post(server[0] + "/generate", json={"text": "Hello there", **body}, timeout=60)

    ids = server[1].llm.tokenizer.encode("Hello there")
    generated = post(sampling_params={"max_new_tokens": 2, "temperature": 0}, return_logprob=True).json()
    assert generated["meta_info"]["input_token_logprobs"] == []  # SGLang 0.5's -1: no prompt entries
    assert len(generated["meta_info"]["output_token_logprobs"]) == 2
    prefill = post(sampling_params={"max_new_tokens": 0}, return_logprob=True).json()
    assert prefill["meta_info"]["input_token_logprobs"] == []
    for body, param in (({"logprob_start_len": 0}, "logprob_start_len"),
                        ({"sampling_params": {"max_new_tokens": 0, "regex": "a"}}, "sampling_params.max_new_tokens")):
        r = post(**body)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    r = post(return_logprob=True, logprob_start_len=len(ids))
    assert r.status_code == 400 and "logprob_start_len" in r.json()["error"]["message"], r.text


def test_get_model_info(server):
    info = httpx.get(server[0] + "/get_model_info", timeout=10).json()
    assert re.search("smollm", info["model_path"], re.IGNORECASE) and info["is_generation"] is True
    assert info["architectures"] == ["LlamaForCausalLM"]


@pytest.mark.skipif(not os.environ.get("LEAPGEN_SGLANG_PYTHON"),
                    reason="LEAPGEN_SGLANG_PYTHON (a Python with the sglang package) is not set")
def test_sglangs_own_runtime_endpoint_runs_against_the_server(server):
    program = Path(__file__).with_name("sglang_program.py")
    run = subprocess.run([os.environ["LEAPGEN_SGLANG_PYTHON"], str(program), server[0]], capture_output=True,
                         text=True, timeout=600, cwd="/", env={**os.environ, "PYTHONPATH": ""})
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    for person in [got["person"], *got["batch"]]:
        jsonschema.validate(json.loads(person), PERSON)
    assert got["meta"]["finish_reason"]["type"] == "stop"
    assert got["color"] in ("red", "blue", "green") and got["bright"] in ("yes", "no", "maybe not")
    assert len(got["logprobs"]) == 3 and all(lp < 0 for lp in got["logprobs"])


def test_a_stream_carries_the_prompt_entries_on_its_last_line(server):
    body = {"text": "Two plus two is four.", "sampling_params": {"max_new_tokens": 3, "temperature": 0},
            "return_logprob": True, "logprob_start_len": 1, "stream": True}
    with httpx.stream("POST", server[0] + "/generate", json=body, timeout=60) as r:
        lines = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    plain = httpx.post(server[0] + "/generate", json={**body, "stream": False}, timeout=60).json()
    assert lines[-1]["text"] == plain["text"] and lines[-1]["meta_info"]["finish_reason"] is not None
    assert lines[-1]["meta_info"]["input_token_logprobs"] == plain["meta_info"]["input_token_logprobs"]
    assert len(plain["meta_info"]["input_token_logprobs"]) == plain["meta_info"]["prompt_tokens"] - 1
    prefill = dict(body, sampling_params={"max_new_tokens": 0})
    with httpx.stream("POST", server[0] + "/generate", json=prefill, timeout=60) as r:
        last = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")][-1]
    assert last["text"] == "" and last["meta_info"]["completion_tokens"] == 0
    assert len(last["meta_info"]["input_token_logprobs"]) == last["meta_info"]["prompt_tokens"] - 1
