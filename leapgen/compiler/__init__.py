"""Grammar compilation: grammar source -> CompiledGrammar for one vocabulary.

The names below are imported on first use (PEP 562), not with the package: a
submodule such as :mod:`leapgen.compiler.warm_up` is then imported without
numba and the compiler's kernels (~0.5 s in a new process), which a process
that never compiles a grammar does not pay.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {"CompiledGrammar": "compiled", "RegularGrammar": "compiled", "ContextFreeGrammar": "compiled_cfg",
          "GrammarCompiler": "compiler", "canonical_schema": "compiler", "TokenIndex": "token_index"}

__all__ = ["CompiledGrammar", "ContextFreeGrammar", "RegularGrammar", "GrammarCompiler", "TokenIndex", "canonical_schema"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
