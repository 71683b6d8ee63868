"""The compile cache behind :class:`~leapgen.GrammarCompiler`.

- An LRU of compiled grammars bounded in entries and in bytes
  (``CompiledGrammar.memory_size_bytes()``, which grows as mask rows are
  cached; the bound is enforced whenever a grammar is added and, with a byte
  bound, whenever a cached grammar grows, through its ``on_grow`` hook). An evicted grammar
  lives on while a matcher uses it, but no longer counts.
- Single flight: concurrent requests for the same new grammar wait for one
  compile.
- Failures are remembered: a grammar that raised a
  :class:`~leapgen.errors.GrammarError` raises the same error again without
  recompiling (bounded LRU of failures).
- An optional :class:`~leapgen.compiler.disk_cache.DiskCache` for the grammars
  with a stored automaton (regular and counted ones: ``CompiledGrammar.stored_automaton``),
  read before compiling and written after.

The same design as SGLang's grammar backend cache (futures, a sentinel for
failed grammars), with the byte bound of xgrammar's ``cache_limit_bytes``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable

from leapgen.compiler.compiled import CompiledGrammar
from leapgen.compiler.disk_cache import DiskCache
from leapgen.errors import GrammarError

DEFAULT_MAX_FAILURES = 1024


class CompileCache:
    """Thread-safe cache of compiled grammars (see the module docstring).

    Parameters
    ----------
    max_entries : int
        Most grammars kept; 0 keeps none (every call compiles, single flight still applies).
    max_bytes : int or None
        Bound on the summed ``memory_size_bytes()``; None for no bound. The
        newest grammar is always kept.
    disk : DiskCache, optional
    revive : callable, optional
        ``revive(automaton, kind, warnings, key) -> CompiledGrammar`` for disk entries and adopted
        automata (a ``Dfa`` or ``CountedDfa``); required with ``disk``.
    max_failures : int, default 1024
        Failed grammars remembered.

    Attributes
    ----------
    hits, misses, failure_hits, disk_hits : int
        Counters (compiles = misses - disk_hits).
    """

    def __init__(self, *, max_entries: int, max_bytes: int | None = None, disk: DiskCache | None = None,
                 revive: Callable | None = None, max_failures: int = DEFAULT_MAX_FAILURES):
        if max_entries < 0 or (max_bytes is not None and max_bytes < 0) or max_failures < 0:
            raise ValueError("cache bounds must be >= 0")
        if disk is not None and revive is None:
            raise ValueError("a disk cache needs revive=")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_failures = max_failures
        self.disk = disk
        self._revive = revive
        self._entries: OrderedDict[tuple, CompiledGrammar] = OrderedDict()
        self._sizes: dict[tuple, int] = {}  # memory_size_bytes() of each entry when last counted
        self._key_of: dict[int, tuple] = {}  # id(grammar) -> key, for on_grow
        self._total = 0
        self._dropped_counts = [0, 0]  # mask-cache hits and misses of grammars no longer cached
        self._failures: OrderedDict[tuple, GrammarError] = OrderedDict()
        self._inflight: dict[tuple, threading.Event] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = self.failure_hits = self.disk_hits = 0

    def get_or_compile(self, key: tuple, build: Callable[[], CompiledGrammar]) -> CompiledGrammar:
        """The cached grammar of ``key``, else ``build()`` (once, however many threads ask).

        Raises
        ------
        GrammarError
            What ``build`` raised, now or for an earlier call with this key.
        """
        while True:
            with self._lock:
                got = self._entries.get(key)
                if got is not None:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return got
                failed = self._failures.get(key)
                if failed is not None:
                    self._failures.move_to_end(key)
                    self.failure_hits += 1
                    raise failed.with_traceback(None)
                waiter = self._inflight.get(key)
                owner = waiter is None
                if owner:
                    waiter = self._inflight[key] = threading.Event()
                    self.misses += 1
            if not owner:
                waiter.wait()
                continue  # stored, failed (remembered) or dropped at once (max_entries=0): look again
            try:
                compiled = self._compile(key, build)
                self._add(key, compiled)
                return compiled
            finally:
                with self._lock:
                    self._inflight.pop(key, None)
                waiter.set()

    def _compile(self, key: tuple, build: Callable[[], CompiledGrammar]) -> CompiledGrammar:
        stored = self.disk.load(key) if self.disk is not None else None
        try:
            if stored is not None:
                with self._lock:
                    self.disk_hits += 1
                return self._revive(*stored, key)  # may raise a limit, as a compile would
            compiled = build()
        except GrammarError as e:
            with self._lock:
                self._failures[key] = e
                while len(self._failures) > self.max_failures:
                    self._failures.popitem(last=False)
            raise
        automaton = compiled.stored_automaton
        if self.disk is not None and automaton is not None:
            self.disk.store(key, automaton, compiled.kind, compiled.warnings)
        return compiled

    def adopt(self, key: tuple, automaton, kind: str, warnings: tuple[str, ...]) -> None:
        """Cache the grammar of an automaton (a ``Dfa`` or ``CountedDfa``) compiled in another process
        under ``key``, as a disk entry is revived (the compile worker hands its new automata back this
        way, so the caller's next compile of
        ``key`` is a memory hit instead of a disk read). Mutates the cache; nothing happens if ``key``
        is cached already or the cache has no ``revive``.

        Raises
        ------
        GrammarError
            What ``revive`` raises (a size limit).
        """
        with self._lock:
            if key in self._entries or self._revive is None:
                return
        self._add(key, self._revive(automaton, kind, warnings, key))

    def _add(self, key: tuple, compiled: CompiledGrammar) -> None:
        with self._lock:
            if not self.max_entries:
                return
            if key in self._entries:
                self._drop(key)
            self._entries[key] = compiled
            self._sizes[key] = size = compiled.memory_size_bytes()
            self._key_of[id(compiled)] = key
            self._total += size
            if self.max_bytes is not None:  # growth counted only where it may evict (a call per new mask row)
                compiled.on_grow = self._grew
            while len(self._entries) > self.max_entries:
                self._drop(next(iter(self._entries)))
            self._evict_bytes()

    def _grew(self, compiled: CompiledGrammar) -> None:
        """``on_grow`` of a cached grammar: count its new size, evict past the bound."""
        with self._lock:
            key = self._key_of.get(id(compiled))
            if key is None or self._entries.get(key) is not compiled:
                return
            size = compiled.memory_size_bytes()
            self._total += size - self._sizes[key]
            self._sizes[key] = size
            self._evict_bytes()

    def _evict_bytes(self) -> None:
        """Drop least recently used grammars while over ``max_bytes`` (the newest stays); lock held."""
        if self.max_bytes is None:
            return
        while self._total > self.max_bytes and len(self._entries) > 1:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: tuple) -> None:
        """Forget one entry (lock held); it stops counting and reporting its growth."""
        compiled = self._entries.pop(key)
        self._total -= self._sizes.pop(key)
        self._key_of.pop(id(compiled), None)
        compiled.on_grow = None
        self._dropped_counts[0] += compiled.mask_cache_hits
        self._dropped_counts[1] += compiled.mask_cache_misses

    def mask_cache_counts(self) -> tuple[int, int]:
        """(hits, misses) of the bitmask-row caches of the grammars cached now, plus those of grammars
        dropped earlier (counted when dropped)."""
        with self._lock:
            entries = list(self._entries.values())
            hits, misses = self._dropped_counts
        return hits + sum(c.mask_cache_hits for c in entries), misses + sum(c.mask_cache_misses for c in entries)

    def memory_size_bytes(self) -> int:
        """Summed ``memory_size_bytes()`` of the cached grammars: as last counted (at insertion and at
        each growth) with ``max_bytes``, else counted now (O(entries))."""
        with self._lock:
            if self.max_bytes is not None:
                return self._total
            return sum(c.memory_size_bytes() for c in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every grammar and every remembered failure (the disk cache stays)."""
        with self._lock:
            for key in list(self._entries):
                self._drop(key)
            self._failures.clear()
