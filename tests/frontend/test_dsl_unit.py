"""The frontend interpreter, chat templates and choice methods, without a model: a backend
written here records what the interpreter asks of it."""

from __future__ import annotations

import pytest

import leapgen.frontend as sgl
from leapgen.frontend.backend import BaseBackend, _check_supported
from leapgen.frontend.chat_template import chat_template_from_tokenizer, get_chat_template
from leapgen.frontend.choices import ChoicesDecision, choices_regex


class Recorder(BaseBackend):
    def __init__(self, template="qwen"):
        self.template = get_chat_template(template)
        self.calls = []

    def get_chat_template(self):
        return self.template

    def generate(self, s, args):
        self.calls.append((s.text_, args))
        return f"<gen {len(self.calls)}>", {"n": len(self.calls)}

    def select(self, s, choices, temperature, method):
        self.calls.append((s.text_, choices))
        return ChoicesDecision(choices[-1], {"method": method})


def test_roles_default_system_and_variables():
    backend = Recorder("qwen")

    @sgl.function
    def prog(s, q):
        s += sgl.user(q)
        with s.assistant():
            s += sgl.gen("a", max_tokens=5, stop="\n\n")
        s += sgl.user_begin() + "more" + sgl.user_end()
        s += sgl.assistant(sgl.gen_int("n"))
        s += sgl.assistant(sgl.gen("c", choices=["x", "y"]))

    state = prog.run(q="hi", backend=backend, temperature=0.2)
    first_text, first_args = backend.calls[0]
    assert first_text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                          "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert first_args.max_new_tokens == 5 and first_args.temperature == 0.2
    assert first_args.stop == ["\n\n", "<|im_end|>"]
    _, int_args = backend.calls[1]
    assert int_args.regex == r"[-+]?[0-9]+[ \n]*" and int_args.stop == [" ", "\n", "<|im_end|>"]
    assert state["a"] == "<gen 1>" and state["n"] == "<gen 2>" and state["c"] == "y"
    assert "c" in state and state.get_meta_info("a") == {"n": 1}
    assert [m["role"] for m in state.messages()] == ["system", "user", "assistant", "user", "assistant",
                                                      "assistant"]
    assert state.text().endswith("<|im_start|>assistant\ny<|im_end|>\n")


def test_errors():
    backend = Recorder()

    @sgl.function
    def nested(s):
        s += sgl.user_begin()
        s += sgl.assistant_begin()

    with pytest.raises(ValueError, match="nested"):
        nested.run(backend=backend)
    with pytest.raises(ValueError, match="choices"):
        sgl.select("x", [])
    with pytest.raises(ValueError, match="regex and json_schema"):
        sgl.gen("x", regex="a", json_schema="{}")
    with pytest.raises(ValueError, match='"s"'):
        sgl.function(lambda state: None)
    with pytest.raises(ValueError, match="stream"):
        nested.run(backend=backend, stream=True)
    with pytest.raises(TypeError, match="signature"):
        nested.run_batch([["too", "many"]], backend=backend)
    from leapgen.frontend.ir import SamplingArgs

    for field, value in [("min_p", 0.1), ("n", 2), ("presence_penalty", 1.0), ("ignore_eos", True),
                         ("stop_regex", ["x"]), ("return_logprob", True)]:
        with pytest.raises(ValueError, match=field):
            _check_supported(SamplingArgs(**{field: value}), "here")
    _check_supported(SamplingArgs(), "here")  # SGLang's defaults are all accepted


def test_chat_template_from_the_model_s_own_template():
    from vocab_loaders import load_hf_tokenizer

    t = chat_template_from_tokenizer(load_hf_tokenizer("smollm2"))
    assert t.role_prefix_and_suffix["user"] == ("<|im_start|>user\n", "<|im_end|>\n")
    assert t.role_prefix_and_suffix["assistant"] == ("<|im_start|>assistant\n", "<|im_end|>\n")
    assert t.default_system_prompt.startswith("You are a helpful AI assistant named SmolLM")
    assert t.stop_str == ("<|im_end|>",)


def test_choice_methods():
    lp = lambda *v: [(x, i, str(i)) for i, x in enumerate(v)]  # noqa: E731
    inputs = [lp(-1.0, -5.0), lp(-2.0, -2.0, -2.0), lp(-1.0, -0.5)]
    normalized = [-3.0, -2.0, -0.75]
    common = dict(choices=["a", "b", "c"], normalized_prompt_logprobs=normalized, input_token_logprobs=inputs,
                  output_token_logprobs=[[], [], []])
    assert sgl.token_length_normalized(**common).decision == "c"
    assert sgl.greedy_token_selection(**common).decision == "c"  # ties a/c at -1.0, then -0.5 beats -5.0
    uncond = [lp(None, -5.0), lp(None, -1.0, -1.0), lp(None, -0.1)]
    got = sgl.unconditional_likelihood_normalized(**common, unconditional_token_logprobs=uncond)
    assert got.meta_info["normalized_unconditional_prompt_logprobs"] == [-0.5, -4.0 / 3, -0.7]
    assert got.decision == "a"


def test_choices_regex_is_exact():
    import re

    choices = ["a.b", "(x|y)", "c*", "[z]", "a"]
    rx = re.compile(choices_regex(choices))
    assert all(rx.fullmatch(c) for c in choices)
    assert not any(rx.fullmatch(w) for w in ["aab", "x", "y", "cc", "z", ""])
