"""A batch's per-step bitmask work: fill each constrained request's row.

One responsibility: the token bitmask rows of the requests that sample this
step, from their matchers (:class:`~leapgen.matcher.GrammarMatcher` or a
peer's :class:`~leapgen.backends.GrammarState`, not mutated). The
:class:`~leapgen.engine.grammar_manager.GrammarManager` runs
:func:`fill_rows` on its mask thread while the model runs its forward pass
(torch and numpy release the GIL for most of their work); with the grammar
debug log on, each row logs a mask-cache hit or miss.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

from leapgen.bitmask import allocate_token_bitmask
from leapgen.engine import grammar_log


def fill_rows(matchers: Sequence[Any], bitmask: Any, timing: dict | None, request_ids: Sequence[int] | None,
              debug: bool) -> tuple[list[bool], float]:
    """Fill row ``i`` of ``bitmask`` from ``matchers[i]``.

    Parameters
    ----------
    matchers : sequence of GrammarMatcher
    bitmask : torch.Tensor
        int32, shape ``(>= len(matchers), ceil(vocab_size / 32))``; mutated.
    timing : dict or None
        When given, set ``"start"`` and ``"end"``: the fill's
        ``time.perf_counter()`` bounds (for step traces).
    request_ids : sequence of int or None
        Named in the grammar debug log's mask-cache lines (one per row; None: the row numbers).
    debug : bool
        Write the grammar debug log's line of each row.

    Returns
    -------
    need_apply : list of bool
        Per row: whether the mask excludes a token (False: nothing to apply).
    fill_ms : float
        The fill's wall time, milliseconds.
    """
    start = time.perf_counter()
    if timing is not None:
        timing["start"] = start
    if debug:
        need = [_logged_fill(m, bitmask, i, request_ids[i] if request_ids else i) for i, m in enumerate(matchers)]
    else:
        need = [m.fill_next_token_bitmask(bitmask, i) for i, m in enumerate(matchers)]
    end = time.perf_counter()
    if timing is not None:
        timing["end"] = end
    return need, (end - start) * 1000.0


def allows_non_stop(matcher: Any, stop_token_ids: Iterable[int], vocab_size: int) -> bool:
    """Whether ``matcher`` (not mutated) allows a token of the ``vocab_size`` logits that is not one of
    ``stop_token_ids`` (False: the grammar is complete and only ends)."""
    bitmask = allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(bitmask, 0)
    words = bitmask[0].numpy().view("uint32").copy()  # (ceil(V/32),)
    for tid in stop_token_ids:
        w, b = divmod(tid, 32)
        if w < words.size:
            words[w] &= ~(1 << b) & 0xFFFFFFFF
    return bool(words.any())


def _logged_fill(matcher: Any, bitmask: Any, row: int, request_id: int) -> bool:
    """One row's fill with its grammar debug line: a mask-cache hit or a miss (and its time)."""
    grammar = getattr(matcher, "compiled_grammar", None)
    misses = getattr(grammar, "mask_cache_misses", None)
    start = time.perf_counter()
    need = matcher.fill_next_token_bitmask(bitmask, row)
    if misses is None:
        grammar_log.logger.debug("mask fill: request %s (%.2f ms)", request_id, (time.perf_counter() - start) * 1e3)
    elif grammar.mask_cache_misses > misses:
        grammar_log.logger.debug("mask cache miss: request %s (%.2f ms)", request_id,
                                 (time.perf_counter() - start) * 1e3)
    else:
        grammar_log.logger.debug("mask cache hit: request %s", request_id)
    return need
