"""The background warm-up of the grammar layer (:mod:`leapgen.compiler.warm_up`).

In a new process (a subprocess: this one has loaded kernels already), after
:func:`warm_up_kernels` on a toy vocabulary, compiling the README's schema for
another vocabulary and filling its first masks, and two small schemas' masks
computed at first visits (packed, or shared across grammars), loads no kernel
specialization that the warm-up did not load; without the warm-up the same
steps load some (so the check can fail).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import numba
    from leapgen.compiler import GrammarCompiler
    from leapgen.compiler.warm_up import warm_up_in_background, wait_for_warm_up
    from leapgen.matcher import GrammarMatcher
    from leapgen.vocab import TokenizerInfo

    def loaded():
        found = set()
        for name, module in list(sys.modules.items()):
            if name.startswith("leapgen."):
                for attr, value in vars(module).items():
                    if isinstance(value, numba.core.registry.CPUDispatcher):
                        found.update((value.py_func.__qualname__, s) for s in value.signatures)
        return found

    if sys.argv[1] == "warm":
        thread = warm_up_in_background()
        assert warm_up_in_background() is thread  # once per process
        assert wait_for_warm_up()
    before = loaded()
    words = ["{", "}", '"', ":", ",", " ", "ORD", "-", "0", "12", "345", "a", "b", "@", ".", "com", "true", "x"]
    info = TokenizerInfo([bytes([b]) for b in range(32, 127)] + [w.encode() for w in words] + [b""],
                         vocab_size=96 + len(words), stop_token_ids=[95 + len(words)])
    compiler = GrammarCompiler(info, warm_up=False)
    mask = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)

    def walk(schema, texts):
        matcher = GrammarMatcher(compiler.compile_json_schema(schema))
        for text in texts:
            matcher.fill_next_token_bitmask(mask)
            for byte in text.encode():
                assert matcher.accept_token(byte - 32), text
        matcher.fill_next_token_bitmask(mask)

    walk(json.load(open(sys.argv[2])), ['{"order_id": "ORD-', "12345"])
    for name in ("name", "city"):  # rows computed at first visits, packed or shared (the second: found)
        walk({"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}, ['{"', name, '": "ab'])
    assert compiler.token_index.shared_rows.hits > 0
    print(sorted(loaded() - before, key=str))
""")


def _new_loads(mode: str) -> str:
    # numba's JIT (a process with the kernel library loads no kernel: tests/test_kernel_library.py)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(ROOT / "examples" / "schemas" / "order.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env=dict(os.environ, LEAPGEN_KERNELS="jit"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_the_warm_up_loads_every_kernel_a_regular_compile_and_its_masks_call():
    pytest.importorskip("numba")
    assert _new_loads("warm") == "[]"
    assert _new_loads("cold") != "[]"  # the same steps without the warm-up do load kernels


LAZY = textwrap.dedent("""
    import sys
    import leapgen.cli, leapgen.engine, leapgen.engine.llm_engine, leapgen.engine.grammar_manager
    import leapgen.compiler, leapgen.compiler.warm_up
    heavy = sorted(m for m in sys.modules if m == "numba" or m in ("leapgen.compiler.compiler", "leapgen.matcher"))
    assert not heavy, heavy
    from leapgen.compiler import GrammarCompiler, TokenIndex
    from leapgen.automata import jit
    assert GrammarCompiler.__module__ == "leapgen.compiler.compiler"
    assert ("numba" in sys.modules) == (jit.MODE == "jit"), jit.MODE  # the kernel library needs no numba
    assert {"GrammarCompiler", "TokenIndex", "ContextFreeGrammar"} <= set(dir(leapgen.compiler))
    try:
        leapgen.compiler.NoSuchName
    except AttributeError as exc:
        assert "NoSuchName" in str(exc)
    else:
        raise AssertionError("no AttributeError")
    print("ok")
""")


def test_the_engine_and_the_cli_import_no_compiler_until_a_grammar_asks():
    """An unconstrained process (``leapgen generate`` without a grammar, ``LLM`` without one) does not pay
    numba's import and the compiler's modules (~0.5 s); ``leapgen.compiler``'s names still import on use."""
    pytest.importorskip("numba")
    proc = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
