"""The grammar debug log: one line per grammar compile, per jump-forward and
per bitmask fill (mask-cache hit or miss), as SGLang's
``SGLANG_GRAMMAR_LOG_LEVEL=debug`` shows them.

One responsibility: the ``leapgen.grammar_log`` logger and its level. The
level comes from ``LEAPGEN_GRAMMAR_LOG_LEVEL`` (``debug``, ``info``,
``warning``...; unset: the logger inherits ``leapgen``'s level, so nothing
shows at the server's default ``info``) or from ``leapgen serve
--grammar-log-level``. The engine asks :func:`debug_enabled` once per step, so
an unset debug level costs one level check a step.

Lines (all at DEBUG)::

    grammar compile: request 3: regex (28 chars): 1843.2 ms, new, 65536 states, 67.1 MiB
    Jump forward: request 3: 5 tokens skipped ('"name": "')
    mask cache miss: request 3 (0.84 ms)
    mask cache hit: request 3
"""

from __future__ import annotations

import logging
import os
import sys

#: The logger of the grammar debug lines.
logger = logging.getLogger("leapgen.grammar_log")
#: The environment variable that sets its level.
ENV_VAR = "LEAPGEN_GRAMMAR_LOG_LEVEL"
LEVELS = ("debug", "info", "warning", "error", "critical")


def configure(level: str | None = None) -> None:
    """Set the grammar log's level (mutates the ``leapgen.grammar_log`` logger).

    Parameters
    ----------
    level : str or None, default None
        One of :data:`LEVELS` (any case); None: ``$LEAPGEN_GRAMMAR_LOG_LEVEL``,
        and when that is unset too the logger is left as it is. When no
        logging is configured in the process (a library user), a stderr
        handler is added so the lines show.

    Raises
    ------
    ValueError
        If the level (given or from the environment) is not one of
        :data:`LEVELS`, naming where it came from.
    """
    source = "level"
    if level is None:
        level, source = os.environ.get(ENV_VAR), ENV_VAR
        if not level:
            return
    if level.lower() not in LEVELS:
        raise ValueError(f"{source} must be one of {', '.join(LEVELS)}; got {level!r}")
    logger.setLevel(level.upper())
    if not logging.getLogger().handlers and not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        logger.addHandler(handler)


def debug_enabled() -> bool:
    """Whether the grammar debug lines are on."""
    return logger.isEnabledFor(logging.DEBUG)


def describe_grammar(params) -> str:
    """A short name of a request's grammar for the log: its kind and source length."""
    for name in ("regex", "ebnf", "lark", "json_schema", "structural_tag"):
        value = getattr(params, name, None)
        if value is not None:
            size = len(value) if isinstance(value, str) else len(repr(value))
            return f"{name} ({size} chars)"
    choice = getattr(params, "choice", None)
    if choice is not None:
        return f"choice ({len(choice)} strings)"
    return "json_object" if getattr(params, "json_object", False) else "none"
