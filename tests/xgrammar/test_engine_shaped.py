"""What the xgrammar backends of vLLM and SGLang do, with ``import leapgen.xgrammar as xgr``.

The two classes below restate, call for call, what
``vllm/v1/structured_output/backend_xgrammar.py`` (``XgrammarBackend`` /
``XgrammarGrammar``, with ``utils.py``'s regex compile in a worker process,
its Lark-or-EBNF test and ``apply_grammar_bitmask``) and SGLang's
``python/sglang/srt/constrained/xgrammar_backend.py`` (``XGrammarGrammarBackend``
/ ``XGrammarGrammar``: dispatch per grammar kind, ``except RuntimeError``,
jump-forward with retokenization, ``copy``) do with the module, written here
without the engines (which this environment cannot run). Each is driven through
a decoding loop (batched bitmask, apply, sample, accept, speculative
validation, rollback, jump-forward) and run unchanged on both ``xgrammar`` and
``leapgen.xgrammar`` (the ``xgr`` fixture): outputs must satisfy their grammar
(checked with ``jsonschema`` and the ``regex`` module), bad grammars must take
the engines' error paths.
"""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor

import pytest

FAMILY = "llama3"
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age"]}
REFERENCES = {  # what the "model" is nudged toward (every output is still masked)
    "json": '{"name": "Ada", "age": 36, "tags": ["math"]}',
    "json_object": '{"k": [1, 2]}',
    "regex": "2024-05-17",
    "grammar": "(1+2)*3",
    "builtin": '[{"a": true}]',
}
REGEX = r"\d{4}-\d{2}-\d{2}"
EBNF = 'root ::= expr\nexpr ::= term ("+" term)*\nterm ::= factor ("*" factor)*\nfactor ::= [0-9]+ | "(" expr ")"'
LARK = 'start: expr\nexpr: term ("+" term)*\nterm: factor ("*" factor)*\nfactor: /[0-9]+/ | "(" expr ")"'


def grammar_is_likely_lark(grammar: str) -> bool:
    """vLLM's test: Lark unless some line defines a rule with ``::=``."""
    import re

    return not any("::=" in re.sub(r"(#|//).*$", "", line) for line in grammar.split("\n"))


@pytest.fixture(scope="module")
def hf():
    from vocab_loaders import load_encoder, load_hf_tokenizer

    return load_hf_tokenizer(FAMILY), load_encoder(FAMILY)


def _xgr_compile_regex(module: str, tokenizer_info_json: str, pattern: str) -> str:
    """vLLM's picklable worker: rebuild the vocabulary and compile a regex in another process."""
    import importlib

    xgr = importlib.import_module(module)
    info = xgr.TokenizerInfo.deserialize_json(tokenizer_info_json)
    return xgr.GrammarCompiler(info, max_threads=1).compile_regex(pattern).serialize_json()


class VllmShapedBackend:
    """vLLM's ``XgrammarBackend`` + ``XgrammarGrammar`` calls."""

    def __init__(self, xgr, tokenizer, vocab_size: int, num_speculative_tokens: int, pool):
        self.xgr = xgr
        self.vocab_size = vocab_size
        self.tokenizer_info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = xgr.GrammarCompiler(self.tokenizer_info, max_threads=8, cache_enabled=True,
                                            cache_limit_bytes=64 * 1024 * 1024)
        self.tokenizer_info_json = self.tokenizer_info.serialize_json()
        self.num_speculative_tokens = num_speculative_tokens
        self.pool = pool

    def validate(self, kind: str, spec: str) -> None:
        """``validate_xgrammar_grammar``: build a Grammar without compiling; any error is a bad request."""
        xgr = self.xgr
        try:
            if kind == "regex":
                xgr.Grammar.from_regex(spec).serialize_json()
            elif kind == "json":
                xgr.Grammar.from_json_schema(json.loads(spec))
            elif kind == "grammar":
                xgr.Grammar.from_lark(spec) if grammar_is_likely_lark(spec) else xgr.Grammar.from_ebnf(spec)
        except Exception as err:
            raise ValueError(f"invalid {kind} spec: {err}") from err

    def compile_grammar(self, kind: str, spec: str, stop_token_ids=None):
        xgr = self.xgr
        if kind == "json":
            ctx = self.compiler.compile_json_schema(spec, any_whitespace=True)
        elif kind == "json_object":
            ctx = self.compiler.compile_json_schema('{"type": "object"}', any_whitespace=True)
        elif kind == "grammar":
            ctx = self.compiler.compile_lark(spec) if grammar_is_likely_lark(spec) else self.compiler.compile_grammar(spec)
        elif kind == "regex":
            serialized = self.pool.submit(_xgr_compile_regex, xgr.__name__, self.tokenizer_info_json, spec).result()
            ctx = xgr.CompiledGrammar.deserialize_json(serialized, self.tokenizer_info)
        else:
            ctx = self.compiler.compile_builtin_json_grammar()
        matcher = xgr.GrammarMatcher(ctx, override_stop_tokens=list(stop_token_ids) if stop_token_ids else None,
                                     max_rollback_tokens=self.num_speculative_tokens)
        return VllmShapedGrammar(matcher)

    def allocate_token_bitmask(self, max_num_seqs: int):
        return self.xgr.allocate_token_bitmask(max_num_seqs, self.vocab_size)

    def apply_grammar_bitmask(self, logits, bitmask, out_indices: list[int]) -> None:
        """``apply_grammar_bitmask`` on CPU: indices only when some rows are unstructured."""
        indices = None if len(out_indices) == logits.shape[0] else out_indices
        self.xgr.apply_token_bitmask_inplace(logits, bitmask, indices=indices)


class VllmShapedGrammar:
    def __init__(self, matcher):
        self.matcher = matcher
        self.num_processed_tokens = 0
        self._is_terminated = False

    def accept_tokens(self, tokens: list[int]) -> bool:
        if self._is_terminated:
            return True
        for token in tokens:
            if not self.matcher.accept_token(token):
                return False
            self.num_processed_tokens += 1
            self._is_terminated = self.matcher.is_terminated()
            if self._is_terminated:
                break
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        if self._is_terminated:
            return []
        accepted = []
        for token in tokens:
            if self.matcher.accept_token(token):
                accepted.append(token)
                if self.matcher.is_terminated():
                    break
            else:
                break
        if accepted:
            self.matcher.rollback(len(accepted))
        return accepted

    def rollback(self, num_tokens: int) -> None:
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens
        self._is_terminated = self.matcher.is_terminated()

    def fill_bitmask(self, bitmask, idx: int) -> None:
        self.matcher.fill_next_token_bitmask(bitmask, idx)

    def is_terminated(self) -> bool:
        return self._is_terminated

    def reset(self) -> None:
        self.matcher.reset()
        self.num_processed_tokens = 0
        self._is_terminated = False


class SglangShapedBackend:
    """SGLang's ``XGrammarGrammarBackend`` calls (dispatch per kind, errors as invalid grammars)."""

    MAX_ROLLBACK_TOKENS = 200

    def __init__(self, xgr, tokenizer, vocab_size: int, model_eos_token_ids=None):
        self.xgr = xgr
        tokenizer_info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size,
                                                            stop_token_ids=model_eos_token_ids)
        self.grammar_compiler = xgr.GrammarCompiler(tokenizer_info=tokenizer_info)
        self.vocab_size = vocab_size

    def _from_context(self, ctx):
        matcher = self.xgr.GrammarMatcher(ctx, max_rollback_tokens=self.MAX_ROLLBACK_TOKENS, override_stop_tokens=None)
        return SglangShapedGrammar(self.xgr, matcher, ctx)

    def dispatch(self, kind: str, key_string: str):
        try:
            if kind == "json":
                ctx = (self.grammar_compiler.compile_builtin_json_grammar() if key_string == "$$ANY$$"
                       else self.grammar_compiler.compile_json_schema(schema=key_string, any_whitespace=True))
            elif kind == "ebnf":
                ctx = self.grammar_compiler.compile_grammar(key_string)
            elif kind == "regex":
                ctx = self.grammar_compiler.compile_regex(key_string)
            else:
                structural_tag = json.loads(key_string)
                tags = [self.xgr.StructuralTagItem(begin=s["begin"], schema=json.dumps(s["schema"]), end=s["end"])
                        for s in structural_tag["structures"]]
                new_tag = self.xgr.StructuralTag.from_legacy_structural_tag(tags, structural_tag["triggers"])
                new_tag.format.at_least_one = structural_tag.get("at_least_one", False)
                ctx = self.grammar_compiler.compile_structural_tag(new_tag)
        except (RuntimeError, json.decoder.JSONDecodeError, UnicodeDecodeError) as e:
            return ("invalid", str(e))
        return self._from_context(ctx)

    def allocate_vocab_mask(self, batch_size: int):
        import torch

        return torch.full(self.xgr.get_bitmask_shape(batch_size, self.vocab_size), -1, dtype=self.xgr.bitmask_dtype)

    def apply_vocab_mask(self, logits, vocab_mask) -> None:
        self.xgr.apply_token_bitmask_inplace(logits, vocab_mask)

    def reset(self) -> None:
        self.grammar_compiler.clear_cache()


class SglangShapedGrammar:
    def __init__(self, xgr, matcher, ctx):
        self.xgr, self.matcher, self.ctx = xgr, matcher, ctx
        self.accepted_tokens: list[int] = []

    def accept_token(self, token: int) -> None:
        if not self.is_terminated():
            if not self.matcher.accept_token(token):
                raise ValueError(f"Tokens not accepted: {token}")
            self.accepted_tokens.append(token)

    def rollback(self, k: int) -> None:
        self.matcher.rollback(k)
        if k:
            del self.accepted_tokens[-k:]

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def fill_vocab_mask(self, vocab_mask, idx: int) -> None:
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    def try_jump_forward(self):
        s = self.matcher.find_jump_forward_string()
        return ([], s) if s else None

    def jump_and_retokenize(self, old_output_ids: list[int], new_output_ids: list[int]) -> None:
        k = 0
        for i, old_id in enumerate(old_output_ids):
            if i < len(new_output_ids) and old_id == new_output_ids[i]:
                k = i + 1
            else:
                break
        if k < len(old_output_ids):
            self.matcher.rollback(len(old_output_ids) - k)
        for i in range(k, len(new_output_ids)):
            if not self.matcher.accept_token(new_output_ids[i]):
                raise ValueError(f"Token not accepted during retokenization: {new_output_ids[i]}")

    def copy(self):
        matcher = self.xgr.GrammarMatcher(self.ctx, max_rollback_tokens=SglangShapedBackend.MAX_ROLLBACK_TOKENS,
                                          override_stop_tokens=None)
        return SglangShapedGrammar(self.xgr, matcher, self.ctx)


# -- a toy "model": random logits nudged toward a reference text ------------------------------------

class NudgedModel:
    """Logits: seeded noise plus a bonus for the first token of what is left of a
    reference text (so outputs finish), and for the stop token once it is done."""

    def __init__(self, tokenizer, encode, vocab_size: int, stop: int, seed: int = 0):
        import torch

        self.tokenizer, self.encode, self.vocab_size, self.stop = tokenizer, encode, vocab_size, stop
        self.gen = torch.Generator().manual_seed(seed)

    def logits(self, references: list[str], produced: list[list[int]]):
        import torch

        out = torch.randn(len(references), self.vocab_size, generator=self.gen)
        for row, (ref, got) in enumerate(zip(references, produced)):
            text = self.tokenizer.decode(got)
            rest = ref[len(text):] if ref.startswith(text) else ""
            out[row, self.encode(rest)[0] if rest else self.stop] += 50.0
        return out

    def draft(self, reference: str, produced: list[int], k: int) -> list[int]:
        """The next ``k`` reference tokens after ``produced`` (a speculative draft)."""
        text = self.tokenizer.decode(produced)
        return self.encode(reference[len(text):])[:k] if reference.startswith(text) else []


def _check_output(kind: str, text: str) -> None:
    import jsonschema
    import regex

    if kind == "json":
        jsonschema.validate(json.loads(text), SCHEMA)
    elif kind in ("json_object", "builtin"):
        assert isinstance(json.loads(text), (dict, list))
    elif kind == "regex":
        assert regex.fullmatch(REGEX, text)
    else:
        assert regex.fullmatch(r"[0-9+*()]+", text) and eval(text, {}) == 9  # noqa: S307 - digits and operators


def test_vllm_shaped_backend(xgr, hf):
    import torch

    tokenizer, encode = hf
    vocab_size = len(tokenizer.get_vocab())
    with ProcessPoolExecutor(max_workers=1) as pool:
        backend = VllmShapedBackend(xgr, tokenizer, vocab_size, num_speculative_tokens=3, pool=pool)
        for kind, spec in [("regex", "(ab"), ("json", '{"type": "foo"}'), ("grammar", "root ::= nothing")]:
            with pytest.raises(ValueError, match="invalid"):
                backend.validate(kind, spec)
        with pytest.raises(RuntimeError):
            backend.compile_grammar("grammar", "root ::= nothing")  # vLLM's compile step raises into the engine
        specs = [("json", json.dumps(SCHEMA)), ("json_object", ""), ("regex", REGEX), ("grammar", EBNF),
                 ("grammar", LARK), ("builtin", "")]
        for kind, spec in specs:
            backend.validate(kind, spec)
        grammars = [backend.compile_grammar(kind, spec) for kind, spec in specs]
        references = [REFERENCES[kind] for kind, _ in specs]
        model = NudgedModel(tokenizer, encode, vocab_size, stop=backend.tokenizer_info.stop_token_ids[0])
        produced: list[list[int]] = [[] for _ in specs]
        bitmask = backend.allocate_token_bitmask(len(specs) + 1)  # one unstructured row, never filled
        for _ in range(60):
            live = [i for i, g in enumerate(grammars) if not g.is_terminated()]
            if not live:
                break
            for i in live:
                grammars[i].fill_bitmask(bitmask, i)
            logits = model.logits(references + [""], produced + [[]])
            backend.apply_grammar_bitmask(logits, bitmask, live)
            for i in live:
                token = int(torch.argmax(logits[i]))
                assert grammars[i].accept_tokens([token])
                produced[i].append(token)
                draft = model.draft(references[i], produced[i], 2)  # a speculative draft
                valid = grammars[i].validate_tokens(draft)  # checked, then rolled back
                assert valid == draft[:len(valid)]
                if valid and not grammars[i].is_terminated():
                    assert grammars[i].accept_tokens(valid[:1])
                    grammars[i].rollback(1)  # the draft was rejected by the target model
        for (kind, _), g, out in zip(specs, grammars, produced):
            assert g.is_terminated(), kind
            _check_output(kind, tokenizer.decode(out[:-1]))
        grammars[0].reset()
        assert grammars[0].num_processed_tokens == 0 and not grammars[0].is_terminated()


def test_sglang_shaped_backend(xgr, hf):
    import torch

    tokenizer, encode = hf
    vocab_size = len(tokenizer.get_vocab())
    backend = SglangShapedBackend(xgr, tokenizer, vocab_size, model_eos_token_ids=[tokenizer.eos_token_id])
    for kind, key in [("json", '{"type": "foo"}'), ("json", "{bad json"), ("ebnf", 'root ::= "a'),
                      ("regex", "(ab")]:
        got = backend.dispatch(kind, key)
        assert isinstance(got, tuple) and got[0] == "invalid", (kind, key)
    specs = [("json", json.dumps(SCHEMA), "json"), ("json", "$$ANY$$", "builtin"), ("regex", REGEX, "regex"),
             ("ebnf", EBNF, "grammar")]
    grammars = [backend.dispatch(kind, key).copy() for kind, key, _ in specs]  # SGLang copies the cached object
    references = [REFERENCES[ref] for _, _, ref in specs]
    model = NudgedModel(tokenizer, encode, vocab_size, stop=tokenizer.eos_token_id, seed=1)
    produced: list[list[int]] = [[] for _ in specs]
    vocab_mask = backend.allocate_vocab_mask(len(specs))
    jumps = 0
    for _ in range(60):
        live = [i for i, g in enumerate(grammars) if not g.is_terminated()]
        if not live:
            break
        for i in live:
            grammars[i].fill_vocab_mask(vocab_mask, i)
        logits = model.logits(references, produced)
        backend.apply_vocab_mask(logits, vocab_mask)
        for i in live:
            token = int(torch.argmax(logits[i]))
            grammars[i].accept_token(token)
            produced[i].append(token)
            if grammars[i].is_terminated():
                continue
            helper = grammars[i].try_jump_forward()
            if helper is not None:  # jump forward: append the forced text, retokenize, rewind to the common prefix
                text = tokenizer.decode(produced[i]) + helper[1]
                new_ids = encode(text)
                grammars[i].jump_and_retokenize(produced[i], new_ids)
                produced[i] = new_ids
                jumps += 1
    assert jumps > 0
    for (_, _, ref), g, out in zip(specs, grammars, produced):
        assert g.is_terminated(), ref
        _check_output(ref, tokenizer.decode(out[:-1]))
    backend.reset()
    legacy = json.dumps({"structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}],
                         "triggers": ["<f>"]})
    got = backend.dispatch("structural_tag", legacy)
    assert not isinstance(got, tuple)
    m = got.copy().matcher
    assert m.accept_string("Sure. <f>42</f> and more text") and m.is_completed()
    assert not m.accept_string("<f>x")
    bad = backend.dispatch("structural_tag", json.dumps({"structures": [{"begin": "<f>", "schema": {"type": "foo"},
                                                                          "end": "</f>"}], "triggers": ["<f>"]}))
    assert isinstance(bad, tuple) and bad[0] == "invalid"  # the engine's error path
