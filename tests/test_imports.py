"""``import leapgen`` needs none of the optional packages (outlines-core's test_imports idea).

A subprocess installs a meta-path hook that refuses the peer engines, torch
and transformers, then imports leapgen and its backend registry, compiles and
matches a regex through the ``leapgen`` backend and through
``leapgen.xgrammar``, and checks that a peer backend fails with a clear
ImportError.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import sys

    BLOCKED = {"xgrammar", "llguidance", "outlines_core", "torch", "transformers", "tokenizers", "triton"}

    class Blocker:
        def find_spec(self, fullname, path=None, target=None):
            if fullname.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"blocked for the test: {fullname}", name=fullname)
            return None

    sys.meta_path.insert(0, Blocker())

    import numpy as np
    import leapgen
    import leapgen.backends
    from leapgen import TokenizerInfo

    assert leapgen.backends.available_backends() == ["leapgen"], leapgen.backends.available_backends()
    info = TokenizerInfo(["a", "b", "ab", "</s>"], stop_token_ids=[3])
    backend = leapgen.backends.get_backend("leapgen", info)
    state = backend.new_state(backend.compile_regex("(ab)+"))
    bitmask = backend.allocate_bitmask(1)
    state.fill_next_token_bitmask(bitmask, 0)
    assert state.accept_token(2) and state.is_completed()
    for name in ("xgrammar", "llguidance", "outlines-core"):
        try:
            leapgen.backends.get_backend(name, info)
        except ImportError as e:
            assert "pip install" in str(e), e
        else:
            raise AssertionError(name + " should not load")
    import leapgen.xgrammar as xgr  # the xgrammar-compatible surface needs none of them either
    xinfo = xgr.TokenizerInfo(["a", "b", "ab", "</s>"])
    matcher = xgr.GrammarMatcher(xgr.GrammarCompiler(xinfo).compile_regex("(ab)+"))
    matcher.fill_next_token_bitmask(np.full((1, 1), -1, np.int32))
    assert matcher.accept_token(2) and matcher.is_completed() and xinfo.stop_token_ids == [3]
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not loaded, loaded
    print("ok")
""")


def test_import_without_optional_packages():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
