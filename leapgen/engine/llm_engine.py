"""The offline engine: :class:`LLM`.

One responsibility: drive requests to completion, one decoding step at a time.
A step of a request is::

    fill bitmask (grammar) -> forward pending tokens -> mask logits -> sample
        -> accept -> stop? -> jump-forward (retokenize, crop KV, extend next step)

Requests run one after another for now (``step`` advances the oldest
unfinished one); continuous batching will replace the choice of request and
batch the forward, not the shape of the step.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any, Sequence

import torch

from leapgen.engine.grammar_manager import GrammarManager
from leapgen.engine.jump_forward import try_jump_forward
from leapgen.engine.model_loader import DEFAULT_MODEL, LoadedModel, configure_threads, load_model
from leapgen.engine.model_runner import ModelRunner
from leapgen.engine.prompt import build_prompt_ids, default_stop_token_ids
from leapgen.engine.request import FinishReason, Request, RequestOutput
from leapgen.engine.sampler import make_generator, sample
from leapgen.engine.sampling_params import SamplingParams
from leapgen.errors import LeapgenError


class LLM:
    """Generate text with a causal LM, optionally constrained by a JSON
    Schema or a regex, with jump-forward.

    Parameters
    ----------
    model : str, default "default"
        ``"default"`` (SmolLM2-135M-Instruct, embedded) or a local Hugging Face
        folder. See :func:`leapgen.engine.load_model`.
    cache_dir : path-like or None, default None
        Converted-model cache root (default ``$LEAPGEN_CACHE/models`` or
        ``~/.cache/leapgen/models``).
    num_threads : int or None, default None
        torch intra-op threads (process-wide); None = ``$LEAPGEN_NUM_THREADS``
        or the CPUs not busy with other processes (see
        :func:`leapgen.engine.model_loader.default_num_threads`).
    loaded : LoadedModel or None, default None
        An already loaded model to use instead of loading ``model``.

    Attributes
    ----------
    tokenizer, model_runner, stop_token_ids, load_s

    Raises
    ------
    leapgen.engine.model_loader.ModelLoadError
        If the model cannot be loaded.

    Examples
    --------
    >>> llm = LLM()                                           # doctest: +SKIP
    >>> out = llm.generate("Give me a user as JSON.",
    ...                    SamplingParams(json_schema={"type": "object"}))[0]
    >>> out.text, out.jump_forward_tokens, out.finish_reason  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        cache_dir: Any = None,
        num_threads: int | None = None,
        loaded: LoadedModel | None = None,
    ):
        configure_threads(num_threads)
        self.loaded = loaded if loaded is not None else load_model(model, cache_dir=cache_dir)
        self.tokenizer = self.loaded.tokenizer
        self.model_runner = ModelRunner(self.loaded.model)
        self.stop_token_ids = default_stop_token_ids(self.tokenizer, self.loaded.model)
        self.grammar = GrammarManager(self.tokenizer, self.model_runner.vocab_size, self.stop_token_ids)
        self._bitmask: torch.Tensor | None = None
        self._ids = itertools.count()
        self._waiting: deque[Request] = deque()

    @property
    def load_s(self) -> float:
        """Seconds the model load took."""
        return self.loaded.load_s

    # ------------------------------------------------------------------ API

    def generate(
        self,
        prompts: str | Sequence[str],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
        *,
        chat: bool = True,
    ) -> list[RequestOutput]:
        """Complete each prompt.

        Parameters
        ----------
        prompts : str or sequence of str
        params : SamplingParams or sequence of them or None, default None
            One for all prompts, or one per prompt; None = ``SamplingParams()``.
        chat : bool, default True
            Apply the model's chat template (each prompt is a user message);
            False continues the raw text.

        Returns
        -------
        list of RequestOutput
            In prompt order. A request whose grammar fails to compile (or that
            fails later) comes back with ``finish_reason="error"`` and
            ``error`` set; the others are unaffected.

        Raises
        ------
        ValueError
            If ``params`` is a sequence of the wrong length, or a prompt is not
            a str or is empty.
        """
        if isinstance(prompts, str):
            prompts = [prompts]
        if params is None:
            params = SamplingParams()
        if isinstance(params, SamplingParams):
            params_list = [params] * len(prompts)
        else:
            params_list = list(params)
            if len(params_list) != len(prompts):
                raise ValueError(f"{len(prompts)} prompts but {len(params_list)} SamplingParams")
        requests: list[Request] = []
        try:
            for prompt, sp in zip(prompts, params_list):
                requests.append(self.add_request(prompt, sp, chat=chat))
        except BaseException:
            self._abort(requests)
            raise
        while self.has_unfinished_requests():
            self.step()
        return [self._to_output(r) for r in requests]

    def add_request(self, prompt: str, params: SamplingParams, *, chat: bool = True) -> Request:
        """Admit one request: tokenize, compile its grammar, queue it.

        Returns
        -------
        Request
            Queued; already finished with ``finish_reason="error"`` if its
            grammar failed to compile (then not queued).

        Raises
        ------
        ValueError
            If ``params`` is not a SamplingParams, its ``stop_token_ids`` are
            outside the model's vocabulary, or the prompt is not a str or is
            empty.
        """
        if not isinstance(params, SamplingParams):
            raise ValueError(f"params must be SamplingParams, got {type(params).__name__}")
        vocab_size = self.model_runner.vocab_size
        if params.stop_token_ids is not None and any(t >= vocab_size for t in params.stop_token_ids):
            raise ValueError(f"stop_token_ids must be < the vocabulary size {vocab_size}")
        prompt_ids = build_prompt_ids(self.tokenizer, prompt, chat=chat)
        stop_ids = (
            frozenset(params.stop_token_ids)
            if params.stop_token_ids is not None
            else self.stop_token_ids
        )
        req = Request(
            request_id=next(self._ids),
            prompt=prompt,
            prompt_ids=prompt_ids,
            params=params,
            stop_token_ids=stop_ids,
            generator=make_generator(params.seed),
        )
        if params.constrained:
            try:
                compiled, req.compile_ms = self.grammar.compile(params)
                req.matcher = self.grammar.new_matcher(compiled, stop_ids)
            except LeapgenError as exc:
                req.finish(FinishReason.ERROR, exc)
                return req
        req.kv_cache = self.model_runner.new_cache()
        if req.matcher is not None and params.jump_forward:
            # Text forced from the very start (``{"id": ``) joins the prefill.
            self._jump_forward(req)
            if len(req.output_ids) >= params.max_tokens:
                req.finish(FinishReason.LENGTH)
                return req
        self._waiting.append(req)
        return req

    def has_unfinished_requests(self) -> bool:
        """True while a queued request is not finished."""
        return bool(self._waiting)

    def step(self) -> list[Request]:
        """Advance the oldest unfinished request by one decoding step.

        Returns
        -------
        list of Request
            The requests that finished in this step (empty or one).
        """
        if not self._waiting:
            return []
        req = self._waiting[0]
        try:
            self._step_request(req)
        except LeapgenError as exc:
            req.finish(FinishReason.ERROR, exc)
        if req.is_finished:
            self._waiting.popleft()
            return [req]
        return []

    def _abort(self, requests: Sequence[Request]) -> None:
        """Drop queued ``requests`` (a failed ``generate`` call)."""
        drop = {id(r) for r in requests}
        self._waiting = deque(r for r in self._waiting if id(r) not in drop)

    # ------------------------------------------------------------- the step

    def _step_request(self, req: Request) -> None:
        params = req.params
        # 1. The grammar's bitmask for the next token (before the forward:
        #    with batching, mask filling overlaps the model).
        need_apply = False
        if req.matcher is not None:
            bitmask = self._get_bitmask()
            need_apply = req.matcher.fill_next_token_bitmask(bitmask, 0)
            if req.matcher.is_completed() and not self._allows_non_stop(bitmask, req):
                req.finish(FinishReason.GRAMMAR)  # nothing left but EOS: save the forward
                return
        # 2. Forward the pending tokens (prefill, decode, or extend).
        logits = self.model_runner.forward(req.kv_cache, req.pending_ids)  # (V,)
        req.num_forwards += 1
        req.num_cached = len(req.prompt_ids) + len(req.output_ids)
        # 3. Mask and sample.
        if need_apply:
            from leapgen import apply_token_bitmask_inplace

            apply_token_bitmask_inplace(logits.unsqueeze(0), self._bitmask)
        try:
            token = sample(logits, params, req.generator)
        except ValueError:
            req.finish(FinishReason.ERROR, "the grammar admits no token here (dead end)")
            return
        # 4. Accept; stop?
        if req.matcher is not None:
            if not req.matcher.accept_token(token):
                req.finish(FinishReason.ERROR, f"the matcher rejected token {token} its own bitmask allowed")
                return
            if req.matcher.is_terminated():
                req.num_sampled += 1
                req.finish(FinishReason.STOP)
                return
        elif token in req.stop_token_ids:
            req.num_sampled += 1
            req.finish(FinishReason.STOP)
            return
        req.append_sampled(token)
        if len(req.output_ids) >= params.max_tokens:
            req.finish(FinishReason.LENGTH)
            return
        # 5. Jump-forward: append forced text; its tokens go into the next forward.
        if params.jump_forward and req.matcher is not None:
            self._jump_forward(req)
            if len(req.output_ids) >= params.max_tokens:
                req.finish(FinishReason.LENGTH)

    def _jump_forward(self, req: Request) -> None:
        token_bytes = self.grammar.tokenizer_info.token_bytes
        try:
            text = b"".join(token_bytes[t] for t in req.output_ids).decode("utf-8")
        except UnicodeDecodeError:
            # The output ends inside a UTF-8 character: its text would not
            # retokenize to the same bytes. Sample this step.
            return
        jump = try_jump_forward(
            req.matcher,
            req.output_ids,
            text,
            self._encode,
            max_tokens=req.params.max_tokens,
        )
        if jump is None:
            return
        keep = req.replace_output(jump.new_ids, jump.common_prefix)
        self.model_runner.crop(req.kv_cache, keep)

    # -------------------------------------------------------------- helpers

    def _get_bitmask(self) -> torch.Tensor:
        if self._bitmask is None:
            from leapgen import allocate_token_bitmask

            self._bitmask = allocate_token_bitmask(1, self.model_runner.vocab_size)
        return self._bitmask

    @staticmethod
    def _allows_non_stop(bitmask: torch.Tensor, req: Request) -> bool:
        """Whether row 0 of ``bitmask`` allows a token that is not a stop
        token. Does not mutate ``bitmask``."""
        words = bitmask[0].clone()  # (ceil(V/32),) int32
        for tid in req.stop_token_ids:
            w, b = divmod(tid, 32)
            if w < words.numel():
                value = int(words[w]) & ~(1 << b) & 0xFFFFFFFF
                words[w] = value - (1 << 32) if value >= (1 << 31) else value
        return bool(words.any())

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(
            list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _to_output(self, req: Request) -> RequestOutput:
        return req.to_output(self._decode(req.output_ids))
