"""vLLM's offline ``LLM`` with ``structured_outputs_config={"backend": "leapgen"}``, end to end on
the embedded SmolLM2 (vLLM's own engine-core and worker processes).

Every ``structured_outputs`` kind over 60 requests, all valid by oracles of
their own; a malformed grammar refused at its request (vLLM's validation
error, leapgen's message) and a grammar that fails to compile in the engine
failing alone (finish reason ``error``) while the requests beside it finish;
the engine spy proving leapgen's backend, and no other, filled the masks.
"""

from __future__ import annotations

import pytest

from vllm_cases import MAX_TOKENS, PERSON, assert_leapgen_made_the_masks, cases, spy_counts

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def llm(vllm_env, model_folder):
    import leapgen.integrations.vllm as lv

    lv.register()  # the offline LLM reads its config before vLLM loads plugins
    from vllm import LLM

    engine = LLM(model=model_folder, dtype="float32", enforce_eager=True, max_model_len=1024, max_num_seqs=16,
                 seed=0, structured_outputs_config={"backend": "leapgen"})
    yield engine
    engine.llm_engine.engine_core.shutdown()


def _params(so_kwargs, seed, temperature=0.7):
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    return SamplingParams(max_tokens=MAX_TOKENS, temperature=temperature, seed=seed,
                          structured_outputs=StructuredOutputsParams(**so_kwargs))


def _chat(llm, prompts, params):
    return llm.chat([[{"role": "user", "content": p}] for p in prompts], params, use_tqdm=False)


def test_every_kind_is_honoured_over_60_requests(llm, vllm_env):
    todo = cases(per_kind=12)
    outputs = _chat(llm, [c.prompt for c in todo], [_params(c.structured_outputs, i, c.temperature) for i, c in enumerate(todo)])
    failures = []
    for case, out in zip(todo, outputs):
        completion = out.outputs[0]
        try:
            assert completion.finish_reason == "stop", completion.finish_reason
            case.check(completion.text)
        except Exception as exc:  # collect all, report every invalid one
            failures.append((case.kind, case.structured_outputs, completion.text, repr(exc)))
    assert len(todo) >= 50 and not failures, failures
    assert_leapgen_made_the_masks(vllm_env, min_fills=sum(len(o.outputs[0].token_ids) for o in outputs))


def test_a_malformed_grammar_is_refused_at_its_request(llm):
    from vllm.exceptions import VLLMValidationError

    with pytest.raises(VLLMValidationError, match=r"structured_outputs\.regex: .*offset 2") as caught:
        _chat(llm, ["Hi"], _params({"regex": "ab(c"}, 0))
    assert caught.value.parameter == "structured_outputs.regex"
    out = _chat(llm, ["Give a person record as JSON."], _params({"json": PERSON}, 1))[0].outputs[0]
    assert out.finish_reason == "stop"  # the engine goes on


def test_a_grammar_failing_in_the_engine_fails_alone(llm, vllm_env):
    """Parses, but its DFA has more states than the compiler's limit: the compile fails on vLLM's
    compile executor, the scheduler finishes that request with an error, the others finish."""
    before = spy_counts(vllm_env)["fill leapgen"]
    todo = cases(per_kind=1)[:3]
    so = [c.structured_outputs for c in todo] + [{"regex": "(a|b)*a(a|b){24}"}]
    outputs = _chat(llm, [c.prompt for c in todo] + ["Write a or b."], [_params(s, i) for i, s in enumerate(so)])
    for case, out in zip(todo, outputs):
        assert out.outputs[0].finish_reason == "stop"
        case.check(out.outputs[0].text)
    assert outputs[-1].outputs[0].finish_reason == "error" and outputs[-1].outputs[0].token_ids == []
    assert spy_counts(vllm_env)["fill leapgen"] > before
