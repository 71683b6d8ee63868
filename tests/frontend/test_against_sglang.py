"""leapgen.frontend's RuntimeEndpoint sends the same requests as SGLang's own.

The real ``sglang`` package's frontend needs torch, triton and a dozen other
packages (see the README), so it lives in a separate environment: set
``LEAPGEN_SGLANG_PYTHON`` to a Python that can ``import sglang``. Both clients
run ``sglang_protocol_probe.py`` (the issue's example and a ``select``)
against the same fake SGLang server; their requests and results must be
equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("sglang_protocol_probe.py")
SGLANG_PYTHON = os.environ.get("LEAPGEN_SGLANG_PYTHON")


def run_probe(python: str, module: str) -> dict:
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([python, str(PROBE), module], capture_output=True, text=True, timeout=300,
                         cwd="/" if module == "sglang" else root,
                         env={**os.environ, "PYTHONPATH": "" if module == "sglang" else str(root)})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not SGLANG_PYTHON, reason="LEAPGEN_SGLANG_PYTHON (a Python with the sglang package) is not set")
def test_same_requests_as_sglang():
    real = run_probe(SGLANG_PYTHON, "sglang")
    ours = run_probe(sys.executable, "leapgen.frontend")
    assert ours["requests"] == real["requests"]
    assert (ours["person"], ours["bright"], ours["text"]) == (real["person"], real["bright"], real["text"])
