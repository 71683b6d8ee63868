"""Backends: leapgen and the peer engines (xgrammar, llguidance,
outlines-core) behind one interface, :class:`GrammarBackend` ->
:class:`GrammarState`. Adapters import their engine only when asked for."""

from leapgen.backends.base import GrammarBackend, GrammarState
from leapgen.backends.registry import available_backends, get_backend, known_backends

__all__ = ["GrammarBackend", "GrammarState", "available_backends", "get_backend", "known_backends"]
