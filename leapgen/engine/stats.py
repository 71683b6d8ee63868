"""Engine counters: :class:`EngineStats` (what ``/metrics`` exports)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


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
    mask_steps: int = 0
    mask_fill_ms: float = 0.0
    mask_wait_ms: float = 0.0
    prefill_tokens: int = 0
    prefix_cache_hits: int = 0
    prefix_cache_hit_tokens: int = 0
