"""End-to-end generation with the embedded model: unconstrained, regex and
JSON Schema constraints, jump-forward accounting, finish reasons, errors."""

from __future__ import annotations

import json
import re

import pytest

from leapgen.engine import FinishReason, SamplingParams
from tests.engine.person import PERSON_PROMPT, PERSON_SCHEMA

pytestmark = pytest.mark.model


def test_unconstrained_greedy_chat(llm):
    a, b = llm.generate(["What is the capital of France?"] * 2, SamplingParams(max_tokens=20))
    assert "Paris" in a.text
    assert a.finish_reason == FinishReason.STOP
    assert a.token_ids == b.token_ids  # greedy is deterministic
    assert a.completion_tokens == len(a.token_ids) > 0
    assert a.jump_forward_tokens == 0 and a.compile_ms == 0.0
    assert a.sampled_tokens == a.completion_tokens + 1  # + the stop token
    assert a.prompt_tokens > 10 and a.tokens_per_s > 0 and a.elapsed_s > 0


def test_max_tokens_and_raw_prompt(llm):
    out = llm.generate("The quick brown fox", SamplingParams(max_tokens=4), chat=False)[0]
    assert out.finish_reason == FinishReason.LENGTH
    assert out.completion_tokens == 4 and out.forward_passes == 4


def test_seeded_sampling_is_reproducible(llm):
    params = SamplingParams(max_tokens=8, temperature=1.0, top_p=0.9, top_k=50, seed=123)
    a = llm.generate("Tell me a story.", params)[0]
    b = llm.generate("Tell me a story.", params)[0]
    assert a.token_ids == b.token_ids


def test_stop_token_ids_override(llm):
    period = llm.tokenizer.encode(".", add_special_tokens=False)
    assert len(period) == 1
    out = llm.generate(
        "What is the capital of France?", SamplingParams(max_tokens=20, stop_token_ids=period)
    )[0]
    assert out.finish_reason == FinishReason.STOP
    assert "." not in out.text and "Paris" in out.text


def test_a_stop_string_in_text_forced_from_the_start_cuts_it(llm):
    # The whole output is forced before anything is sampled; the stop string still ends it (it used to be
    # checked after sampled tokens only, so the forced text came back whole).
    out = llm.generate("x", SamplingParams(regex="a, b, c", stop=(", b",), max_tokens=10))[0]
    assert out.text == "a" and out.finish_reason == FinishReason.STOP


def test_regex(llm):
    out = llm.generate("Give me a phone number.", SamplingParams(regex=r"\([0-9]{3}\) [0-9]{3}-[0-9]{4}"))[0]
    assert re.fullmatch(r"\([0-9]{3}\) [0-9]{3}-[0-9]{4}", out.text), out.text
    assert out.finish_reason == FinishReason.GRAMMAR  # complete, nothing else allowed
    assert out.jump_forward_tokens >= 1  # ") " at least


def test_one_forced_character_is_sampled_unless_asked(llm):
    """JUMP_FORWARD_MIN_CHARS = 2 (``benchmarks/bench_jump_min.py``): the "-" is sampled, under a
    one-token mask; ``jump_forward_min_chars=1`` jumps it."""
    from leapgen.engine import LLM

    params = SamplingParams(regex=r"[0-9]{3}-[0-9]{4}")
    out = llm.generate("Give me a phone number.", params)[0]
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", out.text) and out.jump_forward_tokens == 0
    eager = LLM(loaded=llm.loaded, jump_forward_min_chars=1, compile_in_process=False)
    out = eager.generate("Give me a phone number.", params)[0]
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", out.text) and out.jump_forward_tokens >= 1


LARK_PAIR = r"""
start: "(" NUMBER "," WORD ")"
%import common.NUMBER
%import common.WORD
%ignore " "
"""


def test_lark(llm):
    out = llm.generate("Give me a number and a word in parentheses.",
                       SamplingParams(lark=LARK_PAIR, max_tokens=40))[0]
    assert out.finish_reason in (FinishReason.GRAMMAR, FinishReason.STOP), (out.finish_reason, out.error)
    assert re.fullmatch(r" *\( *[0-9.eE+-]+ *, *[A-Za-z]+ *\) *", out.text), out.text
    bad = llm.generate("Hi.", SamplingParams(lark="start: A\nA: /a(?=b)/\n"))[0]
    assert bad.finish_reason == FinishReason.ERROR and "lookahead" in bad.error


def test_fully_forced_output_needs_no_sampling(llm):
    """Nothing is sampled, and no forward runs once the grammar is known: at most the prompt's
    prefill, which overlaps the compile when the compile is not done by the first step."""
    out = llm.generate("Say hello.", SamplingParams(regex="hello world"))[0]
    assert out.text == "hello world"
    assert out.finish_reason == FinishReason.GRAMMAR
    assert out.sampled_tokens == 0 and out.forward_passes <= 1
    assert out.jump_forward_tokens == out.completion_tokens > 0


@pytest.mark.parametrize("max_tokens", [1, 2, 3])
def test_text_forced_from_the_start_stops_at_max_tokens(llm, max_tokens):
    # '{"name": "' is forced before anything is sampled: a jump that reaches max_tokens ends the request
    # (it used to sample one more token: 2 tokens for max_tokens=1, as `leapgen generate` printed).
    out = llm.generate(PERSON_PROMPT, SamplingParams(json_schema=PERSON_SCHEMA, max_tokens=max_tokens))[0]
    assert out.completion_tokens == len(out.token_ids) == max_tokens
    assert out.finish_reason == FinishReason.LENGTH
    assert out.sampled_tokens == 0 and out.jump_forward_tokens == max_tokens
    assert '{"name": "'.startswith(out.text)


def test_json_schema_with_and_without_jump_forward(llm):
    import jsonschema

    on, off = llm.generate(
        [PERSON_PROMPT] * 2,
        [SamplingParams(json_schema=PERSON_SCHEMA, max_tokens=60),
         SamplingParams(json_schema=PERSON_SCHEMA, max_tokens=60, jump_forward=False)],
    )
    for out in (on, off):
        assert out.error is None and out.finish_reason == FinishReason.GRAMMAR, out
        jsonschema.validate(json.loads(out.text), PERSON_SCHEMA, format_checker=jsonschema.FormatChecker())
        assert out.completion_tokens == len(out.token_ids)
    # The layout is fixed: ", " and ": " separators, no other whitespace.
    assert on.text.startswith('{"name": "')
    assert on.jump_forward_tokens >= on.completion_tokens / 4
    assert on.forward_passes < on.completion_tokens  # forced tokens share passes
    assert off.jump_forward_tokens == 0
    assert off.forward_passes == off.sampled_tokens == off.completion_tokens
    # Jump-forward ids are the tokenizer's own (retokenized) ids.
    assert llm.tokenizer.decode(on.token_ids) == on.text


def test_json_schema_as_text(llm):
    out = llm.generate(PERSON_PROMPT, SamplingParams(json_schema=json.dumps(PERSON_SCHEMA), max_tokens=60))[0]
    assert out.error is None
    json.loads(out.text)


def test_bad_grammars_fail_only_their_request(llm):
    outs = llm.generate(
        ["Hi.", "Hi.", "Hi.", "What is the capital of France?"],
        [SamplingParams(regex="(ab"),
         SamplingParams(json_schema={"type": "objec"}),
         SamplingParams(json_schema="{not json"),
         SamplingParams(max_tokens=12)],
    )
    for out, kind in zip(outs[:3], ("RegexError", "SchemaError", "SchemaError")):
        assert out.finish_reason == FinishReason.ERROR
        assert out.error_type == kind and out.error
        assert out.text == "" and out.completion_tokens == 0
    assert outs[3].error is None and "Paris" in outs[3].text


def test_generate_argument_errors(llm):
    with pytest.raises(ValueError):
        llm.generate(["a", "b"], [SamplingParams()])
    with pytest.raises(ValueError):
        llm.generate("", SamplingParams(), chat=False)
    with pytest.raises(ValueError):
        llm.generate("hi", {"max_tokens": 3})
    with pytest.raises(ValueError, match="stop_token_ids"):
        llm.generate("hi", SamplingParams(stop_token_ids=[10**6]))


def test_jump_forward_min_chars_is_checked_before_the_model_loads():
    from leapgen.engine import LLM

    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="jump_forward_min_chars"):
            LLM(jump_forward_min_chars=bad)


def test_a_failed_generate_leaves_nothing_queued(llm):
    with pytest.raises(ValueError):
        llm.generate(["fine", ""], SamplingParams(max_tokens=2), chat=False)
    assert not llm.has_unfinished_requests()
