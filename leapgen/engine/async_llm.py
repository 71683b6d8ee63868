"""The engine loop in a background thread, for asyncio callers: :class:`AsyncLLM`.

One responsibility: bridge threads. One thread owns the :class:`LLM` and runs
``step()`` while any request is unfinished; callers on an asyncio event loop
:meth:`AsyncLLM.submit` requests and read :class:`StreamEvent` objects from
a :class:`RequestStream` (an ``asyncio.Queue`` fed with
``loop.call_soon_threadsafe``). Cancelling a stream aborts its request between
two steps and frees its KV cache.

Events of a stream, in order: one *ready* event (no text) once the request's
grammar is compiled (or at once when unconstrained), so a server can still
answer 400 for a bad grammar before it starts streaming; text deltas as the
output grows (sampled and jump-forwarded text alike); one *final* event per
sample carrying its :class:`RequestOutput`. Each event names its sample
(``index``, for ``SamplingParams.n > 1``). A request that fails, a bad
grammar included, gets only final events.

Prompts are checked and tokenized on a tokenizer thread
(:meth:`LLM.prepare_prompt`), never on the engine thread, so a long prompt
does not stall the other requests' steps. With ``max_queued_requests``,
:meth:`AsyncLLM.submit` refuses a request (:class:`QueueFullError`) while that
many are already waiting to run (tokenizing, compiling their grammar before
admission, or waiting for a slot).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from leapgen.engine.llm_engine import LLM
from leapgen.engine.request import FinishReason, Request, RequestOutput
from leapgen.engine.sampling_params import SamplingParams

logger = logging.getLogger("leapgen.engine")


class QueueFullError(Exception):
    """:meth:`AsyncLLM.submit` refused a request: ``max_queued_requests``
    requests already wait to run (a server answers 429).

    Attributes
    ----------
    retry_after : int
        Seconds a client should wait before trying again.
    """

    def __init__(self, message: str, retry_after: int = 1):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class StreamEvent:
    """One message of a :class:`RequestStream`.

    Attributes
    ----------
    delta : str
        New output text of sample ``index`` since its previous event (""
        for *ready* and often for the final event).
    output : RequestOutput or None
        Set on sample ``index``'s final event only.
    index : int
        Which sample (``SamplingParams.n``) the event is about.
    logprobs : tuple of TokenLogprob
        Entries of tokens new since the previous event (with
        ``SamplingParams.logprobs``): a token's entry is sent once its text
        has been and it is not the output's last token (which a
        jump-forward may still merge with forced text); the final event
        sends the rest.
    """

    delta: str = ""
    output: RequestOutput | None = None
    index: int = 0
    logprobs: tuple = ()


class _Cursor:
    """What one sample's stream has sent: characters, and how many output
    bytes the logprob entries sent so far cover."""

    __slots__ = ("sent", "done", "lp_bytes")

    def __init__(self):
        self.sent = 0
        self.done = False
        self.lp_bytes = 0


class RequestStream:
    """The caller's end of one request (all its samples): ``await
    stream.get()`` returns the next :class:`StreamEvent`. Create with
    :meth:`AsyncLLM.submit`."""

    def __init__(self, engine: "AsyncLLM", loop: asyncio.AbstractEventLoop):
        self._engine = engine
        self._loop = loop
        self.queue: asyncio.Queue[StreamEvent] = asyncio.Queue()
        self.requests: list[Request] = []  # set by the engine thread
        self.cursors: list[_Cursor] = []
        self.ready = False
        self.done = False
        self.cancelled = False

    @property
    def request(self) -> Request | None:
        """The first sample's request (None until the engine took it)."""
        return self.requests[0] if self.requests else None

    async def get(self) -> StreamEvent:
        """The next event (waits for it)."""
        return await self.queue.get()

    def cancel(self) -> None:
        """Abort the request (no effect once it finished). Thread-safe."""
        if not self.done:
            self.cancelled = True
            self._engine._post(("abort", self))

    def _push(self, event: StreamEvent) -> None:
        """Called on the engine thread."""
        self._loop.call_soon_threadsafe(self.queue.put_nowait, event)


class AsyncLLM:
    """Run an :class:`LLM` in one background thread (the engine loop).

    Parameters
    ----------
    llm : LLM
        Owned by the loop thread from :meth:`start` on; touch it from other
        threads only to read counters (``llm.stats``).
    max_queued_requests : int or None, default None
        Most requests waiting to run (submitted, not yet decoding); past it
        :meth:`submit` raises :class:`QueueFullError`. None: no bound.
    log_requests : bool, default True
        Log one line per finished request (a failed one is logged whatever
        this says, with its reason).
    tokenizer_threads : int, default 1
        Threads that check and tokenize prompts.
    """

    def __init__(self, llm: LLM, *, max_queued_requests: int | None = None, log_requests: bool = True,
                 tokenizer_threads: int = 1):
        if max_queued_requests is not None and max_queued_requests < 0:
            raise ValueError(f"max_queued_requests must be >= 0, got {max_queued_requests}")
        self.llm = llm
        self.max_queued_requests = max_queued_requests
        self.log_requests = log_requests
        self._inbox: list[tuple] = []
        self._cond = threading.Condition()
        self._streams: list[RequestStream] = []
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._preparing = 0  # submitted, not yet handed to the engine thread (guarded by _cond)
        self._tokenizer = ThreadPoolExecutor(tokenizer_threads, thread_name_prefix="leapgen-tokenize")

    def start(self) -> None:
        """Start the loop thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="leapgen-engine", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the loop thread and wait for it; unfinished requests are dropped."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._tokenizer.shutdown(wait=False, cancel_futures=True)

    @property
    def num_requests(self) -> int:
        """Requests submitted and not yet finished."""
        return len(self._streams) + len(self._inbox) + self._preparing

    @property
    def num_queued(self) -> int:
        """Requests submitted and not decoding yet: being tokenized, or waiting in the scheduler."""
        return self._preparing + sum(m[0] == "add" for m in list(self._inbox)) + len(self.llm.scheduler.waiting)

    def submit(self, prompt: str | list[dict], params: SamplingParams, *, chat: bool = True) -> RequestStream:
        """Queue a request from a coroutine (uses the running event loop).

        Returns
        -------
        RequestStream
            Read its events with ``await stream.get()``. A request the engine
            rejects (an empty or too long prompt, ...) ends with a final
            event whose output has ``finish_reason="error"``.

        Raises
        ------
        QueueFullError
            If ``max_queued_requests`` requests already wait to run.
        """
        with self._cond:
            if self.max_queued_requests is not None and self.num_queued >= self.max_queued_requests:
                raise QueueFullError(f"the server is busy: {self.max_queued_requests} requests are already "
                                     "waiting to run (max_queued_requests); retry later")
            self._preparing += 1
        stream = RequestStream(self, asyncio.get_running_loop())
        try:
            self._tokenizer.submit(self._prepare, stream, prompt, params, chat)
        except RuntimeError:  # shut down
            with self._cond:
                self._preparing -= 1
            raise
        return stream

    def _prepare(self, stream: RequestStream, prompt: Any, params: SamplingParams, chat: bool) -> None:
        """On the tokenizer thread: check and tokenize, then hand the request to the engine thread."""
        try:
            ids: Any = self.llm.prepare_prompt(prompt, params, chat=chat)
        except Exception as exc:  # noqa: BLE001 - a bad prompt fails its request alone
            if not isinstance(exc, ValueError):
                logger.exception("preparing a prompt failed; failing that request")
            ids = exc
        with self._cond:
            self._preparing -= 1
            self._inbox.append(("add", stream, prompt, params, chat, ids))
            self._cond.notify()

    def _post(self, message: tuple) -> None:
        with self._cond:
            self._inbox.append(message)
            self._cond.notify()

    # -------------------------------------------------------- loop thread

    def _run(self) -> None:
        llm = self.llm
        while True:
            with self._cond:
                while not self._inbox and not llm.has_unfinished_requests() and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                inbox, self._inbox = self._inbox, []
            for message in inbox:
                self._handle(message)
            if llm.has_unfinished_requests():
                try:
                    llm.step()
                except Exception:  # noqa: BLE001 - a bug in a step fails the batch, not the server
                    logger.exception("engine step failed; failing the running requests")
                    llm.fail_running("internal engine error (see the server log)")
            self._publish()

    def _handle(self, message: tuple) -> None:
        if message[0] == "abort":
            for req in message[1].requests:
                if not req.is_finished:
                    self.llm.abort_request(req)
            return
        _, stream, prompt, params, chat, ids = message
        try:
            if isinstance(ids, Exception):
                raise ids
            if stream.cancelled:
                raise ValueError("the request was cancelled before it started")
            stream.requests = self.llm.add_requests(prompt, params, chat=chat, prompt_ids=ids)
        except Exception as exc:  # noqa: BLE001 - one bad request fails alone, never the engine thread
            if not isinstance(exc, ValueError):
                logger.exception("add_requests failed; failing that request")
            failed = Request(request_id=-1, prompt="", prompt_ids=[], params=params, stop_token_ids=frozenset(),
                             generator=None)
            failed.finish(FinishReason.ABORT if stream.cancelled else FinishReason.ERROR, exc)
            stream.requests = [failed]
        stream.cursors = [_Cursor() for _ in stream.requests]
        self._streams.append(stream)

    def _publish(self) -> None:
        """Push each stream's new events; forget finished streams."""
        live = []
        for stream in self._streams:
            reqs = stream.requests
            if not stream.ready and any(r.grammar_ready and not r.is_finished for r in reqs):
                stream.ready = True
                stream._push(StreamEvent())
            for i, (req, cursor) in enumerate(zip(reqs, stream.cursors)):
                if cursor.done:
                    continue
                if req.is_finished:
                    out = self.llm.get_output(req)
                    self._log_finished(out)
                    rest = self._new_logprobs(cursor, out.logprobs, len(out.logprobs or ()), None)
                    stream._push(StreamEvent(out.text[cursor.sent:], out, i, rest))
                    cursor.done = True
                elif stream.ready:
                    self._publish_delta(stream, i, req, cursor)
            if all(c.done for c in stream.cursors):
                stream.done = True
            else:
                live.append(stream)
        self._streams = live

    def _publish_delta(self, stream: RequestStream, index: int, req: Request, cursor: _Cursor) -> None:
        """Push sample ``index``'s new text (whole characters, a possible stop
        string held back) and the entries of the tokens it completes."""
        text = self.llm.decode(req.output_ids)
        safe = len(text.rstrip("\ufffd"))  # an unfinished UTF-8 character
        if req.params.stop:
            safe = min(safe, len(text) - max(len(s) for s in req.params.stop) + 1)
        entries: tuple = ()
        if safe > cursor.sent:
            if req.logprobs is not None:
                limit = len(text[:safe].encode("utf-8", "surrogatepass"))
                entries = self._new_logprobs(cursor, req.logprobs, len(req.output_ids) - 1, limit)
            stream._push(StreamEvent(text[cursor.sent:safe], None, index, entries))
            cursor.sent = safe

    def _new_logprobs(self, cursor: _Cursor, entries, upto: int, limit: int | None) -> tuple:
        """The entries past those already sent: among the first ``upto``,
        those whose tokens end within ``limit`` bytes (None: all). A sent
        entry whose token a jump-forward has since replaced stays sent; of
        the tokens now covering those bytes, only one that reaches past them
        is sent (its bytes then overlap the sent ones)."""
        if not entries:
            return ()
        token_bytes = self.llm.grammar.token_text_bytes
        # Where the entries sent so far end in the current tokens (a jump-forward may have replaced some).
        start, covered = 0, 0
        while start < len(entries) and entries[start] is not None:
            size = len(token_bytes[entries[start].token_id])
            if covered + size > cursor.lp_bytes:
                break
            covered += size
            start += 1
        out = []
        for j in range(start, min(upto, len(entries))):
            e = entries[j]
            if e is None:
                break
            size = len(token_bytes[e.token_id])
            if limit is not None and covered + size > limit:
                break
            covered += size
            out.append(e)
        cursor.lp_bytes = max(cursor.lp_bytes, covered)
        return tuple(out)

    def _log_finished(self, out: RequestOutput) -> None:
        if out.finish_reason == FinishReason.ERROR:
            which = f"request {out.request_id}" if out.request_id >= 0 else "a request (refused before it started)"
            logger.warning("%s failed: %s: %s", which, out.error_type or "error", out.error)
            return
        if not self.log_requests:
            return
        if out.compile_ms:
            logger.info("request %d: grammar compiled in %.1f ms", out.request_id, out.compile_ms)
        hits, misses = self.llm.grammar.mask_cache_counts()
        rate = 100.0 * hits / (hits + misses) if hits + misses else 0.0
        logger.info("request %d: %d tokens, jump-forward: %d tokens, finish %s; mask-cache hit rate %.1f%%",
                    out.request_id, out.completion_tokens, out.jump_forward_tokens, out.finish_reason, rate)

    def describe(self) -> dict[str, Any]:
        """A snapshot of the counters (read from any thread)."""
        st = self.llm.stats
        hits, misses = self.llm.grammar.mask_cache_counts()
        return {"stats": st, "mask_cache_hits": hits, "mask_cache_misses": misses,
                "running": len(self.llm.scheduler.running), "waiting": len(self.llm.scheduler.waiting),
                "queued": self.num_queued, "kv_tokens": self.llm.num_kv_tokens,
                "prefix_cache_tokens": self.llm.prefix_cache.num_tokens,
                "grammar_cache_bytes": self.llm.grammar.cache_sizes()}
