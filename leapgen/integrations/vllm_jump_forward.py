"""Jump-forward inside vLLM: the grammar's forced tokens delivered as speculative drafts.

vLLM has no jump-forward. Its speculative decoding has what it needs: a step
verifies ``k`` draft tokens in one forward pass. A custom proposer
(``speculative_config={"method": "custom_class", "model":
JUMP_FORWARD_PROPOSER, "num_speculative_tokens": k}``) drafts, for each
request, the tokens of the text its grammar forces next, so ``k`` forced
tokens cost one forward pass instead of ``k``.

Why forced drafts were rejected at temperature > 0
--------------------------------------------------
A forced *text* is not a forced *token*: the grammar's bitmask at a forced
state allows every token whose bytes are a prefix of the forced text (``"``,
``"n``, ``"na``, ``"name`` ...). vLLM's rejection sampler, given drafts
without draft probabilities (all non-model proposers), accepts draft ``x``
when ``u < p(x)``, ``p`` the target distribution after the grammar's mask and
the temperature. Under greedy sampling the draft survives when it is the
model's argmax among those tokenizations (usually); at temperature 0.8 it
is rejected with probability ``1 - p(x)``, where ``p`` keeps mass on the
other tokenizations of the same text.

What is done here
-----------------
The grammar decides the tokenization of forced text: at a state where text is
forced, its bitmask row allows one token, the next token of the plan, where
the plan is the forced text tokenized on its own by the model's tokenizer,
cut where the grammar rejects a token and, as in leapgen's own engine
(:mod:`leapgen.engine.token_healing`), without its last token when the
grammar allows a longer token starting with that token's bytes (so the model
still picks a token that crosses the end of the forced text). The drafts are
that plan, so ``p(x) = 1`` and every forced draft is accepted at any
temperature. This is jump-forward's own meaning (forced text is appended in
its canonical tokens, not sampled); the text is the grammar's either way.
Without the proposer, bitmasks are the grammar's exact masks.

How each request's forced tokens reach the proposer
---------------------------------------------------
The proposer runs in the worker process (another process, possibly another
node, than the scheduler's grammar state) and vLLM's ``custom_class`` call
passes it token arrays only, no request ids. The plan is a function of a
request's accepted tokens alone (:class:`~leapgen.integrations.vllm_backend.LeapgenGrammar`),
so the proposer computes it in the worker from the same grammar, compiled
there from the request's ``structured_outputs`` and fed the request's output
tokens, and finds the same tokens the scheduler's bitmask allows. What the
public extension points do not give is *which request* each row of the
batch is: building this proposer wraps the model runner's
``propose_draft_token_ids`` (:func:`leapgen.integrations.vllm.bind_runner_batches`)
to hand it the runner's
``input_batch`` and ``requests`` (vLLM passes ``input_batch`` to its own
suffix-decoding proposer the same way). A wrong draft can cost speed only:
the scheduler validates every draft against its own grammar
(``validate_tokens``) and the bitmask decides what is sampled.

Requests of an engine with a reasoning parser (and not
``enable_in_reasoning``) get no drafts: where the grammar starts is decided
by the scheduler's reasoning parser, which the worker does not see.
"""

from __future__ import annotations

import logging
from typing import Any

from leapgen.integrations import BACKEND_NAME
from leapgen.integrations.vllm import bind_runner_batches
from leapgen.integrations.vllm_backend import JUMP_FORWARD_PROPOSER, LeapgenBackend

logger = logging.getLogger(__name__)

class _Mirror:
    """The worker's copy of one request's grammar, fed its output tokens."""

    __slots__ = ("grammar", "fed", "lost")

    def __init__(self, grammar: Any):
        self.grammar = grammar
        self.fed = 0
        self.lost = False


class JumpForwardProposer:
    """vLLM ``custom_class`` proposer: drafts each leapgen-constrained request's forced tokens.

    Parameters
    ----------
    vllm_config : vllm.config.VllmConfig
        Its ``structured_outputs_config.backend`` must be ``"leapgen"``.

    Raises
    ------
    ValueError
        Another structured-output backend is configured.

    Notes
    -----
    vLLM builds it in each worker (``speculative_config.method="custom_class"``,
    ``model=JUMP_FORWARD_PROPOSER``) and calls :meth:`propose` after each step.
    Building it makes the model runner hand it the batch's request ids
    (:func:`leapgen.integrations.vllm.bind_runner_batches`).
    """

    def __init__(self, vllm_config: Any):
        backend = vllm_config.structured_outputs_config.backend
        if backend != BACKEND_NAME:
            raise ValueError(f"{JUMP_FORWARD_PROPOSER} drafts leapgen's forced tokens; it needs "
                             f"structured_outputs_config backend 'leapgen', not {backend!r}")
        bind_runner_batches()
        self.vllm_config = vllm_config
        self.num_speculative_tokens = vllm_config.speculative_config.num_speculative_tokens
        so_config = vllm_config.structured_outputs_config
        self.enabled = not (so_config.reasoning_parser and not so_config.enable_in_reasoning)
        self._backend = None
        self._mirrors: dict[str, _Mirror] = {}
        self._input_batch = None
        self._requests: dict[str, Any] = {}
        self.num_drafted = 0

    def load_model(self, *args, **kwargs) -> None:
        """Nothing to load (vLLM's proposer interface)."""

    def bind_batch(self, input_batch: Any, requests: dict[str, Any]) -> None:
        """The runner's batch and request states for the next :meth:`propose` (set by the plugin)."""
        self._input_batch = input_batch
        self._requests = requests

    def _leapgen_backend(self):
        if self._backend is None:
            from vllm.tokenizers import cached_tokenizer_from_config

            model_config = self.vllm_config.model_config
            self._backend = LeapgenBackend(self.vllm_config, cached_tokenizer_from_config(model_config=model_config),
                                           model_config.get_vocab_size())
        return self._backend

    def propose(self, sampled_token_ids: list[list[int]], num_tokens_no_spec, token_ids_cpu,
                slot_mappings: Any = None) -> list[list[int]]:
        """Drafts for each row of the batch: its forced tokens, at most ``num_speculative_tokens``.

        Parameters
        ----------
        sampled_token_ids : list of list of int
            Per row, the tokens this step sampled (empty: a partial prefill).
        num_tokens_no_spec : numpy.ndarray
            Per row, the request's tokens (prompt and output) so far.
        token_ids_cpu : numpy.ndarray
            ``(rows, max_model_len)``: each row's tokens.
        slot_mappings
            Unused.

        Returns
        -------
        list of list of int

        Raises
        ------
        RuntimeError
            The plugin did not bind the batch (``register()`` did not run in this worker).
        """
        batch = self._input_batch
        if batch is None:
            raise RuntimeError(f"{JUMP_FORWARD_PROPOSER} got no request ids: this vLLM's model runner did not "
                               "call bind_batch (leapgen.integrations.vllm.bind_runner_batches)")
        drafts = []
        for i, sampled in enumerate(sampled_token_ids):
            state = self._requests.get(batch.req_ids[i]) if sampled and self.enabled else None
            if state is None:
                drafts.append([])
                continue
            output = token_ids_cpu[i, state.num_prompt_tokens:int(num_tokens_no_spec[i])]
            drafts.append(self._drafts(batch.req_ids[i], state, output.tolist()))
        for req_id in [r for r in self._mirrors if r not in self._requests]:
            del self._mirrors[req_id]
        self.num_drafted += sum(len(d) for d in drafts)
        return drafts

    def _drafts(self, req_id: str, state: Any, output: list[int]) -> list[int]:
        params = state.sampling_params
        so = params.structured_outputs if params is not None else None
        if so is None or so.all_constraints_none():
            return []
        mirror = self._mirrors.get(req_id)
        if mirror is None or len(output) < mirror.fed:  # new, or its output was cut (preempted, reset)
            from vllm.v1.structured_output.request import get_structured_output_key

            try:
                grammar = self._leapgen_backend().compile_grammar(
                    *get_structured_output_key(so), stop_token_ids=params.all_stop_token_ids)
            except Exception as exc:  # the scheduler fails the request with this error itself
                logger.debug("leapgen jump-forward: no drafts for %s: %s", req_id, exc)
                grammar = None
            mirror = self._mirrors[req_id] = _Mirror(grammar)
            mirror.lost = grammar is None
        if mirror.lost:
            return []
        grammar = mirror.grammar
        if not grammar.accept_tokens(req_id, output[mirror.fed:]):
            mirror.lost = True  # out of step with the scheduler's grammar: draft nothing more
            return []
        mirror.fed = len(output)
        return list(grammar.forced_token_ids()[:self.num_speculative_tokens])
