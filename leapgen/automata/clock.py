"""``time.monotonic()`` inside kernels, for their compile deadlines.

One responsibility. A kernel that honours the compile time limit (:mod:`leapgen.automata.limits`)
compares :func:`monotonic_seconds` with a ``time.monotonic()`` deadline every few dozen states. In
numba's JIT and in the kernel library it is :mod:`leapgen.automata.clock_numba`'s: on 64-bit Linux a
native call of libc's ``clock_gettime(CLOCK_MONOTONIC)``, the clock CPython's ``time.monotonic()``
reads there; elsewhere an object-mode block, which numba compiles again in every process (~43 ms of
the first timed compile in a new process, numba 0.68).
"""

from __future__ import annotations

import sys
import time

from leapgen.automata.jit import kernel_from_factory

CLOCK_MONOTONIC = 1
"""Linux's id of the monotonic clock (``<time.h>``)."""

NATIVE = sys.platform.startswith("linux") and sys.maxsize > 2**32
"""Whether :func:`monotonic_seconds` reads the clock without leaving compiled code (64-bit Linux)."""


def monotonic_seconds():
    """``time.monotonic()`` (float64 seconds), callable from kernels; no side effects."""
    return time.monotonic()


monotonic_seconds = kernel_from_factory(monotonic_seconds, "leapgen.automata.clock_numba")
