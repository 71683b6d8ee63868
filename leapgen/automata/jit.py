"""The kernels' compiler: kernels compiled ahead of time, numba's ``njit``, or the plain function.

Every kernel of :mod:`leapgen.automata` and :mod:`leapgen.compiler` is defined through :func:`njit` or
:func:`njit_inline`. :data:`MODE` says what they are in this process:

- ``"aot"``: the library that ``python -m leapgen.automata.aot_build`` compiled for these very
  kernel sources (``scripts/install.sh`` builds it) is loaded. numba is not imported: each kernel is a
  small Python function that checks its arguments' types and calls the library's compiled code
  (:mod:`leapgen.automata.aot`). Arguments of types the library was not built for switch the
  process to numba's JIT (:func:`switch_to_jit`, a warning), with the same results.
- ``"jit"``: numba's ``njit`` (cached on disk, GIL released), as before the library existed.
- ``"python"``: numba is not installed; kernels run as Python, slower, with the same results
  (:mod:`leapgen.compiler.token_index` then walks the vocabulary with numpy instead).

``LEAPGEN_KERNELS`` chooses: ``auto`` (default: the library where it is built for this checkout, else
numba's JIT), ``jit`` (never the library; its builder runs so), ``aot`` (the library or an error).
``LEAPGEN_RECORD_KERNEL_SIGNATURES=<file>`` makes a JIT-mode process append, at exit, every
signature numba compiled (``scripts/record_kernel_signatures.py`` turns such files into
``kernel_signatures.txt``, the library's list).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
import threading
from dataclasses import dataclass
from typing import Callable

logger = logging.getLogger("leapgen.kernels")


@dataclass
class _Kernel:
    """One kernel: its Python source function and what calls it now."""

    py_func: Callable
    inline: bool
    factory: str | None = None
    """The module that defines its numba dispatcher under its name (default: ``numba.njit`` of ``py_func``)."""
    bound: object = None
    """What its module holds under its name (the library's wrapper, the dispatcher or ``py_func``)."""
    dispatcher: object = None
    """numba's dispatcher, once the process uses numba's JIT."""

    @property
    def key(self) -> str:
        return f"{self.py_func.__module__}:{self.py_func.__qualname__}"


KERNELS: list[_Kernel] = []
"""Every kernel defined in this process, in definition order."""
_switch_lock = threading.Lock()


def _choose_mode():
    choice = os.environ.get("LEAPGEN_KERNELS", "auto")
    if choice not in ("auto", "aot", "jit"):
        raise ValueError(f"LEAPGEN_KERNELS={choice!r}: expected 'auto', 'aot' or 'jit'")
    if choice != "jit":
        from leapgen.automata import aot

        library = aot.load_library()
        if library is not None:
            return "aot", library
        if choice == "aot":
            raise RuntimeError(f"LEAPGEN_KERNELS=aot, but no kernel library is built for this checkout under "
                               f"{aot.library_root()} (build it: python -m leapgen.automata.aot_build)")
    if importlib.util.find_spec("numba") is None:  # pragma: no cover - exercised where numba is missing
        return "python", None
    return "jit", None


MODE, LIBRARY = _choose_mode()
"""``"aot"``, ``"jit"`` or ``"python"`` (above); the loaded :class:`leapgen.automata.aot.Library` in
``"aot"`` mode."""
HAVE_NUMBA = MODE != "python"
"""Whether the kernels are compiled (ahead of time, or by numba)."""


def _numba_dispatcher(kernel: _Kernel):
    import numba

    if kernel.factory is not None:
        return getattr(importlib.import_module(kernel.factory), kernel.py_func.__name__)
    options = {"inline": "always"} if kernel.inline else {}
    return numba.njit(cache=True, nogil=True, **options)(kernel.py_func)


def _define(py_func: Callable, inline: bool, factory: str | None = None):
    kernel = _Kernel(py_func, inline, factory)
    if MODE == "jit":
        kernel.dispatcher = kernel.bound = _numba_dispatcher(kernel)
    elif MODE == "aot":
        if inline:
            kernel.bound = py_func  # inlined into the library's kernels; only Python calls reach it
        else:
            from leapgen.automata import aot

            kernel.bound = aot.wrapper(py_func, LIBRARY.exports.get(kernel.key, ()),
                                       lambda *args, **kwargs: _jit_call(kernel, args, kwargs))
    else:
        kernel.bound = py_func
    KERNELS.append(kernel)
    return kernel.bound


def njit(py_func: Callable):
    """Define a kernel (see the module's text for what it is in each :data:`MODE`); returns what the
    module should bind to its name."""
    return _define(py_func, inline=False)


def njit_inline(py_func: Callable):
    """Define a small helper called in a kernel's inner loop: inlined in numba's IR (``inline='always'``),
    no call per use; in the library, inlined into the kernels that call it."""
    return _define(py_func, inline=True)


def kernel_from_factory(py_func: Callable, factory: str):
    """Define a kernel whose numba dispatcher the module ``factory`` defines under ``py_func``'s name (one
    numba's ``njit`` of ``py_func`` cannot be, e.g. one calling an intrinsic; imported only where numba's
    JIT is used, so a module above it may hold it); ``py_func`` is what ``"python"`` mode calls."""
    return _define(py_func, inline=False, factory=factory)


def switch_to_jit(reason: str) -> None:
    """Make every kernel of this process numba's JIT dispatcher (once; later calls do nothing).

    Each kernel's module is rebound to its dispatcher, so the kernels numba compiles from then on call
    dispatchers. The library's wrappers held elsewhere keep calling the library for the argument
    types it was built for, and the dispatcher for others. Mutates module globals; thread-safe.

    Parameters
    ----------
    reason : str
        Logged once, as a warning.
    """
    global MODE
    with _switch_lock:
        if MODE != "aot":
            return
        logger.warning("leapgen's kernels switch to numba's JIT for this process: %s. Results are the same; "
                       "this process pays numba's import and compiles. Add the signature to "
                       "leapgen/automata/kernel_signatures.txt (scripts/record_kernel_signatures.py) and "
                       "rebuild the library.", reason)
        for kernel in KERNELS:
            kernel.dispatcher = _numba_dispatcher(kernel)
        bound = {id(kernel.bound): kernel for kernel in KERNELS}
        for module_name in {kernel.py_func.__module__ for kernel in KERNELS}:
            module = sys.modules.get(module_name)
            for name, value in list(vars(module).items()) if module is not None else ():
                kernel = bound.get(id(value))
                if kernel is not None and kernel.bound is value:
                    setattr(module, name, kernel.dispatcher)
        MODE = "jit"


def _jit_call(kernel: _Kernel, args: tuple, kwargs: dict):
    if kernel.dispatcher is None:
        types = ", ".join(type(a).__name__ if not hasattr(a, "dtype") else f"{a.dtype}[{getattr(a, 'ndim', 0)}d]"
                          for a in args)
        switch_to_jit(f"{kernel.key} was called with ({types}), which the kernel library was not built for")
    return kernel.dispatcher(*args, **kwargs)


def recorded_signatures() -> list[str]:
    """Every signature numba compiled in this process, a line of ``kernel_signatures.txt`` each (JIT mode;
    inline helpers left out: the library inlines them). Reads only."""
    from leapgen.automata.kernel_types import format_type

    lines = []
    for kernel in KERNELS:
        if kernel.inline or kernel.dispatcher is None:
            continue
        for sig in kernel.dispatcher.signatures:
            try:
                args = ", ".join(format_type(t) for t in sig)
                ret = format_type(kernel.dispatcher.overloads[sig].signature.return_type)
            except TypeError as exc:
                logger.warning("%s: a signature the kernel library cannot hold: %s", kernel.key, exc)
                continue
            lines.append(f"{kernel.key}({args}) -> {ret}")
    return lines


def _record_at_exit(path: str) -> None:
    import fcntl

    lines = recorded_signatures()
    if lines:
        with open(path, "a", encoding="utf-8") as out:
            fcntl.flock(out, fcntl.LOCK_EX)
            out.write("".join(line + "\n" for line in lines))


if MODE == "jit" and os.environ.get("LEAPGEN_RECORD_KERNEL_SIGNATURES"):
    # multiprocessing's exit finalizers run at the interpreter's exit and in forked workers, which leave
    # through os._exit (no atexit hooks)
    from multiprocessing import util as _mp_util

    _mp_util.Finalize(None, _record_at_exit, args=(os.environ["LEAPGEN_RECORD_KERNEL_SIGNATURES"],), exitpriority=0)
