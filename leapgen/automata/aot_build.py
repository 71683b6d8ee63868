"""Build the kernel library: ``python -m leapgen.automata.aot_build``.

One responsibility. Compiles every signature of ``kernel_signatures.txt`` with numba's ``pycc`` (numba's
own compiler, ahead of time) into one extension module under
:func:`leapgen.automata.aot.library_root`, in the folder of this checkout's key, with a manifest of
which compiled function is which signature. ``scripts/install.sh`` runs it (~1-2 min); a process that
finds it no longer imports numba (:mod:`leapgen.automata.aot`).

Four of pycc's ways are changed for the build:

- the code is compiled for the host CPU and the features it reports, as numba's JIT compiles it (pycc's
  default is a generic CPU; given the host's name, it leaves the features to the CPU model's defaults);
- the functions release the GIL while they run, as the JIT kernels do (``nogil``; pycc's wrappers
  otherwise hold it, which would stop a compile on one thread from running beside a model's forward pass
  on another);
- arguments are converted strictly (``aot_check.c``). pycc converts to an array type any array of the
  same item size (``float32`` for ``int32``; and it copies as many dimensions as the array has, whatever
  the type's count), and to an integer type anything ``int()`` takes, truncated. The library takes an
  array only of the signature's dtype kind and size, dimensions, native byte order and alignment,
  C-contiguous where the signature says so and writable where the signature writes (a read-only array
  type also takes a writable array), and an integer only where its value fits the signature's type; it
  raises TypeError otherwise, which :mod:`leapgen.automata.aot` turns into a call of numba's JIT. The
  TypeError is raised from C: pycc's own conversion errors crash the process in numba 0.68
  (``aot_check.c`` says why), and the checks run first so that those are never reached for arrays and
  integers.

- a returned array is boxed with numpy's type from ``aot_check.c``: pycc's code unpickles the type at
  every array it returns (``pickle.loads``, 1-2 µs each; numba's JIT keeps the unpickled object).

numba's disk cache is left out of the build (see :func:`_numba_cache_untouched`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from leapgen.automata import aot, jit
from leapgen.automata.kernel_types import Type, parse_signature


def numba_type(t: Type):
    """The numba type of a parsed type of the notation (:mod:`leapgen.automata.kernel_types`)."""
    from numba.core import types

    if isinstance(t, str):
        return {"bool": types.boolean, "none": types.none}.get(t) or getattr(types, t)
    if t[0] == "tuple":
        return types.Tuple([numba_type(item) for item in t[1]])
    _, dtype, ndim, layout, readonly = t
    return types.Array(numba_type(dtype), ndim, layout, readonly=readonly)


def _dispatcher(kernel: str):
    module_name, qualname = kernel.split(":")
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj  # numba's dispatcher (this runs with LEAPGEN_KERNELS=jit)


CHECKS = Path(__file__).with_name("aot_check.c")
"""The C checks the strict conversions call."""


def _checked(check, original):
    """An unboxing function that calls ``check(obj, c)`` (an LLVM i32, non-zero where the object fits) and
    only then ``original``; a TypeError is set otherwise."""
    from llvmlite import ir
    from numba.core import cgutils
    from numba.core.pythonapi import NativeValue

    def unbox(typ, obj, c):
        if not getattr(c.context, "aot_mode", False):  # numba's JIT compiling a callee meanwhile: its own way
            return original(typ, obj, c)
        value = cgutils.alloca_once(c.builder, c.context.get_value_type(typ))
        c.builder.store(cgutils.get_null_value(value.type.pointee), value)
        failed = cgutils.alloca_once_value(c.builder, cgutils.true_bit)
        result = check(typ, obj, c)
        fits = c.builder.icmp_signed("!=", result, result.type(0))
        with c.builder.if_else(fits) as (then, otherwise):
            with then:
                native = original(typ, obj, c)
                c.builder.store(native.value, value)
                c.builder.store(native.is_error, failed)
            with otherwise:
                raise_type_error = cgutils.get_or_insert_function(
                    c.builder.module, ir.FunctionType(ir.VoidType(), [c.pyapi.cstring]), "leapgen_type_error")
                message = c.context.insert_const_string(c.builder.module,
                                                        f"leapgen kernel library: an argument is not {typ}")
                c.builder.call(raise_type_error, [message])
        return NativeValue(c.builder.load(value), is_error=c.builder.load(failed))

    return unbox


def _array_check(typ, obj, c):
    import numpy as np
    from llvmlite import ir
    from numba.core import cgutils
    from numba.np import numpy_support

    i32 = ir.IntType(32)
    function = cgutils.get_or_insert_function(c.builder.module, ir.FunctionType(i32, [c.pyapi.pyobj] + [i32] * 5),
                                              "leapgen_array_matches")
    dtype = np.dtype(numpy_support.as_dtype(typ.dtype))
    return c.builder.call(function, [obj, i32(ord(dtype.kind)), i32(dtype.itemsize), i32(typ.ndim),
                                     i32(int(typ.layout == "C")), i32(int(typ.mutable))])


def _integer_check(typ, obj, c):
    from llvmlite import ir
    from numba.core import cgutils

    i32 = ir.IntType(32)
    function = cgutils.get_or_insert_function(c.builder.module, ir.FunctionType(i32, [c.pyapi.pyobj, i32, i32]),
                                              "leapgen_integer_fits")
    return c.builder.call(function, [obj, i32(typ.bitwidth), i32(int(typ.signed))])


_CHECK_SYMBOLS = ("leapgen_array_matches", "leapgen_integer_fits", "leapgen_type_error", "leapgen_ndarray_type")


def _checks_for_the_jit(toolchain, build_dir: Path) -> None:
    """Make ``aot_check.c``'s functions resolvable by numba's JIT in this process too.

    While pycc compiles an export, numba also registers it as a user function of the JIT's target context
    (pycc's context shares that registry), and a callee the JIT then compiles may link it: its strict
    conversions call these functions. Compiles ``aot_check.c`` into a shared library in ``build_dir``, loads
    it and adds its symbols to llvmlite's table. Mutates this process's symbol table only."""
    import ctypes

    from llvmlite import binding

    objects = toolchain.compile_objects([str(CHECKS)], str(build_dir), include_dirs=toolchain.get_python_include_dirs())
    shared = build_dir / "leapgen_checks.so"
    toolchain.link_shared(str(shared), objects)
    library = ctypes.CDLL(str(shared))
    for name in _CHECK_SYMBOLS:
        binding.add_symbol(name, ctypes.cast(getattr(library, name), ctypes.c_void_p).value)


@contextlib.contextmanager
def _numba_cache_untouched():
    """Keep numba's disk cache out of the build. While pycc compiles, numba's JIT may compile a callee
    that links pycc's exports (their strict conversions call ``aot_check.c``, which only this process can
    resolve); saved, such a callee would abort every later JIT process that loads it. Mutates the kernels'
    dispatchers for the duration."""
    from numba.core.caching import NullCache

    dispatchers = [kernel.dispatcher for kernel in jit.KERNELS if kernel.dispatcher is not None]
    saved = [dispatcher._cache for dispatcher in dispatchers]
    for dispatcher in dispatchers:
        dispatcher._cache = NullCache()
    try:
        yield
    finally:
        for dispatcher, cache in zip(dispatchers, saved):
            dispatcher._cache = cache


@contextlib.contextmanager
def _arrays_boxed_without_unpickling():
    """numba boxes an array it returns with its Python type, which its code unpickles at every call; in a
    pycc module that is ``pickle.loads`` each time (numba's JIT keeps the unpickled object). For plain
    ndarrays the library takes numpy's type from ``aot_check.c`` instead, for the duration of a build
    (numba 0.68's ``PythonAPI.nrt_adapt_ndarray_to_python``)."""
    import numpy as np
    from llvmlite import ir
    from numba.core import cgutils, pythonapi, types

    original = pythonapi.PythonAPI.nrt_adapt_ndarray_to_python

    def adapt(self, aryty, ary, dtypeptr):
        if not getattr(self.context, "aot_mode", False) or aryty.box_type is not np.ndarray:
            return original(self, aryty, ary, dtypeptr)
        ndarray_type = self.builder.call(
            cgutils.get_or_insert_function(self.module, ir.FunctionType(self.pyobj, []), "leapgen_ndarray_type"), [])
        i32 = ir.IntType(32)
        function = self._get_function(ir.FunctionType(self.pyobj, [self.voidptr, self.pyobj, i32, i32, self.pyobj]),
                                      name="NRT_adapt_ndarray_to_python_acqref")
        pointer = cgutils.alloca_once_value(self.builder, ary)
        return self.builder.call(function, [self.builder.bitcast(pointer, self.voidptr), ndarray_type,
                                            self.context.get_constant(types.int32, aryty.ndim),
                                            self.context.get_constant(types.int32, int(aryty.mutable)), dtypeptr])

    pythonapi.PythonAPI.nrt_adapt_ndarray_to_python = adapt
    try:
        yield
    finally:
        pythonapi.PythonAPI.nrt_adapt_ndarray_to_python = original


@contextlib.contextmanager
def _strict_conversions():
    """numba's unboxing of arrays and integers, checked first by ``aot_check.c``, for the duration of a
    build (numba 0.68's ``numba.core.pythonapi._unboxers`` registry)."""
    from numba.core import boxing, pythonapi, types

    registry = pythonapi._unboxers.functions
    saved = {cls: registry[cls] for cls in (types.Array, types.Integer)}
    registry[types.Array] = _checked(_array_check, boxing.unbox_array)
    registry[types.Integer] = _checked(_integer_check, boxing.unbox_integer)
    try:
        yield
    finally:
        registry.update(saved)


@contextlib.contextmanager
def _host_cpu_features():
    """pycc passes the host CPU's name but no feature list, so LLVM assumes the model's default features;
    numba's JIT passes the features the host reports (a virtual machine may hide some of its model's).
    The same list as the JIT's for the duration of a build (numba 0.68's ``AOTCPUCodegen``)."""
    from numba.core.codegen import AOTCPUCodegen

    saved = AOTCPUCodegen._customize_tm_features
    AOTCPUCodegen._customize_tm_features = AOTCPUCodegen._get_host_cpu_features
    try:
        yield
    finally:
        AOTCPUCodegen._customize_tm_features = saved


@contextlib.contextmanager
def _wrappers_release_the_gil():
    """pycc builds its ``Flags`` with ``release_gil`` off; its wrappers then hold the GIL. Switched on
    for the duration of a build (numba 0.68's ``numba.pycc.compiler.Flags``)."""
    from numba.core.compiler import Flags
    from numba.pycc import compiler as pycc_compiler

    class NogilFlags(Flags):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.release_gil = True

    saved = pycc_compiler.Flags
    pycc_compiler.Flags = NogilFlags
    try:
        yield
    finally:
        pycc_compiler.Flags = saved


def build(verbose: bool = False) -> Path:
    """Compile the library for this checkout, replacing any of the same key.

    Must run where :data:`leapgen.automata.jit.MODE` is ``"jit"`` (``main`` re-runs itself so).

    Parameters
    ----------
    verbose : bool, default False
        Print pycc's progress.

    Returns
    -------
    pathlib.Path
        The library's folder.

    Raises
    ------
    RuntimeError
        If the kernels are not numba's JIT in this process, or numba is not installed.
    numba.core.errors.NumbaError, OSError
        If a signature does not compile, or the C toolchain fails.
    """
    if jit.MODE != "jit":
        raise RuntimeError(f"the kernel library is built from numba's JIT kernels; this process's are {jit.MODE!r} "
                           "(run with LEAPGEN_KERNELS=jit)")
    from numba.pycc import CC

    lines = aot.signature_lines()
    key = aot.build_key(lines)
    final = aot.library_dir(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        cc = CC(aot.MODULE_NAME)
        cc.output_dir = str(work)
        cc.target_cpu = "host"
        cc.verbose = verbose
        cc._mixin_sources = [*cc._mixin_sources, str(CHECKS)]  # pycc joins its own folder to relative names only
        manifest = []
        for n, line in enumerate(lines):
            kernel, args, ret = parse_signature(line)
            symbol = f"k{n}"
            cc.export(symbol, numba_type(ret)(*[numba_type(a) for a in args]))(_dispatcher(kernel).py_func)
            manifest.append([symbol, line])
        _checks_for_the_jit(cc._toolchain, work / "checks")
        with (_numba_cache_untouched(), _host_cpu_features(), _wrappers_release_the_gil(), _strict_conversions(),
              _arrays_boxed_without_unpickling()):
            cc.compile()
        (work / "manifest.json").write_text(json.dumps(manifest, indent=0), encoding="utf-8")
        if final.exists():
            shutil.rmtree(final)
        os.replace(work, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def main(argv: list[str] | None = None) -> int:
    """Command line: build the library; prints its folder and the time taken. Returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m leapgen.automata.aot_build", description=__doc__.split("\n")[0])
    parser.add_argument("--verbose", action="store_true", help="print pycc's progress")
    parser.add_argument("--force", action="store_true", help="build even where this checkout's library is built")
    options = parser.parse_args(argv)
    built = aot.library_dir(aot.build_key(aot.signature_lines()) or "none")
    if not options.force and (built / "manifest.json").exists():
        print(f"kernel library: already built for this checkout in {built} (--force builds it again)")
        return 0
    if jit.MODE != "jit":  # the kernels of this process are already the library's: build from a JIT process
        env = dict(os.environ, LEAPGEN_KERNELS="jit")
        return subprocess.call([sys.executable, "-m", "leapgen.automata.aot_build", *(argv or sys.argv[1:])], env=env)
    start = time.monotonic()
    folder = build(verbose=options.verbose)
    print(f"kernel library: {len(aot.signature_lines())} signatures compiled into {folder} "
          f"in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
