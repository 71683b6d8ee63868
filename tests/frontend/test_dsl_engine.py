"""SGLang frontend programs on the embedded engine (the model, a few seconds).

The issue's example runs as SGLang's documentation writes it (only the import
line changed); ``select`` is checked against log-probabilities computed here
straight from the Hugging Face model (teacher forcing), not through the
frontend's scoring code.
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch

import leapgen.frontend as sgl

pytestmark = pytest.mark.model

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
def color_and_answer(s, thing):
    s += sgl.system("You answer with one word.")
    s += sgl.user("What color is " + thing + "?")
    s += sgl.assistant_begin()
    s += sgl.gen("color", regex=r"red|blue|green", max_tokens=8)
    s += sgl.assistant_end()
    s += sgl.user("Is it bright?")
    s += sgl.assistant(sgl.select("bright", choices=["yes", "no", "maybe not"]))


def test_the_example_runs_as_written(engine_backend):
    sgl.set_default_backend(engine_backend)
    try:
        # Greedy: SGLang's default temperature 1.0 would also give schema-valid JSON, unless a sampled
        # string outran max_new_tokens (128), which no test should depend on.
        state = extract.run(text="Ada Lovelace is 36 years old.", temperature=0)
    finally:
        sgl.set_default_backend(None)
    person = json.loads(state["person"])
    jsonschema.validate(person, PERSON)
    text = state.text()
    assert text.startswith("<|im_start|>system\n")  # SmolLM2's default system prompt, from its own template
    assert "<|im_start|>user\nAda Lovelace is 36 years old.<|im_end|>\n<|im_start|>assistant\n" in text
    assert text.endswith(state["person"] + "<|im_end|>\n")
    assert state.messages()[-1] == {"role": "assistant", "content": state["person"]}
    meta = state.get_meta_info("person")
    assert meta["completion_tokens"] >= 1 and meta["finish_reason"]["type"] == "stop"
    assert meta["jump_forward_tokens"] >= 1  # the keys and punctuation the schema forces


def test_run_batch(engine_backend):
    states = extract.run_batch([{"text": "Bob is 20."}, {"text": "Carol, aged 51."}, ["Dan is 7 years old."]],
                               temperature=0, backend=engine_backend)
    people = [json.loads(s["person"]) for s in states]
    for p in people:
        jsonschema.validate(p, PERSON)
    assert [p.get("age") for p in people] == [20, 51, 7]


def _mean_logprob(model, tokenizer, prompt: str, choice: str) -> float:
    base = tokenizer.encode(prompt, add_special_tokens=True)
    full = tokenizer.encode(prompt + choice, add_special_tokens=True)
    k = next((i for i, (a, b) in enumerate(zip(base, full)) if a != b), min(len(base), len(full)))
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([full])).logits[0].float(), dim=-1)
    values = [float(logp[j - 1, full[j]]) for j in range(max(k, 1), len(full))]
    return sum(values) / len(values)


def test_regex_gen_and_select(engine_backend, loaded_model):
    state = color_and_answer.run(thing="the sky", temperature=0, backend=engine_backend)
    assert re.fullmatch(r"red|blue|green", state["color"])
    choices = ["yes", "no", "maybe not"]
    assert state["bright"] in choices
    text = state.text()
    prompt = text[:text.rindex(state["bright"] + "<|im_end|>")]
    scores = [_mean_logprob(loaded_model.model, loaded_model.tokenizer, prompt, c) for c in choices]
    assert state["bright"] == choices[max(range(3), key=scores.__getitem__)]
    got = state.get_meta_info("bright")["normalized_prompt_logprobs"]
    assert got == pytest.approx(scores, abs=1e-4)


def test_select_by_constrained_decoding(engine_backend):
    @sgl.function
    def pick(s):
        s += sgl.user("Pick a fruit.")
        s += sgl.assistant(sgl.select("fruit", ["apple", "banana", "cherry (red)"],
                                      choices_method=sgl.constrained_decoding))

    state = pick.run(backend=engine_backend)
    assert state["fruit"] in ["apple", "banana", "cherry (red)"]


def test_gen_settings(engine_backend):
    @sgl.function
    def count(s):
        s += sgl.user("Count from 1 to 20, separated by commas.")
        s += sgl.assistant_begin()
        s += sgl.gen("short", max_tokens=3, temperature=0)
        s += sgl.assistant_end()
        s += sgl.user("Again.")
        s += sgl.assistant_begin()
        s += sgl.gen("stopped", stop=["5"], temperature=0, max_tokens=60)
        s += sgl.assistant_end()

    state = count.run(backend=engine_backend)
    assert state.get_meta_info("short")["completion_tokens"] <= 3
    assert state.get_meta_info("short")["finish_reason"]["type"] == "length"
    assert "5" not in state["stopped"] and state["stopped"]
    with pytest.raises(ValueError, match="frequency_penalty"):
        count.run(backend=engine_backend, frequency_penalty=0.5)
