"""leapgen's vLLM backend against vLLM's own classes, without running the model.

The plugin's changes to vLLM (the backend name, the request check, the
manager's backend choice, the CPU expand kernel), and the call sequence of
vLLM's ``StructuredOutputManager`` (``grammar_init``, ``grammar_bitmask`` with
draft tokens, ``validate_tokens``, ``accept_tokens``) on a real
``vllm.v1.request.Request``, checked against oracles written here: the set of
tokens a choice allows by its bytes, ``jsonschema`` for the JSON produced.
"""

from __future__ import annotations

import importlib.util
import json
import random
import time
import types

import numpy as np
import pytest

pytestmark = pytest.mark.vllm

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"]}


@pytest.fixture(scope="module")
def lv():
    import leapgen.integrations.vllm as lv

    lv.register()
    return lv


@pytest.fixture(scope="module")
def vllm_config(lv, model_folder):
    from vllm.engine.arg_utils import EngineArgs

    # ngram drafts: the manager keeps bitmask rows per draft position and the grammars a rollback window
    return EngineArgs(model=model_folder, dtype="float32", enforce_eager=True, max_model_len=1024, max_num_seqs=4,
                      structured_outputs_config={"backend": "leapgen"},
                      speculative_config={"method": "ngram", "num_speculative_tokens": 2,
                                          "prompt_lookup_max": 3}).create_engine_config()


def _check(so, *, backend="leapgen", tokenizer, disable_any_whitespace=False):
    """vLLM's request check, as its input processor calls it."""
    from vllm import SamplingParams
    from vllm.config import StructuredOutputsConfig

    params = SamplingParams(max_tokens=8, structured_outputs=so)
    params._validate_structured_outputs(types.SimpleNamespace(is_diffusion=False),
                                        StructuredOutputsConfig(backend=backend,
                                                                disable_any_whitespace=disable_any_whitespace),
                                        tokenizer)
    return params.structured_outputs


# -- the plugin's changes ----------------------------------------------------------------------


def test_config_accepts_leapgen_and_its_options(lv):
    from pydantic import ValidationError
    from vllm.config import StructuredOutputsConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    assert StructuredOutputsConfig(backend="leapgen", disable_any_whitespace=True).disable_any_whitespace
    with pytest.raises(ValidationError, match="disable_additional_properties is only supported"):
        StructuredOutputsConfig(backend="leapgen", disable_additional_properties=True)
    with pytest.raises(ValidationError, match="disable_any_whitespace is only supported"):
        StructuredOutputsConfig(backend="outlines", disable_any_whitespace=True)  # vLLM's rule for the others
    with pytest.raises(ValidationError, match="'leapgen'"):
        StructuredOutputsConfig(backend="leapgenx")
    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    args = parser.parse_args(["--structured-outputs-config", '{"backend": "leapgen"}'])
    assert args.structured_outputs_config.backend == "leapgen"
    lv.register()  # idempotent
    assert StructuredOutputsConfig(backend="leapgen").backend == "leapgen"


def test_unsupported_vllm_version_is_refused_and_the_plugin_only_warns(lv, monkeypatch, caplog):
    import vllm

    monkeypatch.setattr(vllm, "__version__", "0.33.1")
    with pytest.raises(lv.UnsupportedVllmVersion, match=r"supports vLLM 0\.32\.x; this is vLLM 0\.33\.1"):
        lv.register()
    with caplog.at_level("WARNING"):
        lv.load_plugin()
    assert "this is vLLM 0.33.1" in caplog.text


@pytest.mark.parametrize("so_kwargs", [
    {"json": SCHEMA}, {"json": json.dumps(SCHEMA)}, {"json_object": True}, {"regex": r"\d{3}-[A-Z]{2}"},
    {"choice": ["yes", "no", "a.b|c"]}, {"grammar": 'root ::= "x" [0-9]+'},
    {"grammar": 'start: "x" NUMBER\n%import common.NUMBER\n'},
])
def test_request_check_marks_leapgen_requests(lv, hf_tokenizer, so_kwargs):
    from vllm.sampling_params import StructuredOutputsParams

    so = _check(StructuredOutputsParams(**so_kwargs), tokenizer=hf_tokenizer)
    assert so._backend == "leapgen" and not so._backend_was_auto
    assert so.choice == so_kwargs.get("choice")  # not rewritten into a grammar, as vLLM's xgrammar check does


@pytest.mark.parametrize("so_kwargs, field, where", [
    ({"json": {"type": "object", "properties": {"a": {"type": "strin"}}}}, "structured_outputs.json", "/properties/a"),
    ({"json": "{not json"}, "structured_outputs.json", "line 1 column 2"),
    ({"regex": "a(b"}, "structured_outputs.regex", "offset 1"),
    ({"grammar": 'root ::= "a" missing'}, "structured_outputs.grammar", "missing"),
    ({"grammar": "start: \"a\" missing\n"}, "structured_outputs.grammar", "missing"),
    ({"regex": "a", "whitespace_pattern": " *"}, "structured_outputs.whitespace_pattern", "not supported"),
    ({"json": SCHEMA, "disable_any_whitespace": True}, "structured_outputs.disable_any_whitespace", "per request"),
])
def test_request_check_refuses_with_the_field_and_where(lv, hf_tokenizer, so_kwargs, field, where):
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import StructuredOutputsParams

    with pytest.raises(VLLMValidationError) as caught:
        _check(StructuredOutputsParams(**so_kwargs), tokenizer=hf_tokenizer)
    assert caught.value.parameter == field
    assert where in str(caught.value)


def test_structural_tag_is_checked_by_leapgens_reader(lv, hf_tokenizer):
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import StructuredOutputsParams

    tag = {"type": "structural_tag", "structures": [{"begin": "<f>", "schema": SCHEMA, "end": "</f>"}],
           "triggers": ["<f>"]}
    assert _check(StructuredOutputsParams(structural_tag=json.dumps(tag)), tokenizer=hf_tokenizer)._backend == "leapgen"
    bad = {"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "const_strin", "value": "x"}]}}
    with pytest.raises(VLLMValidationError) as caught:
        _check(StructuredOutputsParams(structural_tag=json.dumps(bad)), tokenizer=hf_tokenizer)
    assert caught.value.parameter == "structured_outputs.structural_tag"
    assert "/format/elements/0" in str(caught.value)


def test_other_backends_keep_vllms_own_check(lv, hf_tokenizer):
    from vllm.sampling_params import StructuredOutputsParams

    so = _check(StructuredOutputsParams(choice=["yes", "no"]), backend="xgrammar", tokenizer=hf_tokenizer)
    assert so._backend == "xgrammar" and so.choice is None and "yes" in so.grammar  # vLLM's rewrite


def test_cpu_expand_kernel_writes_its_result(lv):
    """vLLM 0.32's CPU override of the rejection sampler's expand kernel drops a float
    result (a temporary int64 copy); the plugin's replacement writes it."""
    import torch
    from vllm.platforms import current_platform
    from vllm.utils import cpu_triton_utils

    if not current_platform.is_cpu():
        pytest.skip("vLLM's CPU build only")
    current_platform.import_kernels()
    spec = importlib.util.find_spec("vllm.utils.cpu_triton_utils")
    shipped = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shipped)
    temperatures, ends = torch.tensor([0.8, -1.0]), torch.tensor([3, 5], dtype=torch.int32)
    out = torch.full((5,), float("nan"))
    try:
        shipped._expand_kernel_impl(out, temperatures, ends, -1, 1)
    except (AttributeError, RuntimeError) as exc:  # vLLM's C++ ops not loaded in this process
        pytest.skip(f"vLLM's CPU kernels are not loaded here: {exc}")
    assert torch.isnan(out).all()  # the shipped override: nothing written
    out = torch.full((5,), float("nan"))
    cpu_triton_utils._expand_kernel_impl(out, temperatures, ends, -1, 1)
    assert out.tolist() == pytest.approx([0.8, 0.8, 0.8, 1.0, 1.0])


# -- vLLM's StructuredOutputManager driving leapgen -----------------------------------------------


def _request(request_id, so_kwargs, prompt=(1, 2, 3), stop_token_ids=None):
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.request import Request

    params = SamplingParams(max_tokens=64, stop_token_ids=stop_token_ids,
                            structured_outputs=StructuredOutputsParams(**so_kwargs))
    params.structured_outputs._backend = "leapgen"  # as the request check leaves it
    return Request(request_id, list(prompt), params, None)


def _ready(request, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not request.structured_output_request.is_grammar_ready:
        assert time.monotonic() < deadline, "grammar compile did not finish"
        time.sleep(0.01)
    return request.structured_output_request.grammar


def _allowed(row: np.ndarray, vocab_size: int) -> set[int]:
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.flatnonzero(bits).tolist())


@pytest.fixture(scope="module")
def manager(vllm_config):
    from vllm.v1.structured_output import StructuredOutputManager

    manager = StructuredOutputManager(vllm_config)
    yield manager
    manager.clear_backend()


def test_manager_builds_leapgens_backend_and_its_masks_are_exact(manager, hf_tokenizer):
    """A choice's masks through the manager equal the token set the choice's bytes allow."""
    from leapgen.integrations.vllm_backend import LeapgenBackend, LeapgenGrammar

    choices = ["Paris", "Parma", "Porto", "Prague", "Pécs"]
    eos = hf_tokenizer.eos_token_id
    request = _request("choice-0", {"choice": choices}, stop_token_ids=[eos])
    manager.grammar_init(request)
    grammar = _ready(request)
    assert isinstance(manager.backend, LeapgenBackend) and isinstance(grammar, LeapgenGrammar)
    vocab = manager.backend.tokenizer_info.token_bytes
    rng = random.Random(7)
    text = b""
    for _ in range(20):
        rows = manager.grammar_bitmask({request.request_id: request}, [request.request_id], {})
        allowed = _allowed(rows[0], manager.backend.vocab_size)
        want = {t for t, b in enumerate(vocab) if b and any(c.encode().startswith(text + b) for c in choices)}
        if text in {c.encode() for c in choices}:
            want.add(eos)
        assert allowed == want, f"after {text!r}"
        token = rng.choice(sorted(allowed))
        assert manager.accept_tokens(request, [token])
        if token == eos:
            break
        text += vocab[token]
    assert grammar.is_terminated() and text.decode() in choices


def test_manager_json_walk_with_drafts_validates_without_advancing(manager, hf_tokenizer):
    """Random walks through the manager's masks end in JSON the schema accepts; draft tokens
    (bitmask rows per speculative position, validate_tokens) leave the grammar where it was."""
    jsonschema = pytest.importorskip("jsonschema")
    eos = hf_tokenizer.eos_token_id
    for seed in range(3):
        request = _request(f"json-{seed}", {"json": SCHEMA}, stop_token_ids=[eos])
        manager.grammar_init(request)
        grammar = _ready(request)
        vocab = manager.backend.tokenizer_info.token_bytes
        rng = random.Random(seed)
        out = b""
        for _ in range(400):
            rows = manager.grammar_bitmask({request.request_id: request}, [request.request_id], {}).copy()
            allowed = sorted(_allowed(rows[0], manager.backend.vocab_size))
            token = eos if eos in allowed and rng.random() < 0.5 else rng.choice(allowed)
            assert manager.validate_tokens(request, [token, token]) in ([token], [token, token])
            spec_rows = manager.grammar_bitmask({request.request_id: request}, [request.request_id],
                                                {request.request_id: [token]}).copy()
            again = manager.grammar_bitmask({request.request_id: request}, [request.request_id], {})
            assert (spec_rows[0] == rows[0]).all() and (again[0] == rows[0]).all()  # rolled back
            assert manager.accept_tokens(request, [token])
            if token == eos:
                break
            out += vocab[token]
        assert grammar.is_terminated()
        jsonschema.validate(json.loads(out), SCHEMA)


def test_manager_fails_a_bad_compile_through_the_grammar_future(manager):
    """A grammar that parses but cannot be compiled (too many states) reaches vLLM as the
    grammar future's exception: the scheduler fails that request alone."""
    from leapgen.errors import CompileLimitError

    request = _request("blowup", {"regex": "(a|b)*a(a|b){24}"})
    manager.grammar_init(request)
    error = _ready(request, timeout=300)
    assert isinstance(error, CompileLimitError)


# -- the grammar alone: rollback, termination, jump-forward plans ----------------------------------


@pytest.fixture(scope="module")
def jf_backend(lv, model_folder, hf_tokenizer):
    from vllm.engine.arg_utils import EngineArgs

    from leapgen.integrations.vllm_backend import JUMP_FORWARD_PROPOSER, LeapgenBackend

    config = EngineArgs(model=model_folder, dtype="float32", enforce_eager=True, max_model_len=1024, max_num_seqs=4,
                        structured_outputs_config={"backend": "leapgen", "disable_any_whitespace": True},
                        speculative_config={"method": "custom_class", "model": JUMP_FORWARD_PROPOSER,
                                            "num_speculative_tokens": 6}).create_engine_config()
    return LeapgenBackend(config, hf_tokenizer, config.model_config.get_vocab_size())


def _walk(grammar, rng, eos, max_steps=300):
    """Sample from the grammar's own rows until it terminates; returns the tokens."""
    import torch

    bitmask = torch.zeros((1, (grammar.matcher.compiled_grammar.tokenizer_info.vocab_size + 31) // 32),
                          dtype=torch.int32)
    tokens = []
    for _ in range(max_steps):
        grammar.fill_bitmask(bitmask, 0)
        allowed = sorted(_allowed(bitmask[0].numpy(), grammar.matcher.compiled_grammar.tokenizer_info.vocab_size))
        token = eos if eos in allowed and rng.random() < 0.5 else rng.choice(allowed)
        assert grammar.accept_tokens("r", [token])
        tokens.append(token)
        if grammar.is_terminated():
            return tokens
    raise AssertionError("the walk did not terminate")


def test_jump_forward_rows_are_the_plan_and_the_plan_is_the_forced_text(jf_backend, hf_tokenizer):
    """With the proposer configured, a forced state's row allows exactly the plan's next token,
    the plan's bytes are a prefix of the forced text, and its tokens are accepted."""
    import torch

    from vllm.v1.structured_output.backend_types import StructuredOutputOptions

    eos = hf_tokenizer.eos_token_id
    vocab = jf_backend.tokenizer_info.token_bytes
    grammar = jf_backend.compile_grammar(StructuredOutputOptions.JSON, json.dumps(SCHEMA), stop_token_ids={eos})
    bitmask = torch.zeros((1, (jf_backend.vocab_size + 31) // 32), dtype=torch.int32)
    rng, planned = random.Random(3), 0
    while not grammar.is_terminated():
        plan = grammar.forced_token_ids()
        forced = grammar.matcher.find_jump_forward_string().encode()
        assert forced.startswith(b"".join(vocab[t] for t in plan))
        grammar.fill_bitmask(bitmask, 0)
        allowed = _allowed(bitmask[0].numpy(), jf_backend.vocab_size)
        if plan:
            planned += 1
            assert allowed == {plan[0]}
        else:
            exact = torch.zeros_like(bitmask)
            grammar.matcher.fill_next_token_bitmask(exact, 0)
            assert (exact == bitmask).all()
        token = eos if eos in allowed and rng.random() < 0.5 else rng.choice(sorted(allowed))
        assert grammar.accept_tokens("r", [token])
    assert planned >= 3  # '{"name":"', '","age":' ... were forced


def test_the_plan_depends_on_the_tokens_alone(jf_backend, hf_tokenizer):
    """A second grammar fed the same tokens in other chunks, with rollbacks and validate_tokens
    between (what the scheduler does with drafts), plans the same tokens at every point."""
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions

    eos = hf_tokenizer.eos_token_id
    spec = json.dumps(SCHEMA)
    for seed in range(4):
        first = jf_backend.compile_grammar(StructuredOutputOptions.JSON, spec, stop_token_ids={eos})
        tokens = _walk(first, random.Random(seed), eos)
        first.reset()
        plans = []
        for token in tokens:
            plans.append(first.forced_token_ids())
            first.accept_tokens("a", [token])
        second = jf_backend.compile_grammar(StructuredOutputOptions.JSON, spec, stop_token_ids={eos})
        rng, i = random.Random(seed + 100), 0
        while i < len(tokens):
            assert second.forced_token_ids() == plans[i]
            chunk = tokens[i:i + rng.randint(1, 5)]
            assert second.validate_tokens(chunk + [eos])[:len(chunk)] == chunk
            assert second.accept_tokens("b", chunk)
            back = rng.randint(0, len(chunk))
            if back and not second.is_terminated():
                second.rollback(back)
                i += len(chunk) - back
            else:
                i += len(chunk)
        assert second.is_terminated()


def test_validate_tokens_does_not_advance_and_accept_after_termination_is_ignored(jf_backend, hf_tokenizer):
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions

    eos = hf_tokenizer.eos_token_id
    grammar = jf_backend.compile_grammar(StructuredOutputOptions.CHOICE, json.dumps(["yes", "no"]),
                                         stop_token_ids={eos})
    yes = hf_tokenizer.encode("yes", add_special_tokens=False)
    no = hf_tokenizer.encode("no", add_special_tokens=False)
    assert grammar.validate_tokens(yes + [eos] + no) == yes + [eos]
    assert grammar.validate_tokens(no + no) == no
    assert grammar.matcher.num_accepted_tokens == 0 and not grammar.is_terminated()
    assert grammar.accept_tokens("r", yes + [eos] + no)  # tokens after the stop token are ignored
    assert grammar.is_terminated() and grammar.validate_tokens(yes) == []
    grammar.rollback(1)
    assert not grammar.is_terminated()
    assert not grammar.accept_tokens("r", no)  # rejected
