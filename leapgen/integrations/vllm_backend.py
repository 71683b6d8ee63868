"""leapgen's pair of vLLM structured-output classes: ``StructuredOutputBackend`` /
``StructuredOutputGrammar``, and the check of a request's constraint.

vLLM's own ``StructuredOutputManager`` drives them (async compiles on its
executor, bitmask rows per speculative position, ``validate_tokens`` of drafts,
``rollback`` of rejected drafts, reasoning-parser gating); the bitmask is
applied by vLLM's sampler. :mod:`leapgen.integrations.vllm` selects them under
the name ``"leapgen"``.

With jump-forward on (the speculative proposer
:class:`~leapgen.integrations.vllm_jump_forward.JumpForwardProposer`), a state
whose text the grammar forces has a one-token bitmask row: the next token of
the forced text's own tokenization (see
:mod:`leapgen.integrations.vllm_jump_forward` for why).

Imports vLLM: load only inside vLLM's processes.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import check_json_nesting
from vllm.v1.structured_output.backend_types import (StructuredOutputBackend, StructuredOutputGrammar,
                                                     StructuredOutputOptions)
from vllm.v1.structured_output.utils import grammar_is_likely_lark

from leapgen.bitmask import allocate_token_bitmask
from leapgen.compiler import CompiledGrammar, GrammarCompiler
from leapgen.errors import GrammarError, LeapgenError, StackDepthError
from leapgen.integrations import BACKEND_NAME
from leapgen.integrations.forced_tokens import ForcedTokens
from leapgen.matcher import GrammarMatcher
from leapgen.vocab import TokenizerInfo

logger = logging.getLogger(__name__)

JUMP_FORWARD_PROPOSER = "leapgen.integrations.vllm_jump_forward.JumpForwardProposer"
"""The ``speculative_config["model"]`` (``method="custom_class"``) that turns jump-forward on."""

def compile_structured_output(compiler: GrammarCompiler, request_type: StructuredOutputOptions, spec: str, *,
                              any_whitespace: bool = True) -> CompiledGrammar:
    """Compile one of vLLM's structured-output kinds with leapgen.

    Parameters
    ----------
    compiler : GrammarCompiler
    request_type : StructuredOutputOptions
        JSON (``spec`` a JSON Schema's text), JSON_OBJECT (any JSON object),
        REGEX, GRAMMAR (GBNF, or Lark as vLLM tells them apart), CHOICE (``spec`` a JSON list of strings),
        STRUCTURAL_TAG (xgrammar's structural-tag JSON).
    spec : str
        vLLM's grammar spec (``StructuredOutputRequest.structured_output_key[1]``).
    any_whitespace : bool, default True
        JSON layout: False is vLLM's ``disable_any_whitespace`` (compact,
        separators ``","`` and ``":"``).

    Returns
    -------
    CompiledGrammar

    Raises
    ------
    leapgen.errors.LeapgenError
        The grammar is malformed or unsupported (GrammarError and its
        subclasses: where it is wrong), or too large (CompileLimitError).
    """
    kind = StructuredOutputOptions
    if request_type == kind.JSON:
        return compiler.compile_json_schema(spec, any_whitespace=any_whitespace)
    if request_type == kind.JSON_OBJECT:  # any object: the schema's own meaning, not strict mode's
        return compiler.compile_json_schema({"type": "object"}, any_whitespace=any_whitespace, strict_mode=False)
    if request_type == kind.REGEX:
        return compiler.compile_regex(spec)
    if request_type == kind.GRAMMAR:  # vLLM's rule: GBNF when it has `::=`, else Lark
        return compiler.compile_lark(spec) if grammar_is_likely_lark(spec) else compiler.compile_grammar(spec)
    if request_type == kind.CHOICE:
        return compiler.compile_choice(json.loads(spec))
    if request_type == kind.STRUCTURAL_TAG:
        return compiler.compile_structural_tag(spec, any_whitespace=any_whitespace)
    raise GrammarError(f"unknown structured-output kind {request_type!r}")


def jump_forward_enabled(vllm_config: Any) -> bool:
    """Whether ``vllm_config`` runs the jump-forward proposer (``JUMP_FORWARD_PROPOSER``)."""
    spec = vllm_config.speculative_config
    return spec is not None and spec.method == "custom_class" and spec.model == JUMP_FORWARD_PROPOSER


class LeapgenBackend(StructuredOutputBackend):
    """vLLM's engine-level backend, on :class:`~leapgen.GrammarCompiler` (one per engine).

    Built by vLLM's ``StructuredOutputManager`` (through the plugin) with the
    engine's ``vllm_config``, tokenizer and logits width. Reads
    ``structured_outputs_config.disable_any_whitespace``; with the
    jump-forward proposer configured, its grammars plan forced tokens.

    Raises
    ------
    leapgen.errors.TokenizerError
        The tokenizer's token -> bytes mapping cannot be read.
    """

    def __init__(self, vllm_config: Any, tokenizer: Any, vocab_size: int):
        super().__init__(vllm_config, tokenizer, vocab_size)
        self.any_whitespace = not vllm_config.structured_outputs_config.disable_any_whitespace
        self.tokenizer_info = TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self.compiler = GrammarCompiler(self.tokenizer_info)
        spec = vllm_config.speculative_config
        self.num_speculative_tokens = spec.num_speculative_tokens if spec is not None else 0
        self.forced_tokens = ForcedTokens(tokenizer, self.tokenizer_info) if jump_forward_enabled(vllm_config) else None

    def compile_grammar(self, request_type: StructuredOutputOptions, grammar_spec: str,
                        stop_token_ids: set[int] | None = None) -> "LeapgenGrammar":
        """Compile a request's grammar (on vLLM's compile executor) into its per-request grammar.

        Parameters
        ----------
        request_type, grammar_spec
            vLLM's structured-output key.
        stop_token_ids : set of int, optional
            The request's EOS and stop-token ids: allowed exactly where the
            grammar may end (default: the vocabulary's stop tokens).

        Raises
        ------
        leapgen.errors.LeapgenError
            See :func:`compile_structured_output`; vLLM fails that request alone.
        """
        compiled = compile_structured_output(self.compiler, request_type, grammar_spec,
                                             any_whitespace=self.any_whitespace)
        matcher = GrammarMatcher(compiled, stop_token_ids=sorted(stop_token_ids) if stop_token_ids else None,
                                 max_rollback_tokens=self.num_speculative_tokens)
        return LeapgenGrammar(matcher, self.forced_tokens, max_rollback_tokens=self.num_speculative_tokens)

    def allocate_token_bitmask(self, max_num_seqs: int):
        """A CPU int32 tensor ``(max_num_seqs, ceil(vocab_size / 32))``, every token allowed."""
        return allocate_token_bitmask(max_num_seqs, self.vocab_size)

    def destroy(self) -> None:
        """Drop the compiled grammars."""
        self.compiler.clear_cache()


class LeapgenGrammar(StructuredOutputGrammar):
    """A request's grammar state in vLLM: a :class:`~leapgen.GrammarMatcher`, plus
    the plan of forced tokens when jump-forward is on.

    Parameters
    ----------
    matcher : GrammarMatcher
        Owned (mutated by the verbs below).
    forced_tokens : ForcedTokens or None
        The planner of forced tokens; None without jump-forward.
    max_rollback_tokens : int
        History kept for :meth:`rollback` (vLLM's number of speculative tokens).

    Notes
    -----
    The plan: at each position, the tokens of the forced text the grammar will
    require next (a tuple; empty where nothing is forced). After a token that
    is the plan's first one, the plan goes on with the rest; otherwise it is
    planned again from the new state. It is a function of the accepted tokens
    alone, so the proposer, replaying the same tokens in the worker, finds the
    same tokens (see :mod:`leapgen.integrations.vllm_jump_forward`).
    """

    def __init__(self, matcher: GrammarMatcher, forced_tokens: Any = None, *, max_rollback_tokens: int = 0):
        self.matcher = matcher
        self.forced_tokens = forced_tokens
        self.max_rollback_tokens = max_rollback_tokens
        self.num_processed_tokens = 0
        self._plans: list[tuple[int, ...] | None] = [None]

    # -- the plan of forced tokens ------------------------------------------------------------

    def forced_token_ids(self) -> tuple[int, ...]:
        """The forced tokens planned from here (empty without jump-forward or where nothing is
        forced). Does not change the grammar's state."""
        if self.forced_tokens is None or self.matcher.is_terminated():
            return ()
        plan = self._plans[-1]
        if plan is None:
            plan = self._plans[-1] = self.forced_tokens.plan(self.matcher)
        return plan

    def _accept(self, token: int) -> bool:
        """Accept one token (mutates); on success the plan moves on with it."""
        plan = self.forced_token_ids() if self.forced_tokens is not None else ()
        try:
            accepted = self.matcher.accept_token(token)
        except StackDepthError:  # a draft nesting past max_stack_depth: rejected like any invalid token
            accepted = False
        if accepted and self.forced_tokens is not None:
            self._plans.append(plan[1:] if len(plan) > 1 and plan[0] == token else None)
            if len(self._plans) > self.max_rollback_tokens + 1:
                del self._plans[0]
        return accepted

    # -- vLLM's verbs ---------------------------------------------------------------------------

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Advance over ``tokens`` (mutates); tokens after termination are ignored.

        Returns
        -------
        bool
            False at the first token the grammar rejects (vLLM then ends the
            request with an error); the tokens before it stay accepted.
        """
        for token in tokens:
            if self.matcher.is_terminated():
                break
            if not self._accept(token):
                logger.error("leapgen: request %s: the grammar rejected token %d", request_id, token)
                return False
            self.num_processed_tokens += 1
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` the grammar accepts (up to and including a stop token).

        Does not mutate: the tokens are accepted, then rolled back.
        """
        accepted: list[int] = []
        for token in tokens:
            if self.matcher.is_terminated() or not self._accept(token):
                break
            accepted.append(token)
        if accepted:
            self._rollback(len(accepted))
        return accepted

    def _rollback(self, num_tokens: int) -> None:
        self.matcher.rollback(num_tokens)
        if self.forced_tokens is not None:
            del self._plans[len(self._plans) - num_tokens:]

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens (mutates).

        Raises
        ------
        ValueError
            More than the kept history (``max_rollback_tokens``).
        """
        self._rollback(num_tokens)
        self.num_processed_tokens -= num_tokens

    def fill_bitmask(self, bitmask, batch_index: int) -> None:
        """Write the allowed next tokens into row ``batch_index`` of vLLM's bitmask.

        Parameters
        ----------
        bitmask : torch.Tensor
            CPU int32, ``(rows, ceil(vocab_size / 32))``, from
            :meth:`LeapgenBackend.allocate_token_bitmask`. Row ``batch_index``
            only is written; the grammar's state is unchanged.
        """
        plan = self.forced_token_ids()
        if not plan:
            self.matcher.fill_next_token_bitmask(bitmask, batch_index)
            return
        row = bitmask[batch_index].numpy().view(np.uint32)
        row[:] = 0
        row[plan[0] >> 5] = np.uint32(1 << (plan[0] & 31))

    def is_terminated(self) -> bool:
        """Whether a stop token was accepted."""
        return self.matcher.is_terminated()

    def reset(self) -> None:
        """Back to the grammar's start (mutates)."""
        self.matcher.reset()
        self._plans = [None]
        self.num_processed_tokens = 0


# -- the request check (vLLM's front-end process) ------------------------------------------------

_EMPTY_SPECS = ("grammar", "json", "structural_tag")


def _refuse(message: str, parameter: str, value: Any = None) -> VLLMValidationError:
    return VLLMValidationError(message, parameter=parameter, value=value)


def validate_structured_outputs(params: Any, model_config: Any, structured_outputs_config: Any,
                                tokenizer: Any) -> None:
    """vLLM's ``SamplingParams._validate_structured_outputs`` for the ``"leapgen"`` backend.

    vLLM's own checks of the request (the same as for its backends), then the
    constraint parsed by leapgen's front-ends, so that a malformed grammar is
    a 400 naming where it is wrong before it reaches the engine. Compile
    failures found later (a limit, an empty language) fail that request in
    the engine through vLLM's grammar future.

    Parameters
    ----------
    params : vllm.SamplingParams
        Its ``structured_outputs`` is marked as the leapgen backend's (mutated).
    model_config, structured_outputs_config, tokenizer
        As vLLM passes them.

    Raises
    ------
    vllm.exceptions.VLLMValidationError
        With the field (``parameter``) and leapgen's message.
    """
    so = params.structured_outputs
    if model_config.is_diffusion:
        raise _refuse("Structured outputs are not yet supported for diffusion language models.", "structured_outputs")
    if tokenizer is None:
        raise _refuse("Structured outputs requires a tokenizer so it can't be used with 'skip_tokenizer_init'",
                      "structured_outputs")
    from vllm.utils.mistral import is_mistral_tokenizer

    if is_mistral_tokenizer(tokenizer):
        raise _refuse("the leapgen structured-output backend reads Hugging Face tokenizers; start vLLM with "
                      "--tokenizer-mode hf for this model", "structured_outputs")
    if so._backend not in (None, BACKEND_NAME):
        raise _refuse(f"Request-level structured output backend selection is not supported. The request specified "
                      f"'{so._backend}', but vLLM was initialised with '{BACKEND_NAME}'.", "structured_outputs")
    so._backend, so._backend_was_auto = BACKEND_NAME, False
    # vLLM compiles from the constraint alone: these per-request options would never reach a backend.
    for name in ("disable_any_whitespace", "disable_additional_properties"):
        if getattr(so, name):
            raise _refuse(f"structured_outputs.{name} per request is not supported (vLLM compiles the grammar "
                          f"from the constraint alone); set it in structured_outputs_config", f"structured_outputs.{name}")
    if so.whitespace_pattern is not None:
        raise _refuse("structured_outputs.whitespace_pattern is not supported by the leapgen backend "
                      "(JSON whitespace: structured_outputs_config.disable_any_whitespace)",
                      "structured_outputs.whitespace_pattern")
    if isinstance(so.choice, list) and not so.choice:
        raise _refuse(f"Choice '{so.choice}' cannot be an empty list", "structured_outputs.choice")
    for name in _EMPTY_SPECS:
        value = getattr(so, name)
        if isinstance(value, str) and value.strip() == "":
            raise _refuse(f"structured_outputs.{name} cannot be an empty string", f"structured_outputs.{name}")
    check_json_nesting(so.json)
    check_json_nesting(so.structural_tag, structural_tag=True)
    if so.json_object is False:
        raise _refuse("structured_outputs.json_object must be True if set; omit structured_outputs to disable "
                      "structured outputs", "structured_outputs.json_object")
    if so.regex and "\x00" in so.regex:
        raise _refuse("structured_outputs.regex must not contain a NUL character ('\\x00')", "structured_outputs.regex")
    _check_constraint(so, any_whitespace=not structured_outputs_config.disable_any_whitespace)
    so.__post_init__()


def _check_constraint(so: Any, *, any_whitespace: bool) -> None:
    """Parse the request's constraint with leapgen's front-ends (no vocabulary needed)."""
    try:
        if so.json is not None:
            field = "structured_outputs.json"
            from leapgen.grammar.json.schema import json_schema_to_ir

            json_schema_to_ir(so.json, any_whitespace=any_whitespace)
        elif so.regex is not None:
            field = "structured_outputs.regex"
            from leapgen.grammar.regex import parse_regex

            parse_regex(so.regex)
        elif so.choice is not None:
            field = "structured_outputs.choice"  # a list of str: vLLM's StructuredOutputsParams checks it
            # compile_choice's own checks (items, lone surrogates) run with no vocabulary here
            for i, text in enumerate(so.choice):
                if not isinstance(text, str):
                    raise GrammarError(f"choice must be a list of str; item {i} is {type(text).__name__}")
        elif so.grammar is not None:
            field = "structured_outputs.grammar"
            if grammar_is_likely_lark(so.grammar):
                from leapgen.grammar.lark import parse_lark

                parse_lark(so.grammar)
            else:
                from leapgen.grammar.ebnf import parse_ebnf

                parse_ebnf(so.grammar)
        elif so.structural_tag is not None:
            field = "structured_outputs.structural_tag"
            from leapgen.grammar.structural.reader import parse_structural_tag

            parse_structural_tag(so.structural_tag)
        else:
            return
    except LeapgenError as exc:
        raise _refuse(f"{field}: {exc}", field) from None
    except RecursionError:
        raise _refuse(f"{field}: nests too deeply", field) from None
