"""The kernel library compiled ahead of time: its key, where it lives, loading it, each kernel's wrapper.

One responsibility. ``python -m leapgen.automata.aot_build`` compiles every signature listed in
``kernel_signatures.txt`` into one extension module (numba's ``pycc``) under :func:`library_root`, in a
folder named by :func:`build_key`. A new process that finds the folder of its own key imports the
module (~1 ms) instead of numba (~0.2 s) and numba's set-up and cached kernels (~0.5 s of CPU): the
cold start of ``benchmarks/bench_cold_start.py``.

The key hashes what the compiled code depends on: the sources of every kernel module (a module of
:mod:`leapgen.automata` or :mod:`leapgen.compiler` that defines kernels), the signature list, this
module, the builder and its C checks, numba's and numpy's versions, Python's, and the CPU's features (the library is
compiled for the host CPU, as numba's JIT is). Any change to them leaves the library unused until it is
built again; the kernels are then numba's JIT, as before.

The library's functions take exactly the argument types numba's dispatcher would type as their
signature and raise TypeError for others (:mod:`leapgen.automata.aot_build` makes pycc's conversions
strict); each kernel's name is bound to a thin wrapper (:func:`wrapper`) that tries the kernel's
signatures and, where none takes the arguments, calls numba's JIT
(:func:`leapgen.automata.jit.switch_to_jit`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

logger = logging.getLogger("leapgen.kernels")

FORMAT = 1
"""The library's layout version (part of the key)."""
MODULE_NAME = "leapgen_kernels"
"""The extension module's name."""
SIGNATURES = Path(__file__).with_name("kernel_signatures.txt")
"""The signatures the library is built for: one ``module:qualname(args) -> return`` line each."""
_PACKAGE = Path(__file__).resolve().parents[1]
_KERNEL_DIRS = ("automata", "compiler")


def library_root() -> Path:
    """``$LEAPGEN_CACHE/kernels`` if ``LEAPGEN_CACHE`` is set, else ``~/.cache/leapgen/kernels`` (not created)."""
    root = os.environ.get("LEAPGEN_CACHE")
    return (Path(root).expanduser() if root else Path("~/.cache/leapgen").expanduser()) / "kernels"


def signature_lines(path: Path = SIGNATURES) -> list[str]:
    """The signature list's lines, without blank lines and ``#`` comments. Raises OSError if unreadable."""
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def kernel_sources() -> list[Path]:
    """The source files of leapgen's kernel modules (those of :mod:`leapgen.automata` and
    :mod:`leapgen.compiler` that define kernels), sorted; the builder's and this module's included."""
    out = []
    for folder in _KERNEL_DIRS:
        for path in sorted((_PACKAGE / folder).glob("*.py")):
            if "njit" in path.read_text(encoding="utf-8") or path.name in ("aot.py", "aot_build.py"):
                out.append(path)
    out.append(_PACKAGE / "automata" / "aot_check.c")
    return out


def _cpu_features() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    return platform.processor()


def build_key(lines: list[str]) -> str | None:
    """The library's key for these signature lines and this checkout, interpreter and machine (hex sha256);
    None if numba is not installed (nothing could have built it). Reads files only."""
    spec = importlib.util.find_spec("numba")
    if spec is None or spec.origin is None:
        return None
    digest = hashlib.sha256()
    numba_version = Path(spec.origin).with_name("_version.py")
    for part in (f"format {FORMAT}", sys.version, platform.machine(), np.__version__, _cpu_features(),
                 numba_version.read_text(encoding="utf-8") if numba_version.exists() else spec.origin,
                 "\n".join(lines)):
        digest.update(part.encode() + b"\0")
    for path in kernel_sources():
        digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def library_dir(key: str) -> Path:
    """The folder of the library of ``key`` (not created)."""
    return library_root() / key[:24]


@dataclass
class Library:
    """A loaded kernel library."""

    path: Path
    exports: dict[str, list[Callable]]
    """Per kernel (``"module:qualname"``): its compiled functions, one per signature."""


def load_library() -> Library | None:
    """Import the library built for this checkout, if there is one.

    Returns
    -------
    Library or None
        None where none is built for :func:`build_key`'s key, or where it fails to load (logged).
    """
    try:
        lines = signature_lines()
    except OSError:
        return None
    key = build_key(lines)
    if key is None:
        return None
    folder = library_dir(key)
    path = folder / (MODULE_NAME + importlib.machinery.EXTENSION_SUFFIXES[0])
    manifest = folder / "manifest.json"
    if not (path.exists() and manifest.exists()):
        logger.info("no kernel library is built for this checkout (%s); the kernels are numba's JIT", folder)
        return None
    try:
        symbols = json.loads(manifest.read_text(encoding="utf-8"))
        loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
        spec = importlib.util.spec_from_file_location(MODULE_NAME, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        exports: dict[str, list] = {}
        for symbol, line in symbols:
            exports.setdefault(line[:line.index("(")], []).append(getattr(module, symbol))
    except Exception:  # noqa: BLE001 - a broken library costs numba's JIT, never the process
        logger.warning("the kernel library %s failed to load; the kernels are numba's JIT", path, exc_info=True)
        return None
    return Library(path, exports)


def wrapper(py_func: Callable, compiled: list[Callable], miss: Callable) -> Callable:
    """The Python function a kernel's name is bound to in ``"aot"`` mode.

    It takes the kernel's parameters (names and defaults) and calls the first of ``compiled`` that takes
    the arguments; the library's functions raise TypeError for arguments of other types than theirs (their
    conversions are strict: :mod:`leapgen.automata.aot_build`), and leapgen's kernels raise no TypeError
    themselves. Where none takes them, ``miss`` is called with the same arguments. A match costs one Python
    call and a ``try`` more than the compiled function.

    Parameters
    ----------
    py_func : callable
        The kernel's Python function (its parameters; ``__wrapped__`` of the result).
    compiled : list of callable
        The library's functions for this kernel, one per signature, in the order they are tried.
    miss : callable
        Called with the arguments where none takes them (or, for a kernel with ``*args`` or keyword-only
        parameters, always).

    Returns
    -------
    callable
    """
    code = py_func.__code__
    names: dict = {"_miss": miss, "_others": tuple(compiled[1:]), "_retry": _retry}
    if not compiled or code.co_flags & (0x04 | 0x08) or code.co_kwonlyargcount:  # *args, **kwargs, keyword-only
        source = f"def {py_func.__name__}(*args, **kwargs):\n    return _miss(*args, **kwargs)\n"
    else:
        params = list(code.co_varnames[:code.co_argcount])
        signature = list(params)
        defaults = py_func.__defaults__ or ()
        for i, default in enumerate(defaults):
            slot = len(params) - len(defaults) + i
            names[f"_default_{i}"] = default
            signature[slot] = f"{params[slot]}=_default_{i}"
        names["_compiled"] = compiled[0]
        call = ", ".join(params)
        as_tuple = call + ("," if len(params) == 1 else "")
        source = (f"def {py_func.__name__}({', '.join(signature)}):\n"
                  f"    try:\n        return _compiled({call})\n"
                  f"    except TypeError:\n        return _retry(_others, _miss, ({as_tuple}))\n")
    exec(compile(source, f"<leapgen kernel {py_func.__module__}:{py_func.__qualname__}>", "exec"), names)
    out = functools.wraps(py_func)(names[py_func.__name__])
    out.py_func = py_func
    return out


def _retry(others: tuple, miss: Callable, args: tuple):
    for function in others:
        try:
            return function(*args)
        except TypeError:
            continue
    return miss(*args)
