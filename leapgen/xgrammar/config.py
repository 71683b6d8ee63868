"""xgrammar's process-wide settings: the recursion depth bound and the
serialization version."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

from leapgen.xgrammar.serialization import SERIALIZATION_VERSION

_DEFAULT_DEPTH = 10_000
_MAX_DEPTH = 1_000_000
_lock = threading.Lock()
_depth: int | None = None


def _env_depth() -> int:
    raw = os.environ.get("XGRAMMAR_MAX_RECURSION_DEPTH")
    try:
        value = int(raw) if raw is not None else _DEFAULT_DEPTH
    except ValueError:
        return _DEFAULT_DEPTH
    return value if 0 < value <= _MAX_DEPTH else _DEFAULT_DEPTH


def get_max_recursion_depth() -> int:
    """The deepest nesting a matcher follows (set by :func:`set_max_recursion_depth`,
    else ``XGRAMMAR_MAX_RECURSION_DEPTH`` when a valid int <= 1,000,000, else 10,000).

    It is the ``max_stack_depth`` of every :class:`~leapgen.xgrammar.GrammarCompiler`
    created afterwards (grammars compiled before keep theirs).
    """
    with _lock:
        return _env_depth() if _depth is None else _depth


def set_max_recursion_depth(max_recursion_depth: int) -> None:
    """Set :func:`get_max_recursion_depth` for the process (thread-safe).

    Raises
    ------
    RuntimeError
        Not an int in [1, 1,000,000] (xgrammar's class and bound).
    """
    global _depth
    if (isinstance(max_recursion_depth, bool) or not isinstance(max_recursion_depth, int)
            or not 0 < max_recursion_depth <= _MAX_DEPTH):
        raise RuntimeError(f"max_recursion_depth must be an int in [1, {_MAX_DEPTH:,}], got {max_recursion_depth!r}")
    with _lock:
        _depth = max_recursion_depth


@contextmanager
def max_recursion_depth(temp_depth: int):
    """Set the recursion depth bound inside a ``with`` block, then restore it."""
    prev = get_max_recursion_depth()
    set_max_recursion_depth(temp_depth)
    try:
        yield
    finally:
        set_max_recursion_depth(prev)


def get_serialization_version() -> str:
    """The version every ``serialize_json`` writes and ``deserialize_json`` requires."""
    return SERIALIZATION_VERSION
