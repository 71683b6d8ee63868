"""numba's ``time.monotonic()`` for kernels: the dispatcher behind :func:`leapgen.automata.clock.monotonic_seconds`.

One responsibility. Imported only where the kernels are numba's JIT (or being compiled into the kernel
library), never in a process that uses the library. On 64-bit Linux the
clock is read natively: a call of libc's ``clock_gettime(CLOCK_MONOTONIC)``, the clock
CPython's ``time.monotonic()`` reads there, emitted as an LLVM call (a numba
intrinsic; the symbol is resolved when the kernel is linked, so numba's disk
cache keeps it). Elsewhere it is read through an object-mode block. Such a
block is compiled again in every process, never cached: ~43 ms of the first
timed compile in a new process on Linux before this module (numba 0.68).
"""

from __future__ import annotations

import time

import numba

from leapgen.automata.clock import CLOCK_MONOTONIC, NATIVE

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
