"""Abuse and overload limits of the HTTP server, applied to every route.

One responsibility: refuse a request before any endpoint sees it, or when the
engine's queue is full, and count the refusals.

- **Authentication** (``--api-key`` / ``$LEAPGEN_API_KEY``): without
  ``Authorization: Bearer <key>``, every route but ``/health`` answers 401
  (``WWW-Authenticate: Bearer``), before its body is read. The key is
  compared in constant time.
- **Body size** (``--max-request-bytes``, default 8 MiB): a body declared or
  found larger answers 413. The body is read (up to
  :data:`DRAIN_LIMIT_FACTOR` times the bound, then the connection is closed)
  and dropped, so the client, still sending, sees the 413 and not a reset
  connection; nothing of it is kept.
- **Queue** (``--max-queued-requests``): the engine's
  :class:`~leapgen.engine.async_llm.QueueFullError` answers 429 with
  ``Retry-After``.

Both first checks are one ASGI middleware (:class:`RequestLimits`), so they
cover every route, ones added later included. Every refusal is an
OpenAI-shaped error, counted in :class:`Refusals` (``/metrics``) and logged
with its reason.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from leapgen.server.protocol import error_body

logger = logging.getLogger("leapgen.server")

#: Default ``--max-request-bytes``: 8 MiB.
DEFAULT_MAX_REQUEST_BYTES = 8 << 20
#: A refused body is read and dropped up to this many times the bound; past it the connection is closed.
DRAIN_LIMIT_FACTOR = 8
#: Routes open without the API key.
OPEN_PATHS = frozenset({"/health"})


@dataclass(frozen=True)
class ServeLimits:
    """What the server refuses.

    Attributes
    ----------
    api_key : str or None
        Required as ``Authorization: Bearer <key>`` on every route but
        ``/health``; None: no authentication.
    max_request_bytes : int or None
        Largest request body (bytes); None: unbounded.
    max_queued_requests : int or None
        Most requests waiting to run (see
        :class:`~leapgen.engine.async_llm.AsyncLLM`); None: unbounded.
    """

    api_key: str | None = None
    max_request_bytes: int | None = DEFAULT_MAX_REQUEST_BYTES
    max_queued_requests: int | None = None


class Refusals:
    """Counts of refused requests by HTTP status (thread-safe; ``/metrics``
    exports them as ``leapgen_http_refusals_total{code=...}``)."""

    CODES = (401, 413, 429)

    def __init__(self) -> None:
        self._counts: Counter = Counter()
        self._lock = threading.Lock()

    def count(self, status: int) -> None:
        """Count one refusal (mutates)."""
        with self._lock:
            self._counts[status] += 1

    def snapshot(self) -> dict[int, int]:
        """Counts of every status of :attr:`CODES` (0 for none yet) and any other counted."""
        with self._lock:
            return {code: self._counts.get(code, 0) for code in sorted(set(self.CODES) | set(self._counts))}


Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class RequestLimits:
    """ASGI middleware: authentication, then the body size (see the module docstring).

    Parameters
    ----------
    app : ASGI application
    limits : ServeLimits
    refusals : Refusals
        Counted into (mutated).
    """

    def __init__(self, app: Any, *, limits: ServeLimits, refusals: Refusals):
        self.app = app
        self.limits = limits
        self.refusals = refusals
        key = limits.api_key
        self._expected = f"Bearer {key}".encode() if key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._expected is not None and scope["path"] not in OPEN_PATHS and not self._authorized(scope):
            await self._refuse(scope, send, 401, "missing or wrong API key: send the header "
                               "'Authorization: Bearer <key>' with the key the server was started with",
                               code="invalid_api_key", headers=[(b"www-authenticate", b"Bearer")])
            return
        bound = self.limits.max_request_bytes
        if bound is None:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        ended = False
        if declared is None or declared <= bound:
            body, ended = await _read_body(receive, bound)
            if body is not None:
                await self.app(scope, _replay(body, receive), send)
                return
        drain_limit = bound * DRAIN_LIMIT_FACTOR
        drained = ended or ((declared is None or declared <= drain_limit) and await _drain(receive, drain_limit))
        size = f"{declared} bytes" if declared is not None else f"more than {bound} bytes"
        await self._refuse(scope, send, 413, f"the request body is {size}; this server takes at most "
                           f"{bound} bytes (--max-request-bytes)", code="request_too_large",
                           headers=[] if drained else [(b"connection", b"close")])

    def _authorized(self, scope: Scope) -> bool:
        got = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
        return hmac.compare_digest(got, self._expected)

    async def _refuse(self, scope: Scope, send: Send, status: int, message: str, *, code: str,
                      headers: list) -> None:
        self.refusals.count(status)
        client = scope.get("client") or ("?", 0)
        logger.warning("refused %s %s from %s: %d %s", scope.get("method"), scope.get("path"), client[0], status,
                       message)
        await send_error(send, status, message, code=code, headers=headers)


async def send_error(send: Send, status: int, message: str, *, code: str | None = None,
                     headers: list | None = None, type_: str = "invalid_request_error") -> None:
    """Send a whole OpenAI-shaped JSON error response through raw ASGI."""
    body = json.dumps(error_body(message, type_=type_, code=code)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for k, v in scope.get("headers", ()):
        if k == b"content-length":
            try:
                return int(v)
            except ValueError:
                return None
    return None


async def _read_body(receive: Receive, bound: int) -> tuple[bytes | None, bool]:
    """``(the body, True)``, read whole while it stays within ``bound`` bytes; past it ``(None, whether the
    body also ended)``: the server may hand over the whole rest of a body in one message, and reading on
    after its last one would wait for the client to disconnect. A disconnect ends the body (the app then
    sees an empty or partial body and its own disconnect)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), True
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        size += len(chunk)
        if size > bound:
            return None, not more
        chunks.append(chunk)
        if not more:
            return b"".join(chunks), True


async def _drain(receive: Receive, limit: int) -> bool:
    """Read and drop the rest of a refused body, at most ``limit`` bytes; True if it ended."""
    size = 0
    while size <= limit:
        message = await receive()
        if message["type"] != "http.request":
            return True
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            return True
    return False


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the buffered body once, then the real one (disconnects)."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def queue_full_response(exc: Any, refusals: Refusals) -> Any:
    """The 429 of a :class:`~leapgen.engine.async_llm.QueueFullError` (counted and logged)."""
    from fastapi.responses import JSONResponse

    refusals.count(429)
    logger.warning("refused a request: 429 %s", exc)
    return JSONResponse(error_body(str(exc), type_="rate_limit_error", code="queue_full"), status_code=429,
                        headers={"Retry-After": str(exc.retry_after)})
