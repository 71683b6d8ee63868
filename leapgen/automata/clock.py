"""``time.monotonic()`` inside numba kernels, for their compile deadlines.

One responsibility. A kernel that honours the compile time limit
(:mod:`leapgen.automata.limits`) compares :func:`monotonic_seconds` with a
``time.monotonic()`` deadline every few dozen states. On 64-bit Linux the
clock is read natively: a call of libc's ``clock_gettime(CLOCK_MONOTONIC)``, the clock
CPython's ``time.monotonic()`` reads there, emitted as an LLVM call (a numba
intrinsic; the symbol is resolved when the kernel is linked, so numba's disk
cache keeps it). Elsewhere it is read through an object-mode block. Such a
block is compiled again in every process, never cached: ~43 ms of the first
timed compile in a new process on Linux before this module (numba 0.68).
"""

from __future__ import annotations

import sys
import time

import numba

CLOCK_MONOTONIC = 1
"""Linux's id of the monotonic clock (``<time.h>``)."""

NATIVE = sys.platform.startswith("linux") and sys.maxsize > 2**32
"""Whether :func:`monotonic_seconds` reads the clock without leaving compiled code (64-bit Linux)."""

if NATIVE:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def _monotonic_ns(typingctx):
        """int64 nanoseconds of ``clock_gettime(CLOCK_MONOTONIC)`` (``struct timespec``: two int64 on
        64-bit Linux, the only platform this is compiled for)."""

        def codegen(context, builder, signature, args):
            i32, i64 = ir.IntType(32), ir.IntType(64)
            timespec = ir.LiteralStructType([i64, i64])
            clock_gettime = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(i32, [i32, timespec.as_pointer()]), "clock_gettime")
            spec = cgutils.alloca_once(builder, timespec)
            builder.call(clock_gettime, [ir.Constant(i32, CLOCK_MONOTONIC), spec])
            seconds = builder.load(cgutils.gep_inbounds(builder, spec, 0, 0))
            nanoseconds = builder.load(cgutils.gep_inbounds(builder, spec, 0, 1))
            return builder.add(builder.mul(seconds, ir.Constant(i64, 1_000_000_000)), nanoseconds)

        return types.int64(), codegen

    @numba.njit(cache=True, nogil=True)
    def monotonic_seconds():
        """``time.monotonic()`` (float64 seconds) from compiled code; no side effects."""
        return _monotonic_ns() / 1e9
else:  # pragma: no cover - exercised off Linux
    @numba.njit(cache=True)
    def monotonic_seconds():
        """``time.monotonic()`` (float64 seconds) from compiled code, through an object-mode block."""
        with numba.objmode(t="float64"):
            t = time.monotonic()
        return t
