"""``leapgen serve`` as a process: its grammar caches stay within their byte
bounds under distinct heavy grammars (the server's and its compile worker's
RSS, and the disk cache), and its temporary disk cache is gone after a clean
stop (SIGTERM, SIGINT) and, after a SIGKILL, removed by the next server's
start."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.server.helpers import free_port, needs_server_stack

pytestmark = pytest.mark.model

MIB = 1 << 20
#: ``(m|n)*m(m|n){15}`` behind a distinct literal: 65,540 DFA states, about 66 MiB in memory, 0.3 MiB on disk.
HEAVY = "id{}:(m|n)*m(m|n){{15}}"
CACHE_MB, GRAMMAR_MB, DISK_MB = 200, 80, 1
#: What RSS may grow past its bound: allocator slack and a compile's passing arrays (measured: under 100 MiB).
SLACK_MIB = 160


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(p) for p in text]
    return out


def _folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("leapgen-grammars-*"))


def _disk_bytes(tmp: Path) -> int:
    return sum(p.stat().st_size for folder in _folders(tmp) for p in folder.glob("*.npz"))


def _start(tmp: Path, *flags: str) -> tuple[subprocess.Popen, str]:
    needs_server_stack()
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc (Linux) to read process memory")
    port = free_port()
    env = dict(os.environ, TMPDIR=str(tmp), LEAPGEN_NUM_THREADS=os.environ.get("LEAPGEN_NUM_THREADS", "1"))
    proc = subprocess.Popen([sys.executable, "-m", "leapgen.cli", "serve", "--port", str(port), *flags],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited: {proc.stderr.read()}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    pytest.fail("the server did not start")


def _complete(url: str, **body) -> httpx.Response:
    return httpx.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 4, "temperature": 0, **body},
                      timeout=300)


def _stop(proc: subprocess.Popen, sig: int) -> None:
    proc.send_signal(sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the server did not stop on signal {sig}")


@pytest.mark.parametrize("count, cache_mb", [(8, 100), pytest.param(50, CACHE_MB, marks=pytest.mark.slow)])
def test_distinct_heavy_regexes_stay_within_the_byte_bounds(tmp_path, count, cache_mb):
    """``count`` distinct 66 MiB grammars through a ``cache_mb`` bound (the issue's case: 50 through 200 MiB,
    slow; the default run sends 8 through 100 MiB)."""
    proc, url = _start(tmp_path, "--grammar-cache-mb", str(cache_mb), "--max-grammar-mb", str(GRAMMAR_MB),
                       "--grammar-disk-cache-mb", str(DISK_MB))
    try:
        assert _complete(url, regex="warm-up [0-9]").status_code == 200  # the compile worker up, kernels loaded
        (worker,) = _children(proc.pid)
        base = {"server": _rss_mib(proc.pid), "worker": _rss_mib(worker)}
        peak = dict(base)
        disk_peak = 0
        for i in range(count):
            r = _complete(url, regex=HEAVY.format(i))
            assert r.status_code == 200, r.text
            assert re.match(rf"id{i}:[mn]*$", r.json()["choices"][0]["text"])
            peak = {"server": max(peak["server"], _rss_mib(proc.pid)), "worker": max(peak["worker"], _rss_mib(worker))}
            disk_peak = max(disk_peak, _disk_bytes(tmp_path))
        text = httpx.get(url + "/metrics").text
        memory = int(re.search(r'grammar_cache_bytes\{process="engine",where="memory"\} (\d+)', text).group(1))
        assert 0 < memory <= cache_mb * MIB
        print(f"RSS MiB baseline {base}, peak {peak}; disk peak {disk_peak / MIB:.2f} MiB")
        for name in base:  # without the bounds: count x 66 MiB each (50: 3.3 GiB)
            assert peak[name] - base[name] <= cache_mb + SLACK_MIB, (name, base, peak)
        assert 0 < disk_peak <= DISK_MB * MIB
    finally:
        _stop(proc, signal.SIGTERM)
    assert proc.returncode in (0, 128 + signal.SIGTERM), proc.stderr.read()
    assert _folders(tmp_path) == []  # the temporary disk cache is gone after a clean stop


def test_the_disk_cache_is_removed_on_sigint_and_after_a_kill(tmp_path):
    proc, url = _start(tmp_path)
    assert _complete(url, regex="[ab]{3}").status_code == 200
    (left,) = _folders(tmp_path)
    assert list(left.glob("*.npz"))
    proc.kill()  # SIGKILL: no clean-up is possible
    proc.wait(timeout=30)
    time.sleep(0.5)  # the worker exits when its pipe closes
    assert _folders(tmp_path) == [left]
    proc, url = _start(tmp_path)
    # the next server removed the killed one's folder at its start (and made its own: it sets its grammar layer
    # up before it listens)
    assert left not in _folders(tmp_path)
    assert _complete(url, regex="[ab]{3}").status_code == 200
    (own,) = _folders(tmp_path)
    assert own.name.startswith(f"leapgen-grammars-{proc.pid}-")
    _stop(proc, signal.SIGINT)
    assert _folders(tmp_path) == [], proc.stderr.read()
    assert "Traceback" not in proc.stderr.read()
