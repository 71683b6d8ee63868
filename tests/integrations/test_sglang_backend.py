"""leapgen's SGLang grammar backend against SGLang's own classes and call sequences.

SGLang's server cannot run on this CPU (no CPU build of its kernels), so the
tests drive what the scheduler drives: the real ``GrammarManager``
(``process_req_with_grammar`` -> compile on the backend's executor ->
``get_ready_grammar_requests``, the cache and ``copy()``), the batch mask path
of ``SamplingBatchInfo.update_regex_vocab_mask`` (``allocate_vocab_mask``,
``fill_vocab_mask_batched``, ``move_vocab_mask``, ``GrammarMask.apply``),
``accept_token`` after sampling, SGLang's ``ReasonerGrammarBackend`` wrapper,
and jump-forward as SGLang's scheduler called it (``try_jump_forward``,
``jump_forward_str_state``, retokenizing prompt + output + forced text,
``jump_and_retokenize``). Oracles: ``jsonschema``, ``re``, bytes of tokens.

SGLang's runtime context is set from ``ServerArgs`` without its
``resolve_once`` (which loads model configs that import torchvision, absent
here): ``sglang.srt.configs``'s package ``__init__`` (every vision model's
config) is skipped, its submodules load as they are.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import time
import types

import pytest

pytestmark = pytest.mark.sglang

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"]}


@pytest.fixture(scope="module")
def sglang_context(model_folder):
    """SGLang's process context for a scheduler with ``--grammar-backend leapgen``."""
    if "sglang.srt.configs" not in sys.modules:
        srt = importlib.util.find_spec("sglang.srt")
        configs = types.ModuleType("sglang.srt.configs")
        configs.__path__ = [f"{srt.submodule_search_locations[0]}/configs"]
        sys.modules["sglang.srt.configs"] = configs
    import leapgen.integrations.sglang as ls

    ls.register()
    from sglang.srt import runtime_context
    from sglang.srt.server_args import ServerArgs

    args = ServerArgs(model_path=model_folder, grammar_backend="leapgen", device="cpu")
    runtime_context.get_context().set_server_args(args)
    runtime_context.get_parallel().override_permanently(pp_rank=0)
    return args


def _scheduler(args, tokenizer):
    """The attributes of SGLang's Scheduler that its GrammarManager reads."""
    return types.SimpleNamespace(
        server_args=args, tokenizer=tokenizer, pp_group=None, dp_tp_cpu_group=None,
        model_config=types.SimpleNamespace(vocab_size=len(tokenizer), hf_eos_token_id={tokenizer.eos_token_id},
                                           think_end_ids=None),
        dp_tp_group=types.SimpleNamespace(world_size=1, first_rank=0, is_first_rank=True))


class Req:
    """The fields of SGLang's ``Req`` that the grammar manager and jump-forward read and write."""

    def __init__(self, rid, sampling_params, input_ids):
        self.rid = rid
        self.sampling_params = sampling_params
        self.origin_input_ids = list(input_ids)
        self.output_ids: list[int] = []
        self.require_reasoning = False
        self.grammar = self.grammar_key = None
        self.grammar_wait_ct = 0
        self.abort_message = None

    def finished(self):
        return self.abort_message is not None

    def set_finish_with_abort(self, message):
        self.abort_message = message


@pytest.fixture(scope="module")
def manager(sglang_context, hf_tokenizer):
    from sglang.srt.constrained.grammar_manager import GrammarManager

    return GrammarManager(_scheduler(sglang_context, hf_tokenizer))


def _compiled(manager, *reqs, timeout=60.0):
    """SGLang's queue -> ready loop, until every request left the queue."""
    for req in reqs:
        manager.process_req_with_grammar(req)
    deadline = time.monotonic() + timeout
    while manager.grammar_queue:
        assert time.monotonic() < deadline
        manager.get_ready_grammar_requests()
    return reqs


def _request(rid, tokenizer, **constraint):
    from sglang.srt.sampling.sampling_params import SamplingParams

    prompt = tokenizer.apply_chat_template([{"role": "user", "content": f"Request {rid}."}],
                                           add_generation_prompt=True, tokenize=False)
    return Req(rid, SamplingParams(max_new_tokens=200, **constraint), tokenizer.encode(prompt))


def _step_masks(reqs, vocab_size):
    """``SamplingBatchInfo.update_regex_vocab_mask`` + ``GrammarMask.apply`` on random logits."""
    import torch
    from sglang.srt.constrained.base_grammar_backend import GrammarMask, GrammarRow

    grammars = [r.grammar for r in reqs]
    first = next(g for g in grammars if g)
    vocab_mask = first.allocate_vocab_mask(vocab_size=vocab_size, batch_size=len(reqs), device="cpu")
    entries = [GrammarRow(row=i, grammar=g) for i, g in enumerate(grammars)
               if g and not g.finished and not g.is_terminated()]
    first.fill_vocab_mask_batched(entries, vocab_mask)
    vocab_mask = first.move_vocab_mask(vocab_mask, "cpu")
    logits = torch.randn(len(reqs), vocab_size)
    GrammarMask(first, vocab_mask).apply(logits)
    return logits, vocab_mask


def test_manager_selects_leapgen_and_caches_copies(manager, hf_tokenizer):
    from leapgen.integrations.sglang_backend import LeapgenGrammar, LeapgenGrammarBackend

    assert isinstance(manager.grammar_backend, LeapgenGrammarBackend)
    a, = _compiled(manager, _request("a", hf_tokenizer, regex=r"\d{3}"))
    b = _request("b", hf_tokenizer, regex=r"\d{3}")
    assert not manager.process_req_with_grammar(b)  # a cache hit: a fresh copy at the grammar's start
    assert isinstance(a.grammar, LeapgenGrammar) and isinstance(b.grammar, LeapgenGrammar)
    assert b.grammar is not a.grammar and b.grammar.compiled is a.grammar.compiled
    assert b.grammar.grammar_stats.is_cache_hit


@pytest.mark.parametrize("constraint, field, where", [
    ({"regex": "a(b"}, "regex", "offset 1"),
    ({"json_schema": '{"type": "object", "properties": {"a": {"type": "strin"}}}'}, "json", "/properties/a"),
    ({"ebnf": 'root ::= "a" nowhere'}, "ebnf", "nowhere"),
])
def test_a_bad_grammar_aborts_its_request_alone(manager, hf_tokenizer, constraint, field, where):
    bad = _request(f"bad-{field}", hf_tokenizer, **constraint)
    good = _request(f"good-{field}", hf_tokenizer, json_schema=json.dumps(SCHEMA))
    _compiled(manager, bad, good)
    assert bad.abort_message.startswith(f"Failed to compile {field} grammar:") and where in bad.abort_message
    assert good.abort_message is None and not good.grammar.is_terminated()
    again = _request(f"again-{field}", hf_tokenizer, **constraint)  # the cached failure
    manager.process_req_with_grammar(again)
    assert again.abort_message == bad.abort_message


def test_structural_tag_compiles_and_a_bad_one_aborts_alone(manager, hf_tokenizer):
    tag = json.dumps({"type": "structural_tag", "structures": [{"begin": "<f>", "schema": SCHEMA, "end": "</f>"}],
                      "triggers": ["<f>"]})
    bad = json.dumps({"type": "structural_tag", "format": {"type": "const_strin", "value": "x"}})
    good, wrong = _compiled(manager, _request("tag", hf_tokenizer, structural_tag=tag),
                            _request("bad-tag", hf_tokenizer, structural_tag=bad))
    assert good.abort_message is None and not good.grammar.is_terminated()
    assert wrong.abort_message.startswith("Failed to compile structural_tag grammar:")
    assert "/format" in wrong.abort_message


def test_batched_decode_through_sglangs_mask_path_gives_valid_outputs(manager, hf_tokenizer):
    """Four requests decoded together from random logits through SGLang's mask calls and
    accept_token; a padding row (no grammar) stays unconstrained."""
    import jsonschema
    import torch

    vocab_size, eos = len(hf_tokenizer), hf_tokenizer.eos_token_id
    reqs = list(_compiled(manager, _request("j1", hf_tokenizer, json_schema=json.dumps(SCHEMA)),
                          _request("r1", hf_tokenizer, regex=r"[a-z]{2,5}@[a-z]{2,5}\.(com|org)"),
                          _request("e1", hf_tokenizer, ebnf='root ::= "(" [0-9]+ ("+" [0-9]+)* ")"'),
                          _request("j2", hf_tokenizer, json_schema="$$ANY$$")))
    reqs.append(types.SimpleNamespace(grammar=None))
    # After 40 tokens the walk closes what is open (eos, then ``"``, ``}``, ``]``, ``)``) whenever
    # the mask allows it, so every request ends within the step budget; before that it is random.
    closers = [eos] + [hf_tokenizer.convert_tokens_to_ids(t) for t in ('"', "}", "]", ")")]
    torch.manual_seed(0)
    for _ in range(300):
        live = [r for r in reqs[:-1] if not r.grammar.is_terminated()]
        if not live:
            break
        logits, vocab_mask = _step_masks(reqs, vocab_size)
        assert torch.isfinite(logits[-1]).all()  # the row without a grammar
        for i, r in enumerate(reqs[:-1]):
            if r.grammar.is_terminated():
                continue
            row = logits[i]
            closing = [t for t in closers if torch.isfinite(row[t])] if len(r.output_ids) > 40 else []
            if closing:
                token = closing[0]
            else:
                token = int(torch.argmax(row + 8 * torch.rand(vocab_size)))
            assert torch.isfinite(row[token])
            r.grammar.accept_token(token)
            r.output_ids.append(token)
    texts = [hf_tokenizer.decode(r.output_ids[:-1]) for r in reqs[:-1]]
    assert all(r.grammar.is_terminated() and r.output_ids[-1] == eos for r in reqs[:-1]), texts
    jsonschema.validate(json.loads(texts[0]), SCHEMA)
    assert re.fullmatch(r"[a-z]{2,5}@[a-z]{2,5}\.(com|org)", texts[1])
    assert re.fullmatch(r"\(\d+(\+\d+)*\)", texts[2])
    json.loads(texts[3])


def test_accept_token_rejects_with_value_error_and_rollback_restores(manager, hf_tokenizer):
    req, = _compiled(manager, _request("v", hf_tokenizer, regex="(yes|no)"))
    grammar = req.grammar
    yes = hf_tokenizer.encode("yes", add_special_tokens=False)
    with pytest.raises(ValueError, match="not accepted"):
        grammar.accept_token(hf_tokenizer.encode("maybe", add_special_tokens=False)[0])
    for token in yes:
        grammar.accept_token(token)
    grammar.accept_token(hf_tokenizer.eos_token_id)
    assert grammar.is_terminated()
    grammar.rollback(len(yes) + 1)
    assert not grammar.is_terminated()
    for token in hf_tokenizer.encode("no", add_special_tokens=False):
        grammar.accept_token(token)
    grammar.accept_token(hf_tokenizer.eos_token_id)
    assert grammar.is_terminated()


def _jump_forward(req, tokenizer):
    """SGLang's ``ScheduleBatch.check_for_jump_forward`` and ``Req.jump_forward_and_retokenize``
    (v0.4, when its scheduler still called them) for one request; True if it jumped."""
    helper = req.grammar.try_jump_forward(tokenizer)
    if not helper:
        return False
    suffix_ids, _ = helper
    assert suffix_ids == []
    jump_forward_str, next_state = req.grammar.jump_forward_str_state(helper)
    all_text = tokenizer.decode(req.origin_input_ids) + tokenizer.decode(req.output_ids) + jump_forward_str
    all_ids = tokenizer.encode(all_text)
    prompt_tokens = len(req.origin_input_ids)
    if all_ids[prompt_tokens - 1] != req.origin_input_ids[-1]:
        return False  # token fusion between prompt and output: SGLang skipped the jump
    old_output_ids = req.output_ids
    req.output_ids = all_ids[prompt_tokens:]
    req.grammar.jump_and_retokenize(old_output_ids, req.output_ids, next_state)
    return True


def test_jump_forward_in_sglangs_call_sequence(manager, hf_tokenizer):
    """Decode with jump-forward after every sampled token: the output is valid JSON, the forced
    text was appended without sampling, and the grammar followed the retokenized ids."""
    import jsonschema
    import torch

    vocab_size, eos = len(hf_tokenizer), hf_tokenizer.eos_token_id
    for seed in range(3):
        req, = _compiled(manager, _request(f"jf{seed}", hf_tokenizer, json_schema=json.dumps(SCHEMA)))
        torch.manual_seed(seed)
        sampled = jumps = 0
        while not req.grammar.is_terminated():
            logits, _ = _step_masks([req], vocab_size)
            row = logits[0]
            token = eos if torch.isfinite(row[eos]) else int(torch.argmax(row + 8 * torch.rand(vocab_size)))
            req.grammar.accept_token(token)
            req.output_ids.append(token)
            sampled += 1
            if not req.grammar.is_terminated():
                jumps += _jump_forward(req, hf_tokenizer)
            assert sampled < 200
        text = hf_tokenizer.decode(req.output_ids[:-1])
        jsonschema.validate(json.loads(text), SCHEMA)
        assert jumps >= 2 and sampled < len(req.output_ids)
        replay = req.grammar.copy()  # the retokenized ids are exactly what the grammar accepted
        for token in req.output_ids:
            replay.accept_token(token)
        assert replay.is_terminated()


def test_jump_and_retokenize_restores_the_grammar_on_rejected_ids(manager, hf_tokenizer):
    req, = _compiled(manager, _request("rt", hf_tokenizer, regex=r"abc[0-9]"))
    ab = hf_tokenizer.encode("ab", add_special_tokens=False)
    for token in ab:
        req.grammar.accept_token(token)
    with pytest.raises(ValueError, match="retokenized"):
        req.grammar.jump_and_retokenize(ab, hf_tokenizer.encode("abx", add_special_tokens=False), -1)
    for token in hf_tokenizer.encode("c7", add_special_tokens=False):  # still after "ab"
        req.grammar.accept_token(token)
    req.grammar.accept_token(hf_tokenizer.eos_token_id)
    assert req.grammar.is_terminated()


def test_reasoning_parser_wraps_leapgen_in_sglangs_reasoner(sglang_context, hf_tokenizer, monkeypatch):
    """With --reasoning-parser, thinking text is free and the grammar applies after its end."""
    import torch
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend

    from leapgen.integrations.sglang import create_grammar_backend

    monkeypatch.setattr(sglang_context, "reasoning_parser", "deepseek-r1")
    backend = create_grammar_backend(sglang_context, hf_tokenizer, len(hf_tokenizer), {hf_tokenizer.eos_token_id})
    assert isinstance(backend, ReasonerGrammarBackend)
    value, hit = backend.get_cached_or_future_value(("regex", "(yes|no)"), require_reasoning=True)
    grammar = value.result()
    backend.set_cache(("regex", "(yes|no)"), grammar.copy())
    grammar = grammar.copy()
    grammar.maybe_init_reasoning(True)
    vocab_mask = grammar.allocate_vocab_mask(len(hf_tokenizer), 1, "cpu")
    grammar.fill_vocab_mask(vocab_mask, 0)
    assert (vocab_mask == -1).all()  # thinking: unconstrained
    for token in hf_tokenizer.encode("hmm</think>", add_special_tokens=False):
        grammar.accept_token(token)
    grammar.fill_vocab_mask(vocab_mask, 0)
    logits = torch.zeros(1, len(hf_tokenizer))
    grammar.apply_vocab_mask(logits, vocab_mask)
    allowed = {i for i in torch.isfinite(logits[0]).nonzero().flatten().tolist()}
    assert allowed and all(b"yes".startswith(hf_tokenizer.decode([t]).encode()) or
                           b"no".startswith(hf_tokenizer.decode([t]).encode()) for t in allowed)


def test_whitespace_pattern_is_refused_and_compact_json_honoured(sglang_context, hf_tokenizer, monkeypatch):
    from leapgen.integrations.sglang import create_grammar_backend

    monkeypatch.setattr(sglang_context, "constrained_json_whitespace_pattern", "[ ]*")
    with pytest.raises(ValueError, match="whitespace-pattern is not supported"):
        create_grammar_backend(sglang_context, hf_tokenizer, len(hf_tokenizer), None)
    monkeypatch.setattr(sglang_context, "constrained_json_whitespace_pattern", None)
    monkeypatch.setattr(sglang_context, "constrained_json_disable_any_whitespace", True)
    backend = create_grammar_backend(sglang_context, hf_tokenizer, len(hf_tokenizer), hf_tokenizer.eos_token_id)
    grammar = backend.dispatch_json(json.dumps(SCHEMA))
    assert grammar.try_jump_forward(hf_tokenizer) == ([], '{"name":"')
