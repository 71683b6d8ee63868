"""Jump-forward inside vLLM: leapgen's forced tokens as speculative drafts
(``JumpForwardProposer``), end to end on the embedded SmolLM2.

At temperature 0.8 every draft is accepted (the grammar's one-token rows on
forced text make the draft's target probability 1, and the plugin's fix of
vLLM's CPU expand kernel gives draft positions their real temperature), the
outputs stay valid, and the forced tokens took no decode step of their own.
"""

from __future__ import annotations

import pytest

from vllm_cases import assert_leapgen_made_the_masks, cases

pytestmark = pytest.mark.vllm


def _spec_metrics(llm) -> dict:
    return {m.name: m.value for m in llm.get_metrics() if m.name.startswith("vllm:spec_decode") and hasattr(m, "value")}


@pytest.fixture(scope="module")
def llm(vllm_env, model_folder):
    import leapgen.integrations.vllm as lv

    lv.register()
    from vllm import LLM

    from leapgen.integrations.vllm_backend import JUMP_FORWARD_PROPOSER

    engine = LLM(model=model_folder, dtype="float32", enforce_eager=True, max_model_len=1024, max_num_seqs=8, seed=0,
                 disable_log_stats=False,
                 structured_outputs_config={"backend": "leapgen", "disable_any_whitespace": True},
                 speculative_config={"method": "custom_class", "model": JUMP_FORWARD_PROPOSER,
                                     "num_speculative_tokens": 8})
    yield engine
    engine.llm_engine.engine_core.shutdown()


def test_forced_drafts_are_all_accepted_at_temperature_08(llm, vllm_env):
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    todo = [c for c in cases(per_kind=6) if c.kind in ("json", "choice", "regex")]
    before = _spec_metrics(llm)
    params = [SamplingParams(max_tokens=256, temperature=0.8, seed=i,
                             structured_outputs=StructuredOutputsParams(**c.structured_outputs))
              for i, c in enumerate(todo)]
    outputs = llm.chat([[{"role": "user", "content": c.prompt}] for c in todo], params, use_tqdm=False)
    for case, out in zip(todo, outputs):
        assert out.outputs[0].finish_reason == "stop", (case.kind, out.outputs[0].text)
        case.check(out.outputs[0].text)
    after = _spec_metrics(llm)
    drafted = after["vllm:spec_decode_num_draft_tokens"] - before.get("vllm:spec_decode_num_draft_tokens", 0)
    accepted = after["vllm:spec_decode_num_accepted_tokens"] - before.get("vllm:spec_decode_num_accepted_tokens", 0)
    total = sum(len(o.outputs[0].token_ids) for o in outputs)
    assert drafted > total // 5, (drafted, total)  # '{"name":"', '","age":' ... are a good share of JSON
    assert accepted == drafted
    assert_leapgen_made_the_masks(vllm_env, min_fills=total)
