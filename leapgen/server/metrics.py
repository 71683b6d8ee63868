"""``/metrics`` series of the limits and the grammar caches (Prometheus text
format), beside the engine counters :func:`leapgen.server.app.render_metrics`
writes.

- ``leapgen_grammar_compile_seconds``: histogram of grammar compile wall times
  (queueing included; a cache hit counts too);
- ``leapgen_grammar_cache_bytes{process, where}``: the compiled-grammar
  caches' bytes, in memory (the engine's and the compile worker's) and on disk;
- ``leapgen_http_refusals_total{code}``: requests refused with 401, 413, 429;
- ``leapgen_queued_requests``: requests waiting to run (``--max-queued-requests``
  bounds it).
"""

from __future__ import annotations

from typing import Any


def render_limit_metrics(snapshot: dict, refusals: dict[int, int] | None) -> list[str]:
    """The lines of the series above.

    Parameters
    ----------
    snapshot : dict
        :meth:`AsyncLLM.describe`'s snapshot.
    refusals : dict of int to int or None
        :meth:`Refusals.snapshot`; None: none counted (all 0).

    Returns
    -------
    list of str
    """
    lines = _histogram("grammar_compile_seconds", snapshot["stats"].compile_seconds)
    sizes = snapshot.get("grammar_cache_bytes") or {}
    lines += ["# TYPE leapgen_grammar_cache_bytes gauge",
              f'leapgen_grammar_cache_bytes{{process="engine",where="memory"}} {sizes.get("memory", 0)}',
              f'leapgen_grammar_cache_bytes{{process="compile_worker",where="memory"}} '
              f'{sizes.get("worker_memory", 0)}',
              f'leapgen_grammar_cache_bytes{{where="disk"}} {sizes.get("disk", 0)}']
    lines.append("# TYPE leapgen_http_refusals_total counter")
    for code, count in sorted((refusals or {401: 0, 413: 0, 429: 0}).items()):
        lines.append(f'leapgen_http_refusals_total{{code="{code}"}} {count}')
    lines += ["# TYPE leapgen_queued_requests gauge", f"leapgen_queued_requests {snapshot.get('queued', 0)}"]
    return lines


def _histogram(name: str, hist: Any) -> list[str]:
    """A Prometheus histogram from :class:`~leapgen.engine.stats.Histogram` (cumulative buckets)."""
    lines = [f"# TYPE leapgen_{name} histogram"]
    running = 0
    for bound, count in zip(hist.bounds, hist.counts):
        running += count
        lines.append(f'leapgen_{name}_bucket{{le="{bound:g}"}} {running}')
    running += hist.counts[-1]
    lines += [f'leapgen_{name}_bucket{{le="+Inf"}} {running}', f"leapgen_{name}_sum {round(hist.total, 6)}",
              f"leapgen_{name}_count {running}"]
    return lines
