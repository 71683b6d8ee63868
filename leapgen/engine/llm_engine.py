"""The offline engine: :class:`LLM`, with continuous batching.

One responsibility: the engine's API. :class:`LLM` loads the model and builds
the engine's parts, checks and queues requests (:meth:`LLM.add_requests`: the
prompt checks in :class:`~leapgen.engine.prompt.PromptChecker`, ``n``
samples, the grammar compile started at once), runs steps until they finish
(:meth:`LLM.generate`, :meth:`LLM.chat`) and freezes their outputs
(:meth:`LLM.get_output`). The step loop itself is its base class,
:class:`~leapgen.engine.engine_core.EngineCore`.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any, Sequence

from leapgen.compiler.warm_up import warm_up_in_background
from leapgen.engine import grammar_log
from leapgen.engine.chat.plan import ChatSettings
from leapgen.engine.engine_core import EngineCore
from leapgen.engine.grammar_manager import (DEFAULT_DISK_CACHE_BYTES, DEFAULT_GRAMMAR_CACHE_BYTES,
                                            DEFAULT_MAX_GRAMMAR_BYTES, GrammarManager)
from leapgen.engine.logprobs import output_entries
from leapgen.engine.model_loader import DEFAULT_MODEL, LoadedModel, configure_threads, load_model
from leapgen.engine.model_runner import ModelRunner
from leapgen.engine.parallel_sampling import make_samples
from leapgen.engine.prefix_cache import PrefixCache
from leapgen.engine.prompt import PromptChecker, default_stop_token_ids
from leapgen.engine.request import FinishReason, Request, RequestOutput
from leapgen.engine.sampling_params import SamplingParams
from leapgen.engine.scheduler import Scheduler
from leapgen.engine.stats import EngineStats

#: The shortest forced text (characters) jumped forward: a one-character jump did not pay end to end
#: (``benchmarks/bench_jump_min.py``; SGLang skips them too), longer ones did.
JUMP_FORWARD_MIN_CHARS = 2


class LLM(EngineCore):
    """Generate text with a causal LM, optionally constrained by a JSON
    Schema, a regex or an EBNF grammar, with jump-forward and continuous
    batching.

    Parameters
    ----------
    model : str, default "default"
        ``"default"`` (SmolLM2-135M-Instruct, embedded) or a local Hugging Face
        folder (Llama family). See :func:`leapgen.engine.load_model`.
    cache_dir : path-like or None, default None
        Converted-model cache root.
    num_threads : int or None, default None
        torch intra-op threads (process-wide); None = ``$LEAPGEN_NUM_THREADS``
        or the idle CPUs.
    loaded : LoadedModel or None, default None
        An already loaded model to use instead of loading ``model``.
    max_running : int, default 16
        Most requests decoding together (one forward pass per step).
    kv_token_budget : int, default 65536
        Most KV tokens reserved by running requests (prompt + max_tokens each).
    prefix_cache_tokens : int, default 4096
        Token budget of the cross-request prompt KV cache (LRU; 0 disables it):
        a prompt sharing at least 16 leading tokens with a recent prompt
        copies their KV and prefills only the rest.
    grammar_backend : str, default "leapgen"
        The grammar engine: ``"leapgen"``, ``"xgrammar"``, ``"llguidance"`` or
        ``"outlines-core"`` (see :class:`GrammarManager`; outlines-core has no
        jump-forward).
    compile_in_process : bool, default True
        Compile leapgen grammars in a worker process, so a long compile does
        not hold the GIL the other requests' steps need (see
        :mod:`leapgen.engine.compile_worker`).
    warm_up_grammar : bool, default False
        With the leapgen grammar backend, start loading the grammar layer's
        kernels on a background thread before the model loads
        (:func:`leapgen.compiler.warm_up.warm_up_in_background`), for a caller
        that knows a constrained request comes (``leapgen generate`` with a
        grammar), and the vocabulary's grammar set-up on the compile thread
        once the model is loaded (:meth:`GrammarManager.set_up_async`): the
        first compile waits for what is left of them, not for all of them.
        Costs ~0.5 s of CPU in a new process.
    prefill_dtype : str, torch.dtype or None, default "auto"
        Precision of prompt tokens' projections and attention (generated
        tokens always use the model's dtype): "auto" takes bfloat16 on a CPU
        with native bfloat16 units (AMX, AVX512-BF16), where it makes
        prefill ~2.4x faster; "float32" keeps every token in float32. See
        :class:`~leapgen.engine.model_runner.ModelRunner`.
    jump_forward_min_chars : int, default :data:`JUMP_FORWARD_MIN_CHARS`
        Forced text shorter than this is sampled, not jumped forward.
    tool_call_format : str or None, default None
        How the model writes tool calls (:meth:`chat`): ``"hermes"``,
        ``"llama3_json"`` or ``"mistral"``; None: the one its chat template
        names (Hermes when it names none). See
        :mod:`leapgen.engine.chat.tool_formats`.
    reasoning_parser : str or None, default None
        ``"qwen3"`` or ``"deepseek_r1"``: :meth:`chat` outputs start with
        the model's thinking, free of the grammar, returned apart
        (``reasoning_content``). See :mod:`leapgen.engine.chat.reasoning`.
    max_model_len : int or None, default None
        Most tokens of a request, prompt plus ``max_tokens`` (vLLM's
        ``max_model_len``); None: the model's context
        (``config.max_position_embeddings``). At most that context.
    grammar_cache_bytes, max_grammar_bytes, grammar_cache_dir, grammar_disk_cache_bytes
        The grammar caches' bounds: :class:`GrammarManager`'s ``cache_bytes``
        (default 512 MiB, in this process and in the compile worker alike),
        ``max_grammar_bytes`` (default 256 MiB), ``cache_dir`` (default a
        temporary folder removed at exit) and ``disk_cache_bytes`` (default
        1 GiB).

    Attributes
    ----------
    tokenizer, model_runner, stop_token_ids, scheduler, stats, grammar, prefix_cache, jump_forward_min_chars
    chat_settings : leapgen.engine.chat.plan.ChatSettings
        The chat template, tool-call format and reasoning parser.
    num_threads : int
        torch's intra-op threads, as set.
    max_model_len : int or None
        The longest request (prompt plus ``max_tokens``), in tokens.
    step_trace : collections.deque of dict
        The last 256 steps that ran a forward pass, oldest first: ``step``,
        ``num_forward`` (sequences in the forward), ``num_masked`` (bitmask
        rows filled), ``forward_start``/``forward_end`` and, when
        ``num_masked``, ``fill_start``/``fill_end`` (``time.perf_counter()``
        seconds; the fill runs on the mask worker during the forward).

    Raises
    ------
    leapgen.engine.model_loader.ModelLoadError
        If the model cannot be loaded.
    ValueError, ImportError
        Unknown or not installed ``grammar_backend``; unknown ``prefill_dtype``;
        ``jump_forward_min_chars`` < 1; ``max_model_len`` past the model's
        context; a bad ``$LEAPGEN_GRAMMAR_LOG_LEVEL``.

    Examples
    --------
    >>> llm = LLM()                                           # doctest: +SKIP
    >>> out = llm.generate("Give me a user as JSON.",
    ...                    SamplingParams(json_schema={"type": "object"}))[0]
    >>> out.text, out.jump_forward_tokens, out.finish_reason  # doctest: +SKIP
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, cache_dir: Any = None, num_threads: int | None = None,
                 loaded: LoadedModel | None = None, max_running: int = 16, kv_token_budget: int = 65536,
                 prefix_cache_tokens: int = 4096, grammar_backend: str = "leapgen", compile_in_process: bool = True,
                 warm_up_grammar: bool = False,
                 prefill_dtype: Any = "auto", jump_forward_min_chars: int = JUMP_FORWARD_MIN_CHARS,
                 tool_call_format: str | None = None, reasoning_parser: str | None = None,
                 max_model_len: int | None = None,
                 grammar_cache_bytes: int | None = DEFAULT_GRAMMAR_CACHE_BYTES,
                 max_grammar_bytes: int | None = DEFAULT_MAX_GRAMMAR_BYTES, grammar_cache_dir: str | None = None,
                 grammar_disk_cache_bytes: int | None = DEFAULT_DISK_CACHE_BYTES):
        if isinstance(jump_forward_min_chars, bool) or not isinstance(jump_forward_min_chars, int) \
                or jump_forward_min_chars < 1:
            raise ValueError(f"jump_forward_min_chars must be an int >= 1, got {jump_forward_min_chars!r}")
        self.num_threads = configure_threads(num_threads)
        grammar_log.configure()
        if warm_up_grammar and grammar_backend == "leapgen":
            # numba and the compiler's modules are imported here, on this thread, where they always were
            # (on the warm-up thread they would contend with transformers' imports for the GIL); a
            # process without a grammar imports neither
            import leapgen.compiler.compiler  # noqa: F401

            warm_up_in_background()  # overlaps the model load; the first compile's set-up waits for it
        self.loaded = loaded if loaded is not None else load_model(model, cache_dir=cache_dir)
        self.tokenizer = self.loaded.tokenizer
        self.model_runner = ModelRunner(self.loaded.model, prefill_dtype=prefill_dtype)
        self.stop_token_ids = default_stop_token_ids(self.tokenizer, self.loaded.model)
        self._prompts = PromptChecker(self.tokenizer, self.model_runner.vocab_size, self.max_context_tokens,
                                      max_model_len)
        self.max_model_len = self._prompts.max_model_len
        self.grammar = GrammarManager(self.tokenizer, self.model_runner.vocab_size, self.stop_token_ids,
                                      backend=grammar_backend, compile_in_process=compile_in_process,
                                      cache_bytes=grammar_cache_bytes, max_grammar_bytes=max_grammar_bytes,
                                      cache_dir=grammar_cache_dir, disk_cache_bytes=grammar_disk_cache_bytes)
        if warm_up_grammar:
            self.grammar.set_up_async()  # the vocabulary, while the caller prepares its prompt
        self.scheduler = Scheduler(max_running, kv_token_budget)
        self.stats = EngineStats()
        self.prefix_cache = PrefixCache(prefix_cache_tokens)
        self.step_trace: deque[dict] = deque(maxlen=256)
        self._ids = itertools.count()
        self.jump_forward_min_chars = jump_forward_min_chars
        self.chat_settings = ChatSettings(self.tokenizer, tool_call_format=tool_call_format,
                                          reasoning_parser=reasoning_parser)

    @property
    def load_s(self) -> float:
        """Seconds the model load took."""
        return self.loaded.load_s

    @property
    def num_kv_tokens(self) -> int:
        """KV entries held by running requests right now (safe to read from
        another thread: a racing finish counts as 0)."""
        return sum(getattr(r.kv_cache, "length", 0) for r in list(self.scheduler.running))

    # ------------------------------------------------------------------ API

    def generate(self, prompts: str | Sequence[str], params: SamplingParams | Sequence[SamplingParams] | None = None,
                 *, chat: bool = True) -> list[RequestOutput]:
        """Complete each prompt (all in one continuous batch).

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
            In prompt order, ``params.n`` per prompt (samples in ``index``
            order, flat, as SGLang returns them). A request whose grammar fails
            to compile (or that fails later) comes back with
            ``finish_reason="error"`` and ``error`` set; the others are
            unaffected.

        Raises
        ------
        ValueError
            If ``params`` is a sequence of the wrong length, or a prompt is not
            a str or is empty.
        """
        if isinstance(prompts, str):
            prompts = [prompts]
        params = SamplingParams() if params is None else params
        params_list = [params] * len(prompts) if isinstance(params, SamplingParams) else list(params)
        if len(params_list) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(params_list)} SamplingParams")
        requests: list[Request] = []
        try:
            for prompt, sp in zip(prompts, params_list):
                requests += self.add_requests(prompt, sp, chat=chat)
        except BaseException:
            self.scheduler.remove(requests)
            raise
        while any(not r.is_finished for r in requests):
            self.step()
        return [self.get_output(r) for r in requests]

    def chat(self, messages: Sequence[dict] | Sequence[Sequence[dict]], params: SamplingParams | None = None, *,
             tools: Sequence[dict] | None = None, tool_choice: Any = None, parallel_tool_calls: bool = True,
             chat_template_kwargs: dict | None = None, max_reasoning_tokens: int | None = None) -> list:
        """Complete conversations with OpenAI's tool calling and a reasoning
        model's thinking split off (all in one continuous batch).

        Parameters
        ----------
        messages : list of dict, or list of such lists
            One conversation or several (OpenAI's messages: assistant
            ``tool_calls`` with ``content`` None, ``tool`` messages with
            ``tool_call_id``, text parts).
        params : SamplingParams or None, default None
            For every conversation; its grammar (if any) applies after the
            thinking and cannot go with tool calls.
        tools : list of dict or None
            OpenAI's function tools (``{"type": "function", "function":
            {"name", "description", "parameters", "strict"}}``).
        tool_choice : str, dict or None
            ``"none"``, ``"auto"`` (default with tools), ``"required"``, or
            ``{"type": "function", "function": {"name": ...}}``.
        parallel_tool_calls : bool, default True
            False: at most one call.
        chat_template_kwargs : dict or None
            Extra variables of the chat template (``{"enable_thinking": False}``).
        max_reasoning_tokens : int or None
            Most tokens of thinking (with a ``reasoning_parser``).

        Returns
        -------
        list of ChatOutput
            ``params.n`` per conversation, in order: ``message`` (OpenAI's
            assistant message: ``content``, ``tool_calls``,
            ``reasoning_content``), ``finish_reason`` (``"tool_calls"`` when
            it called), ``output`` (the :class:`RequestOutput`).

        Raises
        ------
        ValueError
            Bad tools or tool_choice (:class:`~leapgen.engine.chat.tools.ToolsError`,
            naming the field and the JSON pointer), a conversation the chat
            template refuses, tools with a grammar.
        """
        from leapgen.engine.chat.plan import chat_output

        params = SamplingParams() if params is None else params
        conversations = [messages] if not messages or isinstance(messages[0], dict) else list(messages)
        plans = [self.chat_settings.plan(c, params, tools=tools, tool_choice=tool_choice,
                                         parallel_tool_calls=parallel_tool_calls,
                                         chat_template_kwargs=chat_template_kwargs,
                                         max_reasoning_tokens=max_reasoning_tokens) for c in conversations]
        outs = self.generate([p.prompt_ids for p in plans], [p.params for p in plans])
        return [chat_output(out, plans[k // params.n].parser) for k, out in enumerate(outs)]

    @property
    def max_context_tokens(self) -> int | None:
        """The model's context length (``config.max_position_embeddings``), None if unknown."""
        n = getattr(getattr(self.loaded.model, "config", None), "max_position_embeddings", None)
        return n if isinstance(n, int) and n > 0 else None

    @property
    def max_token_bytes(self) -> int:
        """An upper bound on the UTF-8 bytes of one token's text (see :class:`PromptChecker`)."""
        return self._prompts.max_token_bytes

    def prepare_prompt(self, prompt: str | list[dict] | list[int], params: SamplingParams, *,
                       chat: bool = True) -> list[int]:
        """Check a request and tokenize its prompt (safe on any thread; the
        server runs it off the engine thread). See :meth:`PromptChecker.prepare`.

        Returns
        -------
        list of int
            The prompt token ids (chat template applied with ``chat``).

        Raises
        ------
        ValueError
            As :meth:`add_requests` does.
        """
        return self._prompts.prepare(prompt, params, chat=chat)

    def add_request(self, prompt: str | list[dict], params: SamplingParams, *, chat: bool = True) -> Request:
        """Queue one request of one sample (:meth:`add_requests` with
        ``params.n == 1``).

        Raises
        ------
        ValueError
            What :meth:`add_requests` raises, and ``params.n != 1``.
        """
        if isinstance(params, SamplingParams) and params.n != 1:
            raise ValueError(f"add_request queues one sample; use add_requests for n={params.n}")
        return self.add_requests(prompt, params, chat=chat)[0]

    def add_requests(self, prompt: str | list[dict], params: SamplingParams, *, chat: bool = True,
                     prompt_ids: list[int] | None = None) -> list[Request]:
        """Queue the ``params.n`` samples of one prompt; the grammar compile
        (one for all) starts now, on a worker.

        Parameters
        ----------
        prompt : str or list of dict or list of int
            A user message, raw text (``chat=False``), a conversation, or
            token ids.
        params : SamplingParams
        chat : bool, default True
        prompt_ids : list of int or None
            The prompt's ids from :meth:`prepare_prompt` (done elsewhere:
            the server's tokenizer thread); None: prepared here.

        Returns
        -------
        list of Request
            ``params.n`` samples, queued (they run in later :meth:`step`
            calls); sample 0 prefills the prompt, the others copy its KV
            (:mod:`leapgen.engine.parallel_sampling`).

        Raises
        ------
        ValueError
            If ``params`` is not a SamplingParams, its ``stop_token_ids`` are
            outside the model's vocabulary, or the prompt is empty, ill-typed or
            not shorter than ``max_model_len`` (default: the model's context,
            ``max_context_tokens``), or prompt plus ``max_tokens`` exceeds it
            (as vLLM refuses it), or ``params.prompt_logprobs_start`` is not
            within the prompt; see :class:`PromptChecker`.
        """
        if prompt_ids is None:
            prompt_ids = self.prepare_prompt(prompt, params, chat=chat)
        stop_ids = frozenset(params.stop_token_ids) if params.stop_token_ids is not None else self.stop_token_ids
        requests = make_samples(prompt if isinstance(prompt, str) else "", prompt_ids, params, stop_ids, None,
                                self._ids)
        if params.constrained:  # one compile for all samples, named in the grammar log by the first
            future = self.grammar.compile_async(params, request_id=requests[0].request_id)
            for req in requests:
                req.compile_future = future
        for req in requests:
            self.scheduler.add(req)
        return requests

    def close(self) -> None:
        """Stop the grammar compile worker and remove the temporary grammar disk cache (idempotent; also
        done at interpreter exit)."""
        self.grammar.close()

    def abort_request(self, req: Request) -> None:
        """Cancel ``req`` (finish reason ``"abort"``) and free its KV cache.
        Call it from the thread that runs :meth:`step`. A finished request is
        left as it is."""
        if not req.is_finished:
            self._finish(req, FinishReason.ABORT)
            self.scheduler.remove([req])

    def fail_running(self, message: str) -> None:
        """Fail every waiting and running request with ``message`` (after an
        engine bug; mutates the scheduler)."""
        for req in list(self.scheduler.running) + list(self.scheduler.waiting):
            self._finish(req, FinishReason.ERROR, message)
        self.scheduler.remove(list(self.scheduler.running) + list(self.scheduler.waiting))

    def has_unfinished_requests(self) -> bool:
        """True while a request is waiting or running."""
        return len(self.scheduler) > 0

    def get_output(self, req: Request) -> RequestOutput:
        """Freeze ``req`` (finished or not) into a :class:`RequestOutput`."""
        text = self.decode(req.output_ids)
        logprobs = None
        if req.logprobs is not None:
            logprobs = output_entries(req.logprobs, self.grammar.token_text_bytes, text, req.text_end)
        return req.to_output(text, logprobs)
