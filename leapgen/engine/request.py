"""The one request type that flows through the engine, and its result.

:class:`Request` holds everything about one completion in flight: prompt and
output token ids, which output tokens were sampled, how many tokens the KV
cache holds, the grammar matcher and the random generator. The engine mutates
it step by step; :meth:`Request.to_output` freezes it into a
:class:`RequestOutput`.

Token bookkeeping
-----------------
``all_ids = prompt_ids + output_ids``. The KV cache holds the keys/values of
``all_ids[:num_cached]``; the tokens ``all_ids[num_cached:]`` are *pending*
and go into the next forward pass (the whole prompt at prefill, the last
sampled token at a decode, the last sampled token plus the forced tokens at a
jump-forward extend).

Counting jump-forward tokens
----------------------------
Each output token carries a flag ``sampled[i]``: True when the token at
position ``i`` came out of the sampler, False when it was put there by a
jump-forward retokenization. When a jump-forward rewrites the output from
position ``p`` on (``p`` = longest common prefix of old and new ids), flags
before ``p`` are kept and every new token from ``p`` on is flagged False,
including a token that merges text the model sampled with forced text
(``"`` sampled + ``name": `` forced -> ``"name``, ``":``, ...): that token
was never sampled either. ``jump_forward_tokens`` is the number of False
flags in the final output, i.e. *the tokens of the final output that were
never sampled*, and ``completion_tokens - jump_forward_tokens`` the sampled
tokens that survived. The stop token, when sampled, is not part of the
output and is counted by neither.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


class FinishReason:
    """Why a request ended (the values of ``RequestOutput.finish_reason``)."""

    #: A stop token (EOS) was sampled.
    STOP = "stop"
    #: ``max_tokens`` output tokens were reached.
    LENGTH = "length"
    #: The grammar is complete and admits no further text: the engine ended
    #: the request without sampling a stop token.
    GRAMMAR = "grammar"
    #: The request failed (a bad grammar, ...); see ``RequestOutput.error``.
    ERROR = "error"
    #: The caller cancelled the request (``LLM.abort_request``).
    ABORT = "abort"


@dataclass(frozen=True)
class RequestOutput:
    """The result of one request.

    Attributes
    ----------
    request_id : int
    prompt : str
        The prompt as given (before any chat template).
    text : str
        The completion text (stop token excluded).
    token_ids : list of int
        The completion's final token ids (after jump-forward retokenizations;
        stop token excluded).
    completion_tokens : int
        ``len(token_ids)``.
    jump_forward_tokens : int
        Tokens of ``token_ids`` that were never sampled (put there by a
        jump-forward); see the module docstring for the exact definition.
    sampled_tokens : int
        Sampler calls (one per decode step, the stop token's included).
    forward_passes : int
        Model forward passes (prefill, decodes and extends).
    prompt_tokens : int
        Prompt length in tokens (chat template included).
    finish_reason : str
        One of :class:`FinishReason`'s values.
    compile_ms : float
        Grammar compile time (0.0 when unconstrained; small on a cache hit).
    ttft_s : float or None
        Seconds from admission to the first output token the model's first
        forward pass produced (text forced before the prefill does not
        count); None if there is none.
    elapsed_s : float
        Wall time from admission (compile and prefill included) to finish.
    tokens_per_s : float
        Generation speed: ``completion_tokens`` over ``elapsed_s`` less the
        compile time (prefill included; compile reported apart, since a
        compiled grammar is cached and reused across requests).
    error : str or None
        Why the request failed when ``finish_reason == "error"``.
    error_type : str or None
        The class name of the error from :mod:`leapgen.errors` (e.g.
        ``"SchemaError"``: a subclass of ``GrammarError`` means a bad grammar,
        the caller's fault), or None.
    cached_prompt_tokens : int
        Prompt tokens whose KV was reused (from the prefix cache, or from the
        first sample's prefill when ``n > 1``), not prefilled.
    index : int
        Which of the request's ``n`` samples this is (0 when ``n == 1``).
    logprobs : tuple of TokenLogprob or None
        One per output token (those of the returned text: a stop string's
        cut drops the rest) when ``SamplingParams.logprobs`` was set; see
        :mod:`leapgen.engine.logprobs`.
    prompt_token_ids : tuple of int
        The prompt's token ids (chat template included).
    prompt_logprobs : tuple of (TokenLogprob or None) or None
        With ``SamplingParams.prompt_logprobs``: one entry per prompt
        position from ``prompt_logprobs_start`` on, the first None (see
        :func:`leapgen.engine.logprobs.score_prompt`); None otherwise (or
        when the request failed before its prefill).
    """

    request_id: int
    prompt: str
    text: str
    token_ids: list[int]
    completion_tokens: int
    jump_forward_tokens: int
    sampled_tokens: int
    forward_passes: int
    prompt_tokens: int
    finish_reason: str
    compile_ms: float
    ttft_s: float | None
    elapsed_s: float
    tokens_per_s: float
    error: str | None = None
    error_type: str | None = None
    cached_prompt_tokens: int = 0
    index: int = 0
    logprobs: tuple | None = None
    prompt_token_ids: tuple = ()
    prompt_logprobs: tuple | None = None

    @property
    def completion_tokens_wo_jump_forward(self) -> int:
        """Output tokens the sampler chose (SGLang's name):
        ``completion_tokens - jump_forward_tokens``."""
        return self.completion_tokens - self.jump_forward_tokens

    @property
    def jump_forward_ratio(self) -> float:
        """Share of output tokens that were jump-forwarded (0.0 when empty)."""
        return self.jump_forward_tokens / self.completion_tokens if self.completion_tokens else 0.0


@dataclass(eq=False)
class Request:
    """One completion in flight (mutated by the engine at every step).

    Attributes
    ----------
    request_id : int
    prompt : str
    prompt_ids : list of int
        Prompt token ids (non-empty).
    params : leapgen.engine.SamplingParams
    stop_token_ids : frozenset of int
    matcher : GrammarMatcher or None
        Has accepted exactly ``output_ids`` (None when unconstrained).
    generator : torch.Generator
    kv_cache : KvCache or None
        The sequence's KV cache; None before admission and once finished.
    compile_future : concurrent.futures.Future or None
        The grammar compile in flight (None when unconstrained or done).
    stored_logits : torch.Tensor or None
        float32 ``(vocab_size,)``: next-token logits of a prefill that ran
        while the grammar was still compiling; sampled once it is ready.
    text_end : int or None
        Where a stop string cut the output text (characters).
    output_ids : list of int
    sampled : list of bool
        Per output token: True if it came out of the sampler.
    num_cached : int
        Tokens of ``prompt_ids + output_ids`` whose keys/values the cache holds.
    num_prefix_cached : int
        Prompt tokens whose KV came from the prefix cache or a leader (not
        prefilled).
    index : int
        The sample's index among its request's ``n``.
    leader : Request or None
        For sample ``i > 0`` of a request with ``n > 1``: sample 0, whose
        prompt KV this one copies once prefilled (None once copied, or when
        the request prefills its own prompt).
    logprobs : list of TokenLogprob or None
        Per output token when log-probabilities are asked for; an entry is
        None until the forward pass that scores it (a forced token).
    owns_compile : bool
        Whether finishing may cancel ``compile_future`` (False when the
        request's samples share it).
    deferred_finish : str or None
        A finish reason held back until the next forward pass has scored the
        forced tokens' log-probabilities.
    prompt_logprobs : tuple or None
        The prompt's entries (``SamplingParams.prompt_logprobs``) once the
        prefill pass scored them (or copied from the leader's).
    reasoning_done : bool
        The output holds ``params.reasoning_end`` (only tracked with
        ``params.max_reasoning_tokens``).
    """

    request_id: int
    prompt: str
    prompt_ids: list[int]
    params: Any
    stop_token_ids: frozenset
    generator: Any
    matcher: Any = None
    kv_cache: Any = None
    compile_future: Any = None
    stored_logits: Any = None
    text_end: int | None = None
    first_token_time: float | None = None
    output_ids: list[int] = field(default_factory=list)
    sampled: list[bool] = field(default_factory=list)
    num_cached: int = 0
    num_prefix_cached: int = 0
    num_sampled: int = 0
    num_forwards: int = 0
    num_jump_forwards: int = 0
    compile_ms: float = 0.0
    finish_reason: str | None = None
    error: str | None = None
    error_type: str | None = None
    start_time: float = field(default_factory=time.perf_counter)
    end_time: float | None = None
    index: int = 0
    leader: Any = None
    owns_compile: bool = True
    logprobs: list | None = None
    deferred_finish: str | None = None
    prompt_logprobs: tuple | None = None
    reasoning_done: bool = False

    @property
    def needs_prompt_scoring(self) -> bool:
        """Whether the pass that feeds the prompt must score it (``prompt_logprobs`` asked, not yet scored)."""
        return self.params.prompt_logprobs is not None and self.prompt_logprobs is None

    @property
    def is_finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def grammar_ready(self) -> bool:
        """True when the request samples without waiting for a grammar."""
        return self.compile_future is None

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def num_output_cached(self) -> int:
        """Output tokens whose keys/values the cache holds."""
        return max(0, self.num_cached - len(self.prompt_ids))

    @property
    def pending_ids(self) -> list[int]:
        """Tokens the next forward pass must feed (not yet in the KV cache)."""
        return (self.prompt_ids + self.output_ids)[self.num_cached :]

    def append_sampled(self, token_id: int, logprob: Any = None) -> None:
        """Append a token the sampler chose (and its :class:`TokenLogprob`
        when log-probabilities are kept). Mutates ``output_ids``/``sampled``."""
        self.output_ids.append(token_id)
        self.sampled.append(True)
        if self.logprobs is not None:
            self.logprobs.append(logprob)
        self.num_sampled += 1
        if self.first_token_time is None:
            self.first_token_time = time.perf_counter()

    def replace_output(self, new_ids: list[int], common_prefix: int) -> int:
        """Replace the output with ``new_ids`` after a jump-forward.

        Parameters
        ----------
        new_ids : list of int
            The retokenized output; ``new_ids[:common_prefix]`` equals
            ``output_ids[:common_prefix]``.
        common_prefix : int
            Length of that common prefix.

        Returns
        -------
        int
            The number of tokens the KV cache must keep (``num_cached`` after
            the call): ``len(prompt_ids) + min(common_prefix, output tokens
            already cached)``, or ``num_cached`` unchanged while no output
            token is cached yet (e.g. a jump-forward before the prefill). The
            caller crops the cache to it.

        Notes
        -----
        Mutates ``output_ids``, ``sampled``, ``logprobs``, ``num_cached`` and
        ``num_jump_forwards``; tokens from ``common_prefix`` on are flagged
        not sampled (and not scored yet).
        """
        if self.num_cached > len(self.prompt_ids):
            self.num_cached = len(self.prompt_ids) + min(common_prefix, self.num_output_cached)
        # else: the prompt is not (fully) cached yet; nothing cached to drop.
        self.output_ids = list(new_ids)
        self.sampled = self.sampled[:common_prefix] + [False] * (len(new_ids) - common_prefix)
        if self.logprobs is not None:
            self.logprobs = self.logprobs[:common_prefix] + [None] * (len(new_ids) - common_prefix)
        self.num_jump_forwards += 1
        if self.first_token_time is None and self.num_forwards:
            self.first_token_time = time.perf_counter()
        return self.num_cached

    def finish(self, reason: str, error: BaseException | str | None = None) -> None:
        """Mark finished (``reason`` from :class:`FinishReason`); drops the KV
        cache. ``error``: the exception (or message) that failed the request."""
        self.finish_reason = reason
        if isinstance(error, BaseException):
            self.error = str(error)
            self.error_type = type(error).__name__
        elif error is not None:
            self.error = error
            self.error_type = "LeapgenError"
        self.end_time = time.perf_counter()
        self.kv_cache = None
        self.stored_logits = None
        if self.compile_future is not None and self.owns_compile:
            self.compile_future.cancel()  # (not one its sibling samples still wait for)

    def to_output(self, text: str, logprobs: tuple | None = None) -> RequestOutput:
        """Freeze into a :class:`RequestOutput` (``text`` = decoded output,
        ``logprobs`` its entries, already cut to the returned text)."""
        end = self.end_time if self.end_time is not None else time.perf_counter()
        elapsed = max(end - self.start_time, 1e-9)
        generating = max(elapsed - self.compile_ms / 1000.0, 1e-9)
        n = len(self.output_ids)
        return RequestOutput(
            request_id=self.request_id,
            prompt=self.prompt,
            text=text if self.text_end is None else text[: self.text_end],
            token_ids=list(self.output_ids),
            completion_tokens=n,
            jump_forward_tokens=self.sampled.count(False),
            sampled_tokens=self.num_sampled,
            forward_passes=self.num_forwards,
            prompt_tokens=len(self.prompt_ids),
            finish_reason=self.finish_reason or FinishReason.LENGTH,
            compile_ms=self.compile_ms,
            ttft_s=None if self.first_token_time is None else self.first_token_time - self.start_time,
            elapsed_s=elapsed,
            tokens_per_s=n / generating,
            error=self.error,
            error_type=self.error_type,
            cached_prompt_tokens=self.num_prefix_cached,
            index=self.index,
            logprobs=logprobs,
            prompt_token_ids=tuple(self.prompt_ids),
            prompt_logprobs=self.prompt_logprobs,
        )
