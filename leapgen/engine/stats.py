"""Engine counters: :class:`EngineStats` (what ``/metrics`` exports)."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field

#: Upper bounds (seconds) of the compile-time histogram's buckets (Prometheus ``le``), then +Inf.
COMPILE_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(slots=True)
class Histogram:
    """Counts of observations per bucket (not cumulative; Prometheus' cumulative
    ``_bucket`` series are sums of these), their count and sum.

    Attributes
    ----------
    bounds : tuple of float
        Upper bounds, ascending; one more bucket past the last (+Inf).
    counts : list of int
        ``len(bounds) + 1`` counts.
    total : float
        Sum of the observations.
    """

    bounds: tuple = COMPILE_SECONDS_BUCKETS
    counts: list = field(default_factory=lambda: [0] * (len(COMPILE_SECONDS_BUCKETS) + 1))
    total: float = 0.0

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose bound is >= it (mutates)."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)


@dataclass(slots=True)
class EngineStats:
    """Monotonic counters of one engine (mutated by the engine loop only).

    Attributes
    ----------
    requests_finished : collections.Counter
        Finished requests by finish reason.
    prompt_tokens, completion_tokens, jump_forward_tokens : int
        Totals over finished requests (see :class:`RequestOutput`).
    steps, forward_passes, batched_sequences : int
        Engine steps, model forward passes, and sequences in them (mean batch
        size = ``batched_sequences / forward_passes``).
    compiles, compile_ms : int, float
        Grammar compiles waited for and their summed wall time (ms).
    compile_seconds : Histogram
        The same compiles' wall times, seconds (queueing included; a cache
        hit is one too).
    mask_steps, mask_fill_ms, mask_wait_ms : int, float, float
        Steps that filled bitmasks; the fill time on the mask worker (ms,
        summed) and the part of it the engine waited for after its forward
        pass (the critical path, ms, summed).
    prefill_tokens : int
        Prompt tokens fed to the model (prompt KV reused from the prefix
        cache excluded).
    prefix_cache_hits, prefix_cache_hit_tokens : int
        Requests that reused a cached prompt prefix, and the prompt tokens
        whose KV they copied instead of prefilling.
    """

    requests_finished: Counter = field(default_factory=Counter)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    jump_forward_tokens: int = 0
    steps: int = 0
    forward_passes: int = 0
    batched_sequences: int = 0
    compiles: int = 0
    compile_ms: float = 0.0
    compile_seconds: Histogram = field(default_factory=Histogram)
    mask_steps: int = 0
    mask_fill_ms: float = 0.0
    mask_wait_ms: float = 0.0
    prefill_tokens: int = 0
    prefix_cache_hits: int = 0
    prefix_cache_hit_tokens: int = 0
