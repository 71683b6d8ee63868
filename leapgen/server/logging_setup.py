"""The server's logs: levels, and the startup line.

One responsibility: what ``leapgen serve`` writes to its log before and
beside the requests' own lines (those are :class:`~leapgen.engine.AsyncLLM`'s:
one per finished request unless ``--disable-log-requests``, one per failed
request with its reason always; refusals are :mod:`leapgen.server.limits`').
"""

from __future__ import annotations

import logging
from typing import Any

from leapgen.engine import grammar_log

#: ``--log-level`` choices (uvicorn's names).
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def configure_logging(level: str = "info", grammar_level: str | None = None) -> None:
    """Set up the process's log (mutates the root logger and leapgen's).

    Parameters
    ----------
    level : str, default "info"
        Of :data:`LOG_LEVELS`: leapgen's and the root logger's level.
    grammar_level : str or None
        Level of the grammar debug log (:mod:`leapgen.engine.grammar_log`);
        None: ``$LEAPGEN_GRAMMAR_LOG_LEVEL``, else leapgen's level.

    Raises
    ------
    ValueError
        An unknown level.
    """
    if level.lower() not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}; got {level!r}")
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("leapgen").setLevel(level.upper())
    grammar_log.configure(grammar_level)


def startup_line(llm: Any, *, host: str, port: int, model_name: str, limits: Any, max_queued: int | None) -> str:
    """One line with what the server runs with: model, dtype, backend, threads and limits."""
    runner = llm.model_runner
    grammar = llm.grammar
    prefill = runner.prefill_dtype or runner.dtype

    def mib(n: int | None) -> str:
        return "unbounded" if n is None else f"{n / 2**20:g} MiB"

    return (f"leapgen serve on http://{host}:{port}: model {model_name!r} ({llm.loaded.path}), "
            f"dtype {str(runner.dtype).removeprefix('torch.')} (prefill {str(prefill).removeprefix('torch.')}), "
            f"grammar backend {grammar.backend_name}, threads {llm.num_threads}, "
            f"max-running {llm.scheduler.max_running}, kv-token-budget {llm.scheduler.kv_token_budget}, "
            f"max-model-len {llm.max_model_len}, max-queued-requests {max_queued if max_queued is not None else 'unbounded'}, "
            f"max-request-bytes {limits.max_request_bytes}, grammar cache {mib(grammar.cache_bytes)} per process, "
            f"max grammar {mib(grammar.max_grammar_bytes)}, disk cache {mib(grammar.disk_cache_bytes)} in "
            f"{grammar.cache_dir or 'a temporary folder'}, api key {'required' if limits.api_key else 'off'}")
