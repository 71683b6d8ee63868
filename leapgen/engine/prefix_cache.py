"""Prompt KV reuse across requests: :class:`PrefixCache`.

One responsibility: remember the keys/values of recent prompts and, for a new
prompt, hand back the KV of the longest prefix it shares with one of them, so
the engine prefills only the rest (a chat's system prompt and history, a
repeated few-shot preamble, a retried request).

Design: each entry is a *copy* of one prompt's KV (``(layers, kv_heads, n,
head_dim)`` keys and values), taken right after that prompt's prefill; a hit
copies the shared prefix into the new request's own
:class:`~leapgen.engine.kv_cache.KvCache`. Copies (not shared buffers) keep
every request's cache private, so the in-place writes of a decode, and the
crop of a jump-forward, never touch another sequence. Entries are evicted
least-recently-used first to keep the total under a token budget. The KV of
position ``i`` depends only on tokens ``0 .. i``, so a shared prefix's KV is
the KV a cold prefill would compute (up to float rounding).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import torch

#: Shortest shared prefix worth a copy (shorter ones are simply prefilled).
DEFAULT_MIN_TOKENS = 16


class PrefixCache:
    """LRU cache of prompt KV entries, bounded by a token budget.

    Parameters
    ----------
    max_tokens : int
        Most tokens held by all entries together; 0 disables the cache.
    min_tokens : int, default 16
        Shortest prefix reused (and shortest prompt stored).

    Attributes
    ----------
    num_tokens : int
        Tokens held right now (readable from any thread).
    """

    def __init__(self, max_tokens: int, min_tokens: int = DEFAULT_MIN_TOKENS):
        if max_tokens < 0 or min_tokens < 1:
            raise ValueError(f"max_tokens must be >= 0 and min_tokens >= 1, got {max_tokens}, {min_tokens}")
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self._entries: OrderedDict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self.num_tokens = 0

    @property
    def enabled(self) -> bool:
        return self.max_tokens > 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, ids: Sequence[int], limit: int) -> tuple[int, torch.Tensor | None, torch.Tensor | None]:
        """The longest stored prefix of ``ids``, at most ``limit`` tokens.

        Returns
        -------
        (n, keys, values)
            ``n`` shared tokens (0 on a miss: below ``min_tokens``) and the
            entry's keys/values (only ``[:, :, :n]`` is to be read; do not
            mutate them). Marks the entry most recently used.
        """
        if not self.enabled or limit < self.min_tokens:
            return 0, None, None
        best, best_key = 0, None
        first = ids[0]
        for key in self._entries:
            if key[0] != first or len(key) <= best:
                continue
            n = _common_prefix(key, ids, min(len(key), limit))
            if n > best:
                best, best_key = n, key
        if best < self.min_tokens:
            return 0, None, None
        self._entries.move_to_end(best_key)
        keys, values = self._entries[best_key]
        return best, keys, values

    def copy_into(self, cache, ids: Sequence[int], limit: int) -> int:
        """Copy the KV of the longest stored prefix of ``ids`` (at most
        ``limit`` tokens) into an empty :class:`~leapgen.engine.kv_cache.KvCache`.

        Returns
        -------
        int
            Tokens copied (0 on a miss; ``cache`` is then untouched).
        """
        n, keys, values = self.lookup(ids, limit)
        if n:
            cache.reserve(n)
            cache.keys[:, :, :n] = keys[:, :, :n]
            cache.values[:, :, :n] = values[:, :, :n]
            cache.length = n
        return n

    def insert(self, ids: Sequence[int], keys: torch.Tensor, values: torch.Tensor) -> None:
        """Store a copy of the KV of ``ids`` (``keys``/``values``: ``(layers,
        kv_heads, >= len(ids), head_dim)``, position ``i`` = token ``ids[i]``).

        Skipped when shorter than ``min_tokens``, longer than the budget, or
        already covered by a stored entry; an entry that is a prefix of
        ``ids`` is replaced. Evicts least-recently-used entries to fit.
        """
        n = len(ids)
        if not self.enabled or n < self.min_tokens or n > self.max_tokens:
            return
        key = tuple(ids)
        for other in list(self._entries):
            if len(other) >= n and other[:n] == key:
                self._entries.move_to_end(other)  # covered: just refresh it
                return
            if len(other) < n and key[: len(other)] == other:
                self._drop(other)
        while self.num_tokens + n > self.max_tokens and self._entries:
            self._drop(next(iter(self._entries)))
        self._entries[key] = (keys[:, :, :n].clone(), values[:, :, :n].clone())
        self.num_tokens += n

    def clear(self) -> None:
        self._entries.clear()
        self.num_tokens = 0

    def _drop(self, key: tuple[int, ...]) -> None:
        del self._entries[key]
        self.num_tokens -= len(key)


def _common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = min(limit, len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
