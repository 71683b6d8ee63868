"""The backend registry: names -> lazily imported adapters.

An adapter module (and the engine it wraps) is imported only when its
backend is asked for, so ``import leapgen`` never needs a peer engine.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import MappingProxyType
from typing import Any

from leapgen.backends.base import GrammarBackend
from leapgen.vocab import TokenizerInfo

# name -> (adapter module, class, module the adapter needs)
_ADAPTERS = MappingProxyType({
    "leapgen": ("leapgen.backends.leapgen", "LeapgenBackend", None),
    "xgrammar": ("leapgen.backends.xgrammar", "XgrammarBackend", "xgrammar"),
    "llguidance": ("leapgen.backends.llguidance", "LlguidanceBackend", "llguidance"),
    "outlines-core": ("leapgen.backends.outlines_core", "OutlinesCoreBackend", "outlines_core"),
})


def known_backends() -> list[str]:
    """Every registered backend name, installed or not."""
    return list(_ADAPTERS)


def _installed(module: str | None) -> bool:
    """Whether ``module`` can be found, without importing it."""
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # an import hook refusing it, a broken install
        return False


def available_backends() -> list[str]:
    """The backends whose engine is installed (found without importing it)."""
    return [name for name, (_, _, needs) in _ADAPTERS.items() if _installed(needs)]


def get_backend(name: str, tokenizer_info: TokenizerInfo, **kwargs: Any) -> GrammarBackend:
    """Build the backend ``name`` for a vocabulary.

    Parameters
    ----------
    name : str
        One of :func:`known_backends`: ``"leapgen"``, ``"xgrammar"``,
        ``"llguidance"``, ``"outlines-core"``.
    tokenizer_info : TokenizerInfo
    **kwargs
        Passed to the adapter; the peers need ``hf_tokenizer=`` (a
        ``transformers`` fast tokenizer), except outlines-core.

    Returns
    -------
    GrammarBackend

    Raises
    ------
    ValueError
        Unknown name.
    ImportError
        The engine is not installed (with the pip command that installs it).
    """
    try:
        module, cls, needs = _ADAPTERS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; known: {', '.join(_ADAPTERS)}") from None
    if not _installed(needs):
        raise ImportError(f"backend {name!r} needs the {needs!r} package: pip install 'leapgen[peers]'")
    return getattr(importlib.import_module(module), cls)(tokenizer_info, **kwargs)
