"""``RuntimeEndpoint`` against a fake SGLang server (``httpx.MockTransport``)
that checks every request's shape against SGLang's protocol (what
``sglang/lang/backend/runtime_endpoint.py`` sends) and answers as SGLang's
``/generate`` does. No model: the fake server's "model" is a rule written here.
"""

from __future__ import annotations

import json
import math
import re

import pytest

import leapgen.frontend as sgl

httpx = pytest.importorskip("httpx", reason="httpx is not installed (pip install httpx)")

SRT_KEYS = {"skip_special_tokens", "spaces_between_special_tokens", "max_new_tokens", "min_new_tokens", "n", "stop",
            "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p", "frequency_penalty",
            "presence_penalty", "ignore_eos", "regex", "json_schema"}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


class FakeServer:
    """SGLang's HTTP routes, recording requests; ``/generate`` answers from simple rules."""

    def __init__(self, model_path="HuggingFaceTB/SmolLM2-135M-Instruct", has_model_info=True):
        self.model_path = model_path
        self.has_model_info = has_model_info
        self.requests: list[dict] = []

    def tokens(self, text: str) -> list[str]:  # the fake tokenizer: one token per character
        return list(text)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.headers.get("authorization") == "Bearer secret"
        if request.url.path == "/get_model_info":
            if not self.has_model_info:
                return httpx.Response(404, json={"detail": "Not Found"})
            return httpx.Response(200, json={"model_path": self.model_path, "is_generation": True})
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"id": self.model_path}]})
        assert request.url.path == "/generate" and request.method == "POST"
        body = json.loads(request.content)
        self.requests.append(body)
        params = body["sampling_params"]
        if isinstance(body.get("text"), list):  # select's scoring batch
            assert params == {"max_new_tokens": 0, "temperature": 0}
            assert body["return_logprob"] is True and body["return_text_in_logprobs"] is True
            return httpx.Response(200, json=[self.scored(t, body["logprob_start_len"]) for t in body["text"]])
        if params == {"max_new_tokens": 0}:  # select's first call: the prompt's length
            return httpx.Response(200, json={"text": "", "meta_info": {"prompt_tokens": len(self.tokens(body["text"]))}})
        assert set(params) == SRT_KEYS, set(params) ^ SRT_KEYS
        assert "<|im_start|>assistant\n" in body["text"]  # chatml, from the model path
        assert "<|im_end|>" in params["stop"]
        if params["json_schema"] is not None:
            assert json.loads(params["json_schema"]) == PERSON and params["regex"] is None
            text = '{"name": "Ada", "age": 36}'
        elif params["regex"] is not None:
            text = next(c for c in ["red", "blue", "green", "yes", "no"] if re.fullmatch(params["regex"], c))
        else:
            text = "free text"
        return httpx.Response(200, json={"text": text, "meta_info": {
            "prompt_tokens": len(self.tokens(body["text"])), "completion_tokens": len(text),
            "finish_reason": {"type": "stop", "matched": 2}}})

    def scored(self, text: str, start: int) -> dict:
        """input_token_logprobs from ``start`` on: the letter 'y' is likely, everything else less."""
        toks = self.tokens(text)[start:]
        lps = [(None if start + i == 0 else (-0.1 if ch == "y" else -2.0), ord(ch), ch) for i, ch in enumerate(toks)]
        return {"text": "", "meta_info": {"input_token_logprobs": lps, "output_token_logprobs": []}}


@sgl.function
def extract(s, text):
    s += sgl.user(text)
    s += sgl.assistant_begin()
    s += sgl.gen("person", json_schema=json.dumps(PERSON))
    s += sgl.assistant_end()


@sgl.function
def color(s):
    s += sgl.user("Sky?")
    s += sgl.assistant(sgl.gen("color", regex=r"red|blue|green", max_tokens=5, temperature=0.3))
    s += sgl.user("Bright?")
    s += sgl.assistant(sgl.select("bright", ["no", "yes"]))


def endpoint(server: FakeServer, **kwargs):
    return sgl.RuntimeEndpoint("http://fake:30000", api_key="secret", transport=httpx.MockTransport(server), **kwargs)


def test_gen_requests_are_sglang_s():
    server = FakeServer()
    sgl.set_default_backend(endpoint(server))
    try:
        state = extract.run(text="Ada, 36.", max_new_tokens=77, temperature=0.5)
    finally:
        sgl.set_default_backend(None)
    assert json.loads(state["person"]) == {"name": "Ada", "age": 36}
    (req,) = server.requests
    assert req["text"] == "<|im_start|>user\nAda, 36.<|im_end|>\n<|im_start|>assistant\n"
    p = req["sampling_params"]
    assert (p["max_new_tokens"], p["temperature"], p["top_p"], p["top_k"], p["n"]) == (77, 0.5, 1.0, -1, 1)
    assert p["skip_special_tokens"] is True and p["stop"] == ["<|im_end|>"]
    assert "return_logprob" not in req
    assert state.text().endswith('{"name": "Ada", "age": 36}<|im_end|>\n')
    assert state.get_meta_info("person")["finish_reason"]["type"] == "stop"


def test_gen_overrides_and_select_by_logprob():
    server = FakeServer()
    state = color.run(backend=endpoint(server))
    gen_req = server.requests[0]
    assert gen_req["sampling_params"]["regex"] == r"red|blue|green"
    assert gen_req["sampling_params"]["max_new_tokens"] == 5 and gen_req["sampling_params"]["temperature"] == 0.3
    assert state["color"] == "red"
    prefix_req, batch_req = server.requests[1:3]
    prompt = prefix_req["text"]
    assert batch_req["text"] == [prompt + "no", prompt + "yes"]
    assert batch_req["logprob_start_len"] == len(prompt) - 2
    assert state["bright"] == "yes"  # 'y' is the likely letter
    meta = state.get_meta_info("bright")
    # The scored tokens start at logprob_start_len; SGLang's client drops the first one when the
    # prompt's text ends with it (here it does not: the first is the prompt's second-to-last token).
    scored = list((prompt + "yes")[len(prompt) - 2:])
    assert not prompt.endswith(scored[0])
    assert [t[2] for t in meta["input_token_logprobs"][1]] == scored
    assert meta["normalized_prompt_logprobs"][1] == pytest.approx((-2.0 - 2.0 - 0.1 - 2.0 - 2.0) / 5)
    assert math.isfinite(meta["normalized_prompt_logprobs"][0])


def test_select_by_constrained_decoding_sends_one_regex_request():
    server = FakeServer()

    @sgl.function
    def pick(s):
        s += sgl.user("Bright?")
        s += sgl.assistant(sgl.select("a", ["yes", "no (really)"], choices_method=sgl.constrained_decoding))

    state = pick.run(backend=endpoint(server))
    (req,) = server.requests
    assert req["sampling_params"]["regex"] == r"(?:yes)|(?:no \(really\))"
    assert req["sampling_params"]["temperature"] == 0.0
    assert state["a"] == "yes"


def test_chat_template_choice():
    assert endpoint(FakeServer()).get_chat_template().name == "chatml"
    assert endpoint(FakeServer(model_path="meta-llama/Llama-3.1-8B-Instruct")).get_chat_template().name == \
        "llama-3-instruct"
    assert endpoint(FakeServer(has_model_info=False)).get_chat_template().name == "chatml"  # from /v1/models
    assert endpoint(FakeServer(), chat_template_name="default").get_chat_template().name == "default"


def test_server_errors_are_raised():
    def refuse(request):
        if request.url.path == "/get_model_info":
            return httpx.Response(200, json={"model_path": "smollm2"})
        return httpx.Response(400, json={"error": {"message": "not supported: min_p"}})

    backend = sgl.RuntimeEndpoint("http://fake", transport=httpx.MockTransport(refuse))
    with pytest.raises(RuntimeError, match="min_p"):
        extract.run(text="x", backend=backend, min_p=0.1)
