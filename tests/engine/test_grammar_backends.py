"""The engine over each installed grammar backend (``LLM(grammar_backend=...)``):
one constrained request each comes back schema-valid; jump-forward happens
only with the peers that have it."""

from __future__ import annotations

import json

import pytest

from leapgen.backends import available_backends
from leapgen.engine import FinishReason, SamplingParams
from leapgen.errors import GrammarError
from tests.engine.person import PERSON_PROMPT, PERSON_SCHEMA

pytestmark = pytest.mark.model

PEERS = [b for b in ("xgrammar", "llguidance", "outlines-core") if b in available_backends()]


@pytest.fixture(scope="module", params=PEERS or [pytest.param(None, marks=pytest.mark.skip("no peer installed"))])
def peer_llm(request, loaded_model):
    from leapgen.engine import LLM

    return LLM(loaded=loaded_model, num_threads=1, grammar_backend=request.param)


def test_a_constrained_request_is_schema_valid(peer_llm):
    jsonschema = pytest.importorskip("jsonschema")
    params = SamplingParams(json_schema=PERSON_SCHEMA, json_separators=(",", ":"), max_tokens=60)
    out = peer_llm.generate(PERSON_PROMPT, params)[0]
    assert out.finish_reason in (FinishReason.STOP, FinishReason.GRAMMAR), out.error
    jsonschema.validate(json.loads(out.text), PERSON_SCHEMA)
    if peer_llm.grammar.backend_name == "outlines-core":
        assert out.jump_forward_tokens == 0  # no jump-forward strings
    else:
        assert out.jump_forward_tokens > 0  # '{"name":"' and the keys are forced


def test_a_layout_the_peer_lacks_fails_that_request(peer_llm):
    out = peer_llm.generate(PERSON_PROMPT, SamplingParams(json_schema=PERSON_SCHEMA, json_indent=2, max_tokens=8))[0]
    assert out.finish_reason == FinishReason.ERROR and "indented" in out.error


def test_any_order_is_refused_by_a_peer_without_it(peer_llm):
    params = SamplingParams(json_schema=PERSON_SCHEMA, json_any_order=True, max_tokens=8)
    if peer_llm.grammar.backend_name == "xgrammar":  # xgrammar >= 0.2.9 has its own (looser) any_order
        peer_llm.grammar.compile(params)
        return
    out = peer_llm.generate(PERSON_PROMPT, params)[0]
    assert out.finish_reason == FinishReason.ERROR and "any_order" in out.error


def test_unknown_backend_is_refused(loaded_model):
    from leapgen.engine import LLM

    with pytest.raises(ValueError, match="unknown grammar backend"):
        LLM(loaded=loaded_model, num_threads=1, grammar_backend="nope")


def test_the_peer_compile_error_is_a_grammar_error(peer_llm):
    with pytest.raises(GrammarError):
        peer_llm.grammar.compile(SamplingParams(regex="(unclosed"))
