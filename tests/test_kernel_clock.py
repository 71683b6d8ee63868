"""The kernels' clock (``leapgen.automata.clock``): it reads ``time.monotonic()``'s clock, and the
timed kernels read it without an object-mode block (numba compiles such a block again in every
process: ~43 ms of a new process's first timed compile)."""

from __future__ import annotations

import time

import pytest

numba = pytest.importorskip("numba", reason="the kernels' clock is numba's; numba is not installed")

from leapgen.automata import clock, determinize_kernel, product_kernel  # noqa: E402
from leapgen.automata.dfa import compile_dfa, product  # noqa: E402
from leapgen.automata.limits import time_limit  # noqa: E402
from leapgen.grammar.regex import parse_regex  # noqa: E402


def test_reads_the_clock_time_monotonic_reads():
    for _ in range(3):
        before = time.monotonic()
        now = clock.monotonic_seconds()
        after = time.monotonic()
        assert before <= now <= after


@pytest.mark.skipif(not clock.NATIVE, reason="the clock is read natively on 64-bit Linux only")
def test_timed_kernels_lift_no_object_mode_block():
    with time_limit(60.0):  # the kernels read the clock only under a limit
        a = compile_dfa(parse_regex("[a-z]{1,6}(x|yz)*"))
        b = compile_dfa(parse_regex("[a-m]+"))
        assert product(a, b, difference=True).matches(b"nx")
    dispatchers = [obj for module in (clock, determinize_kernel, product_kernel) for obj in vars(module).values()
                   if isinstance(obj, numba.core.registry.CPUDispatcher)]
    compiled = [(d.__name__, result) for d in dispatchers for result in d.overloads.values()]
    assert {name for name, _ in compiled} >= {"monotonic_seconds", "subset_construction", "product_pairs"}
    assert [name for name, result in compiled if result.lifted] == []
