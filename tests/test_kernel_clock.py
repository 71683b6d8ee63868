"""The kernels' clock (``leapgen.automata.clock``): it reads ``time.monotonic()``'s clock, and the
timed kernels read it without an object-mode block in numba's JIT (numba compiles such a block again in every
process: ~43 ms of a new process's first timed compile)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

numba = pytest.importorskip("numba", reason="the kernels' clock is numba's; numba is not installed")

from leapgen.automata import clock  # noqa: E402


def test_reads_the_clock_time_monotonic_reads():
    for _ in range(3):
        before = time.monotonic()
        now = clock.monotonic_seconds()
        after = time.monotonic()
        assert before <= now <= after


_NO_LIFTED_BLOCK = """
import numba
from leapgen.automata import clock, clock_numba, determinize_kernel, jit, product_kernel
from leapgen.automata.dfa import compile_dfa, product
from leapgen.automata.limits import time_limit
from leapgen.grammar.regex import parse_regex

assert jit.MODE == "jit", jit.MODE
clock.monotonic_seconds()  # its own overload (a kernel loaded from numba's cache compiles no callee)
with time_limit(60.0):  # the kernels read the clock only under a limit
    a = compile_dfa(parse_regex("[a-z]{1,6}(x|yz)*"))
    b = compile_dfa(parse_regex("[a-m]+"))
    assert product(a, b, difference=True).matches(b"nx")
dispatchers = [obj for module in (clock_numba, determinize_kernel, product_kernel) for obj in vars(module).values()
               if isinstance(obj, numba.core.registry.CPUDispatcher)]
compiled = [(d.__name__, result) for d in dispatchers for result in d.overloads.values()]
assert {name for name, _ in compiled} >= {"monotonic_seconds", "subset_construction", "product_pairs"}
assert [name for name, result in compiled if result.lifted] == []
"""


@pytest.mark.skipif(not clock.NATIVE, reason="the clock is read natively on 64-bit Linux only")
def test_timed_kernels_lift_no_object_mode_block():
    # numba's JIT in a process of its own: this one may use the kernel library, which holds no dispatchers
    done = subprocess.run([sys.executable, "-c", _NO_LIFTED_BLOCK], env=dict(os.environ, LEAPGEN_KERNELS="jit"),
                          cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
