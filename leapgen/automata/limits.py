"""Compile limits: cooperative time limits and state counts.

:func:`time_limit` sets a deadline for the code it wraps (per thread or
task: a :class:`contextvars.ContextVar`, so concurrent compiles have their
own); the automaton loops (subset construction, products, minimization)
call :func:`check_deadline` and raise
:class:`~leapgen.errors.CompileLimitError` once it has passed. Outside a
:func:`time_limit` block the check costs one ``ContextVar.get``.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from leapgen.errors import CompileLimitError

# (deadline on time.monotonic(), the limit in seconds) or None: no limit.
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("leapgen_compile_deadline", default=None)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Run the block under a compile time limit (None: no limit).

    Nested limits keep the earlier deadline.

    Raises
    ------
    ValueError
        ``seconds`` is not positive.
    """
    if seconds is None:
        yield
        return
    if not seconds > 0:
        raise ValueError(f"a time limit must be positive, got {seconds!r}")
    outer = _DEADLINE.get()
    deadline = (time.monotonic() + seconds, seconds)
    token = _DEADLINE.set(deadline if outer is None or deadline[0] < outer[0] else outer)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def current_deadline() -> float | None:
    """The current deadline on :func:`time.monotonic`, or None (no limit); for
    kernels that read the clock themselves."""
    limit = _DEADLINE.get()
    return None if limit is None else limit[0]


def deadline_error(stage: str) -> CompileLimitError:
    """The error for a passed time limit (a kernel saw it pass); call inside a
    :func:`time_limit` block.

    Parameters
    ----------
    stage : str
        What was running, for the message (``"subset construction"``...).
    """
    limit = _DEADLINE.get()
    seconds = "" if limit is None else f"{limit[1]:g} s "
    return CompileLimitError(f"compiling took longer than the {seconds}limit (stopped during {stage}); "
                             "simplify the grammar or raise GrammarCompiler(max_compile_seconds=...)")


def check_deadline(stage: str) -> None:
    """Raise CompileLimitError if the current time limit has passed.

    Parameters
    ----------
    stage : str
        What was running, for the message (``"subset construction"``...).
    """
    limit = _DEADLINE.get()
    if limit is not None and time.monotonic() > limit[0]:
        raise deadline_error(stage)


def too_many_states(max_states: int, kind: str = "DFA") -> CompileLimitError:
    """The error of an automaton that outgrew ``max_states`` states."""
    return CompileLimitError(f"grammar needs more than {max_states} {kind} states")


def intern_state(ids: dict, keys: list, key, max_states: int) -> int:
    """The state number of ``key``: ``ids[key]``, or the next number when
    ``key`` is new (appended to ``keys`` and ``ids``; both mutated).

    Raises
    ------
    CompileLimitError
        A new state past ``max_states``.
    """
    j = ids.get(key)
    if j is None:
        if len(keys) >= max_states:
            raise too_many_states(max_states)
        j = ids[key] = len(keys)
        keys.append(key)
    return j
