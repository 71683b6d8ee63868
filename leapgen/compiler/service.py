"""The compile cache behind :class:`~leapgen.GrammarCompiler`.

- An LRU of compiled grammars bounded in entries and in bytes
  (``CompiledGrammar.memory_size_bytes()``, which grows as mask rows are
  cached; the bound is enforced whenever a grammar is added).
- Single flight: concurrent requests for the same new grammar wait for one
  compile.
- Failures are remembered: a grammar that raised a
  :class:`~leapgen.errors.GrammarError` raises the same error again without
  recompiling (bounded LRU of failures).
- An optional :class:`~leapgen.compiler.disk_cache.DiskCache` for regular
  grammars, read before compiling and written after.

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
        ``revive(dfa, kind, warnings, key) -> CompiledGrammar`` for disk entries;
        required with ``disk``.
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
        if self.disk is not None:
            stored = self.disk.load(key)
            if stored is not None:
                with self._lock:
                    self.disk_hits += 1
                return self._revive(*stored, key)
        try:
            compiled = build()
        except GrammarError as e:
            with self._lock:
                self._failures[key] = e
                while len(self._failures) > self.max_failures:
                    self._failures.popitem(last=False)
            raise
        if self.disk is not None and compiled.is_regular:
            self.disk.store(key, compiled.dfa, compiled.kind, compiled.warnings)
        return compiled

    def _add(self, key: tuple, compiled: CompiledGrammar) -> None:
        with self._lock:
            if not self.max_entries:
                return
            self._entries[key] = compiled
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            if self.max_bytes is not None:
                total = sum(c.memory_size_bytes() for c in self._entries.values())
                while total > self.max_bytes and len(self._entries) > 1:
                    _, evicted = self._entries.popitem(last=False)
                    total -= evicted.memory_size_bytes()

    def memory_size_bytes(self) -> int:
        """Summed ``memory_size_bytes()`` of the cached grammars."""
        with self._lock:
            entries = list(self._entries.values())
        return sum(c.memory_size_bytes() for c in entries)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every grammar and every remembered failure (the disk cache stays)."""
        with self._lock:
            self._entries.clear()
            self._failures.clear()
