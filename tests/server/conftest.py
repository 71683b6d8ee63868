"""Fixtures of the server tests: one uvicorn server, started in-process on
127.0.0.1 with a free port, over the embedded model (1 torch thread), and an
``openai`` client pointed at it (helpers in ``tests/server/helpers.py``)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.model


@pytest.fixture(scope="session")
def server():
    """(base_url, AsyncLLM) of a running server."""
    from tests.server.helpers import running_server

    yield from running_server()


@pytest.fixture(scope="session")
def client(server):
    import openai

    return openai.OpenAI(base_url=server[0] + "/v1", api_key="unused", max_retries=0, timeout=120)
