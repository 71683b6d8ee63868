"""Whole bitmask rows shared by content across the grammars of one vocabulary.

One responsibility: a bounded, thread-safe table from a row's content to the read-only row-cache
entry that holds it, for the rows a grammar keeps whole (those too dense to pack: see
:meth:`~leapgen.compiler.compiled.CompiledGrammar._pack`), so that a grammar whose first visit
computes a row some grammar computed before keeps that row instead of a copy of its own.

Dense rows repeat across the grammars of a vocabulary: a JSON string's body, free text. Over 400
JSONSchemaBench schemas of the tune half walked with Llama-3's vocabulary, 94 % of the whole rows
that first visits computed equalled one an earlier visit had computed, mostly in another grammar.
A copy is 16 KB of memory the process had not touched (~10 µs of page faults on this machine); a
hit costs a hash and a comparison (~2-3 µs) and keeps no memory. Packed rows are not shared: a
packed row's own arrays cost about what finding it would.

A hit is exact: the kept row is compared with the new one word by word (:func:`matches_whole`),
never taken on its hash alone.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from leapgen.compiler.compact_rows import matches_whole, row_hash

#: Bytes of whole rows a vocabulary's table keeps at most (least recently used dropped first): 512 rows
#: of Llama-3's 128k tokens. Not counted in any grammar's bound (a grammar that keeps a shared row
#: counts it whole, as its own).
MAX_SHARED_ROW_BYTES = 8 << 20


class SharedRows:
    """A vocabulary's whole rows by content (see the module's docstring); thread-safe.

    Parameters
    ----------
    n_words : int
        Words of the vocabulary's rows (``ceil(vocab_size / 32)``).
    max_bytes : int, default MAX_SHARED_ROW_BYTES
        Bytes of rows kept at most, at least one row (least recently used dropped first; a row a
        grammar holds stays alive in that grammar).
    """

    def __init__(self, n_words: int, max_bytes: int = MAX_SHARED_ROW_BYTES):
        self.max_rows = max(1, max_bytes // max(4 * n_words, 1))
        self._salt = np.random.default_rng(0x5EED).integers(0, 1 << 63, n_words, dtype=np.uint64) | np.uint64(1)
        self._entries: OrderedDict[int, tuple[np.ndarray, bool]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def find(self, words: np.ndarray) -> tuple[tuple[np.ndarray, bool] | None, int]:
        """The kept ``(row, need_apply)`` entry whose row equals ``words`` (uint32
        ``(n_words,)``, read), if any, and the row's hash (for :meth:`add` on a miss). Marks the
        entry recently used.

        Raises
        ------
        ValueError
            ``words`` is not a row of ``n_words`` words.
        """
        if words.shape != self._salt.shape:
            raise ValueError(f"a row of {words.shape} words, not {self._salt.shape}")
        key = int(row_hash(words, self._salt))
        entry = self._entries.get(key)  # (one call into the C dict: atomic under the GIL, as below)
        if entry is not None and matches_whole(words, entry[0].view(np.uint32)):
            try:
                self._entries.move_to_end(key)
            except KeyError:  # dropped by another thread meanwhile: still the right row
                pass
            self.hits += 1
            return entry, key
        self.misses += 1
        return None, key

    def add(self, key: int, entry: tuple[np.ndarray, bool]) -> tuple[np.ndarray, bool]:
        """Keep ``entry`` (``(row, need_apply)``: an int32 row, made read-only here, and whether it
        leaves a token out) under ``key``, the hash :meth:`find` returned for its row, in place of
        any entry there. Returns ``entry``."""
        entry[0].flags.writeable = False
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = entry
            while len(self._entries) > self.max_rows:
                self._entries.popitem(last=False)
        return entry

    def warm_up(self) -> None:
        """Run the table's kernels once on a zero row, so that numba loads them now, not at a first
        visit (the table is not changed)."""
        words = np.zeros(self._salt.shape, np.uint32)
        row_hash(words, self._salt)
        kept = words.copy()
        kept.flags.writeable = False  # as the kept rows are (numba specializes on it)
        matches_whole(words, kept)

    def __len__(self) -> int:
        return len(self._entries)
