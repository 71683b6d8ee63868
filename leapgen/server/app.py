"""The OpenAI-compatible HTTP server: :func:`create_app` and :func:`serve`.

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/completions``,
``POST /v1/responses`` (OpenAI's Responses API), ``POST /generate`` and
``GET /get_model_info`` (SGLang's native API), ``GET /v1/models``, ``GET /health``,
``GET /metrics`` (Prometheus text). Which request fields are honoured:
``docs/server_fields.md``.
Requests are handled on the asyncio loop; the model runs in the engine loop
thread of :class:`leapgen.engine.async_llm.AsyncLLM`. Every error is an
OpenAI-shaped JSON object; a malformed body or grammar is a 400. The limits
of :mod:`leapgen.server.limits` (API key: 401, body size: 413, queue: 429)
apply to every route.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from leapgen.engine.async_llm import AsyncLLM, QueueFullError
from leapgen.server.limits import Refusals, RequestLimits, ServeLimits, queue_full_response
from leapgen.server.metrics import render_limit_metrics
from leapgen.server.protocol import CompletionRequest, error_body, now
from leapgen.server.protocol_chat import ChatCompletionRequest
from leapgen.server.protocol_responses import ResponsesRequest
from leapgen.server.protocol_sglang import GenerateRequest
from leapgen.server.serving_chat import create_chat_completion
from leapgen.server.serving_completions import create_completion
from leapgen.server.serving_generate import create_generate, model_info
from leapgen.server.serving_responses import create_response

#: Seconds an idle connection stays open (``leapgen serve --timeout-keep-alive``). uvicorn's default,
#: and vLLM's and SGLang's, is 5 s, the time httpx (so the ``openai`` SDK) keeps an idle connection in
#: its pool: a request sent as the server closes that connection fails with "Server disconnected
#: without sending a response" (a known race: vLLM #18472, kserve #5446). The server keeps them longer
#: than common clients' pools (httpx 5 s, aiohttp 15 s; nginx's own default is 75 s).
KEEP_ALIVE_S = 75

logger = logging.getLogger("leapgen.server")


def create_app(engine: AsyncLLM, *, model_name: str = "default", default_max_tokens: int = 256,
               limits: ServeLimits | None = None) -> FastAPI:
    """The FastAPI application over a started (or startable) engine.

    Parameters
    ----------
    engine : AsyncLLM
        Started on the app's startup if not already.
    model_name : str, default "default"
        The id ``/v1/models`` lists and responses carry.
    default_max_tokens : int, default 256
        ``max_tokens`` of a request that gives none.
    limits : ServeLimits or None
        API key, body size and queue bounds; None: ``ServeLimits()`` (8 MiB
        bodies, no key, the engine's queue bound). A ``max_queued_requests``
        given is set on ``engine`` (mutates it).
    """
    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI):
        engine.start()
        yield

    app = FastAPI(title="leapgen", version=_version(), lifespan=lifespan)
    limits = limits if limits is not None else ServeLimits()
    if limits.max_queued_requests is not None:
        engine.max_queued_requests = limits.max_queued_requests
    refusals = app.state.refusals = Refusals()
    app.add_middleware(RequestLimits, limits=limits, refusals=refusals)

    @app.exception_handler(QueueFullError)
    async def _queue_full(_: Request, exc: QueueFullError) -> JSONResponse:
        return queue_full_response(exc, refusals)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc.errors())
        return JSONResponse(error_body(message, param=param), status_code=400)

    @app.exception_handler(ValueError)
    async def _bad_value(_: Request, exc: ValueError) -> JSONResponse:
        # (a RequestRefused names its field: "not supported: <field>")
        return JSONResponse(error_body(str(exc), param=getattr(exc, "param", None), code=getattr(exc, "code", None)),
                            status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's own refusals (an undecodable body, an unknown route, a wrong method): OpenAI-shaped too.
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        type_ = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return JSONResponse(error_body(detail, type_=type_), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error in a request handler")
        return JSONResponse(error_body(f"internal server error ({type(exc).__name__})", type_="server_error"),
                            status_code=500)

    def _check_model(requested: str) -> JSONResponse | None:
        if requested in (model_name, "default"):
            return None
        return JSONResponse(error_body(f"the model {requested!r} does not exist; this server serves {model_name!r}",
                                       param="model", code="model_not_found"), status_code=404)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, http: Request) -> Any:
        if (refusal := _check_model(body.model)) is not None:
            return refusal
        return await create_chat_completion(body, http, engine, model_name, default_max_tokens)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, http: Request) -> Any:
        if (refusal := _check_model(body.model)) is not None:
            return refusal
        return await create_completion(body, http, engine, model_name, default_max_tokens)

    @app.post("/v1/responses")
    async def responses(body: ResponsesRequest, http: Request) -> Any:
        if (refusal := _check_model(body.model)) is not None:
            return refusal
        return await create_response(body, http, engine, model_name, default_max_tokens)

    @app.post("/generate")
    async def generate(body: GenerateRequest, http: Request) -> Any:
        return await create_generate(body, http, engine)

    @app.get("/get_model_info")
    async def get_model_info() -> dict:
        return model_info(engine.llm)

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": now(),
                                            "owned_by": "leapgen"}]}

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "requests": engine.num_requests}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(render_metrics(engine.describe(), refusals.snapshot()),
                                 media_type="text/plain; version=0.0.4")

    return app


#: The tags pydantic puts in an error's ``loc`` for the branch of a union (``dict[any,any]``, ``bool``...).
_UNION_TAGS = ("str", "int", "float", "bool", "none", "list", "dict", "function-after", "function-before")


def _validation_message(errors: list) -> tuple[str, str | None]:
    """(message, param) of a request body that failed validation: the first
    error, its field as a dotted path (union branch tags dropped)."""
    if not errors:
        return "invalid request body", None
    first = errors[0]
    loc = list(first.get("loc", ()))[1:]  # drop "body"
    if first.get("type") == "json_invalid":
        pos = loc[0] if loc else "?"
        reason = (first.get("ctx") or {}).get("error", "JSON decode error")
        return f"the request body is not valid JSON: {reason} at character {pos}", None
    loc = [p for p in loc if not (isinstance(p, str) and (p.split("[")[0] in _UNION_TAGS or "[" in p
                                                          or p[:1].isupper()))]  # (a model's name: a union tag)
    param = ".".join(str(p) for p in loc) or None
    if first.get("type") == "extra_forbidden":
        return f"unknown field: {param} (not a field of this endpoint; see docs/server_fields.md)", param
    msg = first.get("msg", "invalid value")
    return f"invalid request: {msg} (at {param or 'the body'})", param


def render_metrics(snapshot: dict, refusals: dict[int, int] | None = None) -> str:
    """Prometheus text exposition of :meth:`AsyncLLM.describe`'s snapshot
    (and the refusal counts, see :mod:`leapgen.server.metrics`)."""
    st = snapshot["stats"]
    hits, misses = snapshot["mask_cache_hits"], snapshot["mask_cache_misses"]
    lines = ["# TYPE leapgen_requests_total counter"]
    for reason, count in sorted(st.requests_finished.items()):
        lines.append(f'leapgen_requests_total{{finish_reason="{reason}"}} {count}')
    counters = {
        "prompt_tokens_total": st.prompt_tokens, "completion_tokens_total": st.completion_tokens,
        "jump_forward_tokens_total": st.jump_forward_tokens, "engine_steps_total": st.steps,
        "forward_passes_total": st.forward_passes, "batched_sequences_total": st.batched_sequences,
        "grammar_compiles_total": st.compiles, "grammar_compile_ms_total": round(st.compile_ms, 3),
        "mask_steps_total": st.mask_steps, "mask_fill_ms_total": round(st.mask_fill_ms, 3),
        "mask_wait_ms_total": round(st.mask_wait_ms, 3), "mask_cache_hits_total": hits,
        "mask_cache_misses_total": misses, "prefill_tokens_total": st.prefill_tokens,
        "prefix_cache_hits_total": st.prefix_cache_hits,
        "prefix_cache_hit_tokens_total": st.prefix_cache_hit_tokens,
    }
    for name, value in counters.items():
        lines += [f"# TYPE leapgen_{name} counter", f"leapgen_{name} {value}"]
    gauges = {"mask_cache_hit_rate": round(hits / (hits + misses), 6) if hits + misses else 0.0,
              "running_requests": snapshot["running"], "waiting_requests": snapshot["waiting"],
              "kv_tokens": snapshot["kv_tokens"], "prefix_cache_tokens": snapshot.get("prefix_cache_tokens", 0)}
    for name, value in gauges.items():
        lines += [f"# TYPE leapgen_{name} gauge", f"leapgen_{name} {value}"]
    lines += render_limit_metrics(snapshot, refusals)
    return "\n".join(lines) + "\n"


def warmup(engine: AsyncLLM, folder: str | Path) -> int:
    """Compile every ``*.json`` JSON Schema in ``folder`` (fills the grammar
    cache before serving; with the server's default JSON layout). Returns how
    many compiled; a schema that fails is logged and skipped."""
    from leapgen.engine.sampling_params import SamplingParams

    count = 0
    for path in sorted(Path(folder).glob("*.json")):
        try:
            future = engine.llm.grammar.compile_async(SamplingParams(json_schema=path.read_text(encoding="utf-8")))
            _, ms = future.result()  # through the compile worker: its cache and the engine's are both warm
        except (ValueError, OSError) as exc:
            logger.warning("warm-up: %s: %s", path.name, exc)
            continue
        logger.info("warm-up: %s: grammar compiled in %.1f ms", path.name, ms)
        count += 1
    return count


#: The start-up request's schema (:func:`warm_up_engine`): an object, a string, an integer.
_WARM_UP_REQUEST_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                           "required": ["a", "b"]}


def warm_up_engine(llm: Any) -> float:
    """Run one short constrained chat request through ``llm`` (not served), then forget it.

    A new process's first request pays one-time costs on every path it takes: torch's first
    forward passes, the chat template's rendering, the compile worker's first round trip, the
    matcher's first masks and jump-forward (``benchmarks/bench_cold_start.py``: ~0.4 s of the
    first request's TTFT, unconstrained ones too). A server pays them at start-up instead, before
    it listens, as vLLM runs warm-up batches before serving.

    Parameters
    ----------
    llm : LLM
        Mutated: its statistics and prefix cache are reset afterwards (the warm-up is not a
        request); its compiled-grammar cache keeps the warm-up's small grammar.

    Returns
    -------
    float
        Seconds the warm-up took.
    """
    import time

    from leapgen.engine.prefix_cache import PrefixCache
    from leapgen.engine.sampling_params import SamplingParams
    from leapgen.engine.stats import EngineStats

    start = time.perf_counter()
    llm.generate("Hi", SamplingParams(max_tokens=4, json_schema=_WARM_UP_REQUEST_SCHEMA))
    llm.stats = EngineStats()
    llm.prefix_cache = PrefixCache(llm.prefix_cache.max_tokens, llm.prefix_cache.min_tokens)
    return time.perf_counter() - start


def serve(*, model: str = "default", host: str = "127.0.0.1", port: int = 8000, max_running: int = 16,
          kv_token_budget: int = 65536, prefix_cache_tokens: int = 4096, warmup_dir: str | None = None,
          num_threads: int | None = None, grammar_backend: str = "leapgen", prefill_dtype: str = "auto",
          tool_call_format: str | None = None, reasoning_parser: str | None = None,
          served_model_name: str | None = None, limits: ServeLimits | None = None, log_requests: bool = True,
          log_level: str = "info", timeout_keep_alive: int = KEEP_ALIVE_S, **engine_options: Any) -> None:
    """Load the model and serve until interrupted (blocks).

    Parameters are :class:`~leapgen.engine.LLM`'s (``grammar_backend``: the
    grammar engine of every constrained request; ``tool_call_format`` and
    ``reasoning_parser``: how chat completions read tool calls and thinking;
    ``engine_options``: its ``max_model_len`` and grammar cache bounds), the
    address, ``warmup_dir`` (see :func:`warmup`), ``served_model_name`` (the
    id ``/v1/models`` lists; default: ``model``), ``limits`` (see
    :class:`ServeLimits`; the queue bound is the engine's), ``log_requests``
    (one line per finished request, and uvicorn's access log),
    ``log_level`` (uvicorn's) and ``timeout_keep_alive`` (seconds an idle
    connection stays open; see :data:`KEEP_ALIVE_S`).

    SIGINT and SIGTERM stop the server cleanly, during the model load too:
    the compile worker is stopped and the temporary grammar disk cache removed.

    Raises
    ------
    leapgen.engine.model_loader.ModelLoadError
        If the model cannot be loaded.
    ValueError, ImportError
        Unknown or not installed ``grammar_backend``; unknown
        ``tool_call_format`` or ``reasoning_parser``; a bad ``max_model_len``.
    """
    import gc
    import signal
    import threading

    import uvicorn

    from leapgen.engine.llm_engine import LLM
    from leapgen.server.logging_setup import startup_line

    limits = limits if limits is not None else ServeLimits()
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm) if in_main else None
    llm = None
    try:
        llm = LLM(model, num_threads=num_threads, max_running=max_running, kv_token_budget=kv_token_budget,
                  prefix_cache_tokens=prefix_cache_tokens, grammar_backend=grammar_backend,
                  prefill_dtype=prefill_dtype, tool_call_format=tool_call_format,
                  reasoning_parser=reasoning_parser, **engine_options)
        llm.grammar.prepare()  # the vocabulary, kernels and compile worker: not in the first request's TTFT
        logger.info("warm-up request: %.2f s", warm_up_engine(llm))  # the first request's other one-time costs
        engine = AsyncLLM(llm, max_queued_requests=limits.max_queued_requests, log_requests=log_requests)
        if warmup_dir is not None:
            logger.info("warm-up: %d schemas compiled", warmup(engine, warmup_dir))
        # What start-up made (torch, transformers, the model, the grammar layer: ~300k objects) lives as long as
        # the server: out of the collector's generations, a full collection does not walk it again (a 50-200 ms
        # pause otherwise), as vLLM does after its start-up.
        gc.collect()
        gc.freeze()
        name = served_model_name or model
        logger.info("%s", startup_line(llm, host=host, port=port, model_name=name, limits=limits,
                                       max_queued=limits.max_queued_requests))
        app = create_app(engine, model_name=name, limits=limits)
        try:
            uvicorn.run(app, host=host, port=port, log_level=log_level.lower(), access_log=log_requests,
                        timeout_keep_alive=timeout_keep_alive)
        finally:
            engine.stop()
    finally:
        if llm is not None:
            llm.close()
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM outside uvicorn's own handling (the model load): exit through the ``finally`` blocks."""
    raise SystemExit(128 + signum)


def _version() -> str:
    from leapgen.version import __version__

    return __version__
