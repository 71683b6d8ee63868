"""CompiledGrammar: a grammar's automaton bound to one vocabulary.

Immutable in meaning and shared by every request that uses the grammar. A
matcher's state is opaque to it: an ``int`` DFA state for regular grammars
(:class:`RegularGrammar`), a configuration of parse stacks for context-free
ones (:class:`~leapgen.compiler.compiled_cfg.ContextFreeGrammar`). Per state
the compiled grammar lazily computes, and caches, the packed token bitmask
and the forced (jump-forward) bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Hashable

import numpy as np

from leapgen.automata import Dfa
from leapgen.automata.limits import check_deadline
from leapgen.compiler.compact_rows import (CompactRows, compact_words, expand_words, index_type, narrow_byte,
                                           narrow_row, single_byte_rows)
from leapgen.compiler.token_index import TokenIndex
from leapgen.compiler.token_literals import find_token_literals, lead_free_words, set_literal_bits
from leapgen.grammar.ir import TOKEN_LEAD
from leapgen.vocab import TokenizerInfo

DEFAULT_MASK_CACHE_BYTES = 256 << 20
#: A row is kept packed (:meth:`CompiledGrammar._pack`) where that takes at most this fraction of the
#: whole row: a fill expands a packed row at ~1 ns a listed word, a whole one is copied in ~0.7 µs,
#: so a dense-ish row (a string body: most words listed) is kept whole.
PACKED_FRACTION = 8
_SCRATCH = threading.local()  # .rows: per row size, uint32 rows a thread lends (see lend_row)
MAX_FORCED_BYTES = 1 << 16
#: A state from which at least this many of the 256 bytes may follow is a *free-text* state (any
#: character: 179 bytes start one; a JSON string body allows 144).
WIDE_STATE_BYTES = 170
#: The kind of grammars compiled from structural tags: the only ones whose automaton may hold
#: token literals (see :mod:`leapgen.compiler.token_literals`).
STRUCTURAL_TAG_KIND = "structural_tag"


class CompiledGrammar:
    """A compiled grammar for one vocabulary (thread-safe, immutable in meaning).

    Attributes
    ----------
    tokenizer_info : TokenizerInfo
    warnings : tuple of str
        Where the grammar is looser than its source (e.g. a ``oneOf`` compiled
        as ``anyOf``). Empty when the grammar is exact.
    kind : str
        ``"regex"``, ``"json_schema"``, ``"ebnf"``, ``"lark"``, ``"structural_tag"`` or ``"ir"``.
    compile_ms : float
        Wall time of the compile, in milliseconds.
    is_regular : bool
        True for a single DFA (the fast path), False for a pushdown grammar.
    mask_cache_hits, mask_cache_misses : int
        Bitmask rows served from the per-state cache / computed.
    token_literals : dict of int to bytes
        Special or added tokens the grammar matches as tokens (a structural
        tag's markers), id -> the bytes of its token literal; empty for other
        grammars. Read-only.
    on_grow : callable or None
        Called as ``on_grow(self)`` after a bitmask row was computed and
        cached (the grammar grew; see :meth:`memory_size_bytes`), outside the
        grammar's lock, on the filling thread. Set by the
        :class:`~leapgen.compiler.service.CompileCache` that holds the
        grammar, so its byte bound covers rows filled after insertion.
    """

    is_regular = True

    def __init__(self, tokenizer_info: TokenizerInfo, token_index: TokenIndex, *, kind: str, warnings=(),
                 compile_ms: float = 0.0, mask_cache_bytes: int = DEFAULT_MASK_CACHE_BYTES):
        self.tokenizer_info = tokenizer_info
        self.token_index = token_index
        self.kind = kind
        self.warnings = tuple(warnings)
        self.compile_ms = compile_ms
        row_bytes = token_index.bitmask_words * 4
        self._row_bytes = row_bytes
        self._max_cached_rows = max(16, mask_cache_bytes // max(row_bytes, 1))
        self.on_grow = None
        # state -> (row, need_apply), or a row kept packed (see _keep_packed): (idx, val, ones, need_apply)
        self._rows: OrderedDict[Hashable, tuple] = OrderedDict()
        self._rows_bytes = 0  # what the entries of _rows hold
        self._index_dtype = index_type(token_index.bitmask_words)
        self._forced: dict[Hashable, bytes] = {}
        self._lock = threading.Lock()
        self.mask_cache_hits = 0
        self.mask_cache_misses = 0
        self.token_literals: dict[int, bytes] = {}
        self._slices = None  # the token index's own (see use_slices)
        self._compact: CompactRows | None = None  # rows computed at compile time, if any

    def _find_token_literals(self, byte_tables) -> None:
        """Set :attr:`token_literals` from the automaton's tables (grammars of a structural tag only)."""
        if self.kind == STRUCTURAL_TAG_KIND:
            self.token_literals = find_token_literals(byte_tables, self.tokenizer_info)

    # -- what subclasses provide -------------------------------------------------------------

    @property
    def start_state(self) -> Hashable:
        """The matcher state before any input."""
        raise NotImplementedError

    def walk(self, state: Hashable, data: bytes) -> Hashable | None:
        """The state after ``data`` from ``state``, or None if rejected (pure)."""
        raise NotImplementedError

    def is_accepting(self, state: Hashable) -> bool:
        """Whether the input may end in ``state``."""
        raise NotImplementedError

    def advance(self, state: Hashable, data: bytes, *, token: bool) -> Hashable | None:
        """The state after accepting ``data`` as one token (``token=True``) or as a
        string, or None if rejected (pure). Only rule budgets tell the two apart
        (:mod:`leapgen.compiler.compiled_budget`); otherwise :meth:`walk`."""
        return self.walk(state, data)

    def accepted(self, state: Hashable) -> None:
        """Told the state a matcher moved to (a hook for warnings; does nothing here)."""

    def _allowed_bits(self, state: Hashable) -> np.ndarray:
        """uint32 bitset of the tokens allowed from ``state`` (stop tokens
        aside), ``(ceil(vocab_size / 32),)``; the caller may mutate it unless
        it is read-only (an array the grammar keeps, shared)."""
        raise NotImplementedError

    def _forced_byte(self, state: Hashable) -> int:
        """The only byte that may follow ``state`` when the input may not end
        there, else -1."""
        raise NotImplementedError

    def use_slices(self, slices) -> None:
        """Try these token slices (a :class:`~leapgen.compiler.token_index.SliceSet`, e.g. with the free-text
        slice of :meth:`TokenIndex.with_free_text_slice`) in masks from now on; the set only
        shortcuts walks, masks are the same (mutates the grammar's caches of slice checks)."""
        self._slices = slices
        self._slice_memo = self.token_index.new_slice_memo(self._slice_memo.shape[1], slices)

    def prepare_free_text(self, limit: int) -> None:
        """Compute now the masks of the free-text states (:data:`WIDE_STATE_BYTES`), at most
        ``limit`` of them: almost every token lives there, so a mask is a walk of the whole
        vocabulary (a few ms with 128k tokens) that no token slice shortcuts when a trigger
        lies ahead. Fills caches only (meaning unchanged).

        Raises
        ------
        CompileLimitError
            The compile time limit (:mod:`leapgen.automata.limits`) passed.
        """
        raise NotImplementedError

    def rule_temperatures(self, state: Hashable) -> tuple[float, ...]:
        """The distinct sampling temperatures the active grammar rules set at
        ``state`` (one per parse path: its innermost rule with a temperature),
        sorted; empty where none does, always for a regular grammar. Pure."""
        return ()

    def rejected_for_depth(self, state: Hashable, data: bytes, *, token: bool = False) -> bool:
        """Whether ``data`` (a token when ``token``), rejected from ``state``, would be
        accepted but for the stack depth bound (never for a regular grammar; pure, uncached)."""
        return False

    # -- shared caching logic ------------------------------------------------------------------

    def bitmask_row(self, state: Hashable) -> tuple[np.ndarray, bool]:
        """The token bitmask row of a state (cached, LRU-bounded).

        Returns
        -------
        row : numpy.ndarray
            int32, shape ``(ceil(vocab_size / 32),)``, read-only and shared.
        need_apply : bool
            False when every token of the vocabulary is allowed.
        """
        got = self._rows.get(state)
        if got is not None:
            self.mask_cache_hits += 1
            return got if len(got) == 2 else self._unpacked(state, got)
        stored = self._compact.row(state) if self._compact is not None else None
        if stored is not None:  # computed at compile time (RegularGrammar.precompute_rows)
            self.mask_cache_hits += 1
            words, need_apply = stored
        else:
            self.mask_cache_misses += 1
            words = self._row_of(state)
            need_apply = not self.token_index.allows_everything(words)
        row = words.view(np.int32)
        row.flags.writeable = False
        return self._keep_row(state, (row, need_apply))

    def _keep_row(self, key: Hashable, got: tuple) -> tuple:
        """Cache a computed ``(row, need_apply)`` (or a packed entry: :meth:`_keep_packed`) under
        ``key``, replacing any entry there (least recently used rows past the bound dropped), tell
        ``on_grow``, and return it."""
        with self._lock:
            old = self._rows.get(key)
            if old is not None:
                self._rows_bytes -= entry_bytes(old)
            self._rows[key] = got
            self._rows_bytes += entry_bytes(got)
            while len(self._rows) > self._max_cached_rows:
                self._rows_bytes -= entry_bytes(self._rows.popitem(last=False)[1])
        if self.on_grow is not None:
            self.on_grow(self)
        return got

    def _keep_packed(self, key: Hashable, words: np.ndarray) -> bool:
        """Cache the row ``words`` (uint32, read, not kept) under ``key``, packed (:meth:`_pack`).
        Returns the row's need_apply flag (False: every token allowed)."""
        return self._keep_row(key, self._pack(words))[-1]

    def _pack(self, words: np.ndarray) -> tuple:
        """A row-cache entry of the row ``words`` (uint32, read, not kept): the words that differ from
        its base word, ``(idx, val, ones, need_apply)`` (:func:`~leapgen.compiler.compact_rows.compact_words`:
        ~1-2 KB for most rows of 128k tokens), or ``(row, need_apply)``, a read-only int32 row, where
        the packed words would take more than 1/:data:`PACKED_FRACTION` of it. Such a whole row is
        the one the vocabulary's table holds where an equal row is there
        (:class:`~leapgen.compiler.shared_rows.SharedRows`: rows of any of its grammars), else a copy
        (16 KB of memory the process had not touched: ~10 µs of page faults) added to it. Mutates
        only that table."""
        limit = (words.nbytes // PACKED_FRACTION) // (self._index_dtype.itemsize + 4)
        idx, val, ones, every, packed = compact_words(words, self._index_dtype, self.token_index.vocab_size, limit)
        if packed:
            return idx, val, ones, not every
        shared = self.token_index.shared_rows
        if shared is not None:
            entry, key = shared.find(words)
            if entry is not None:
                return entry
        row = words.copy().view(np.int32)
        row.flags.writeable = False
        return (row, not every) if shared is None else shared.add(key, (row, not every))

    @staticmethod
    def _write_entry(entry: tuple, words: np.ndarray) -> None:
        """Write the row of a row-cache entry (whole or packed, see :meth:`_pack`) into ``words``
        (uint32 ``(ceil(vocab_size / 32),)``, mutated)."""
        if len(entry) == 4:
            expand_words(words, entry[2], entry[0], entry[1], 0, len(entry[0]))
        else:
            words[:] = entry[0].view(np.uint32)

    def _unpacked(self, key: Hashable, got: tuple) -> tuple[np.ndarray, bool]:
        """The ``(row, need_apply)`` of a packed entry, kept whole in its place from now on (a state
        asked for a whole row, such as a LOOP state's for the walks, is asked again)."""
        words = np.empty(self.token_index.bitmask_words, np.uint32)
        self._write_entry(got, words)
        row = words.view(np.int32)
        row.flags.writeable = False
        return self._keep_row(key, (row, got[3]))

    def _write_new_row(self, state: Hashable, words: np.ndarray) -> bool | None:
        """Compute the row of ``state`` (not cached) into ``words`` (uint32, mutated), cache it and
        return its need_apply flag; None (``words`` untouched) where the grammar computes rows of
        its own arrays only (then :meth:`bitmask_row`)."""
        return None

    def prepare_row(self, state: Hashable) -> None:
        """Compute and cache the row of ``state`` now, unless cached (a batch's pool threads fill
        their states' rows ahead of :meth:`write_row`). Mutates the row cache only."""
        if self.has_bitmask_row(state):
            return
        words = lend_row(self.token_index.bitmask_words)  # touched memory (see _pack)
        try:
            if self._write_new_row(state, words) is None:
                self.bitmask_row(state)
        finally:
            give_back_row(words)

    def write_row(self, state: Hashable, out: np.ndarray) -> bool:
        """Write the bitmask row of ``state`` (:meth:`bitmask_row`) into ``out`` (int32
        ``(ceil(vocab_size / 32),)``, contiguous; mutated) and return its need_apply flag. A row
        computed at compile time, or kept packed, is expanded into ``out`` straight; a row not
        computed yet is computed in ``out`` where the grammar can (:meth:`_write_new_row`)."""
        got = self._rows.get(state)
        if got is None:
            words = out.view(np.uint32)
            need_apply = self._compact.write(state, words) if self._compact is not None else None
            if need_apply is not None:
                self.mask_cache_hits += 1
                return need_apply
            need_apply = self._write_new_row(state, words)
            if need_apply is not None:
                return need_apply
            got = self.bitmask_row(state)
        else:
            self.mask_cache_hits += 1
        if len(got) == 4:
            expand_words(out.view(np.uint32), got[2], got[0], got[1], 0, len(got[0]))
        else:
            out[:] = got[0]
        return got[-1]

    def _row_of(self, state: Hashable) -> np.ndarray:
        """The uint32 bitmask row of ``state``: :meth:`_allowed_bits`, the token literals' bits
        and the stop tokens' (computed, uncached). Fresh, or read-only where :meth:`_allowed_bits`
        shared an array that needs no change (no copy: a fresh 16 KB row costs ~10 µs of page faults)."""
        words = self._allowed_bits(state)
        if not words.flags.writeable:
            if not (self.token_literals or self.is_accepting(state) or self.token_index.any_stop_bits(words)):
                return words
            words = words.copy()
        self._add_literal_and_stop_bits(state, words)
        return words

    def _add_literal_and_stop_bits(self, state: Hashable, words: np.ndarray) -> None:
        """Set the token literals' bits (:mod:`~leapgen.compiler.token_literals`) that ``state``
        allows in ``words`` (uint32, mutated), and set or clear the stop tokens'."""
        if self.token_literals:
            lead_free = lead_free_words(self.token_index, self.tokenizer_info)
            set_literal_bits(words, state, self.walk, self.token_literals, lead_free)
        self.token_index.set_stop_bits(words, self.is_accepting(state))

    def has_bitmask_row(self, state: Hashable) -> bool:
        """Whether the bitmask row of ``state`` is cached or precomputed (a fill would not compute it)."""
        return state in self._rows or (self._compact is not None and self._compact.holds(state))

    def forced_bytes(self, state: Hashable) -> bytes:
        """Bytes the grammar forces from ``state``: the longest string along
        which the input may not end and exactly one byte may follow. Cached."""
        got = self._forced.get(state)
        if got is None:
            out = bytearray()
            q = state
            while len(out) < MAX_FORCED_BYTES:
                b = self._forced_byte(q)
                if b < 0:
                    break
                out.append(b)
                q = self.walk(q, bytes((b,)))
            got = bytes(out)
            with self._lock:
                if len(self._forced) > self._max_cached_rows:
                    self._forced.clear()
                self._forced[state] = got
        return got

    @property
    def stored_automaton(self):
        """The automaton a disk-cache entry or the compile worker's reply carries, to be bound again
        (:meth:`~leapgen.GrammarCompiler.bind`) without compiling: a :class:`RegularGrammar`'s
        :class:`~leapgen.automata.Dfa`, a counted grammar's
        :class:`~leapgen.automata.counted.CountedDfa`; None where the grammar is compiled again from its
        source instead (context-free grammars, whose rules' automata are rebuilt)."""
        return None

    def memory_size_bytes(self) -> int:
        """Approximate bytes the grammar holds: its cached bitmask rows (a
        running total: O(1), cheap to ask after every fill), plus, in the
        subclasses, the automaton and the per-state memos.

        Returns
        -------
        int
            Bytes; grows as rows are cached (see ``on_grow``).
        """
        return self._rows_bytes + (self._compact.nbytes if self._compact is not None else 0)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(kind={self.kind!r}, n_states={getattr(self, 'n_states', '?')}, "
                f"warnings={len(self.warnings)})")


class RegularGrammar(CompiledGrammar):
    """A grammar compiled to one minimized byte-level DFA; states are ints.

    Attributes
    ----------
    dfa : Dfa
    trans_flat : numpy.ndarray
        int32, ``(n_states * 256,)``: ``dfa.trans`` flattened (-1 = dead).
    accepting : numpy.ndarray
        bool, ``(n_states,)``.
    """

    is_regular = True

    def __init__(self, dfa: Dfa, tokenizer_info: TokenizerInfo, token_index: TokenIndex, **kwargs):
        super().__init__(tokenizer_info, token_index, **kwargs)
        self.dfa = dfa
        self.trans_flat = np.ascontiguousarray(dfa.trans.reshape(-1))
        self.accepting = dfa.accepting
        self._forced_bytes_of: list[int] | None = None  # see _forced_byte
        self._accepting_list = dfa.accepting.tolist()
        self._all_live = np.ones(dfa.n_states, np.int8)  # a trimmed DFA: every state can still finish
        self._slice_memo = token_index.new_slice_memo(dfa.n_states)
        self._find_token_literals([dfa.trans])
        self._narrow_args = self._narrow_row_args() if token_index.use_trie else None

    @property
    def stored_automaton(self) -> Dfa:
        return self.dfa

    @property
    def n_states(self) -> int:
        return self.dfa.n_states

    @property
    def start_state(self) -> int:
        return self.dfa.start

    def walk(self, state: int, data: bytes) -> int | None:
        t = self.trans_flat
        for b in data:
            state = int(t[state * 256 + b])
            if state < 0:
                return None
        return state

    def is_accepting(self, state: int) -> bool:
        return self._accepting_list[state]

    def _allowed_bits(self, state: int, out: np.ndarray | None = None) -> np.ndarray:
        return self.token_index.token_row(self.trans_flat, state, self._all_live, self._slice_memo, self._slices,
                                          out)

    def _write_new_row(self, state: int, words: np.ndarray) -> bool:
        self.mask_cache_misses += 1
        if self._narrow_args is not None:
            b = narrow_byte(self.trans_flat, state, self._narrow_args[0])
            if b > -2:  # little text ahead (a key's letters): only its few tokens are walked
                idx, val, count = narrow_row(self.trans_flat, state, b, self._accepting_list[state],
                                             *self._narrow_args[1], words, self._index_dtype, *self._narrow_args[2])
                return self._keep_row(state, (idx, val, False, count < self.token_index.vocab_size))[-1]
        self._allowed_bits(state, words)
        self._add_literal_and_stop_bits(state, words)
        return self._keep_packed(state, words)

    def _narrow_row_args(self) -> tuple[int, tuple, tuple]:
        """:func:`~leapgen.compiler.compact_rows.narrow_byte`'s and :func:`~leapgen.compiler.compact_rows.narrow_row`'s
        arguments for this grammar: a token literal's lead byte (no narrow state's byte; -1: the grammar
        has no token literals); the stop tokens and the tokens a walk may set (those without a 0xFF
        byte where the grammar has token literals); the vocabulary trie's arrays."""
        index = self.token_index
        if self.token_literals:
            allowed, lead = lead_free_words(index, self.tokenizer_info), TOKEN_LEAD
        else:
            allowed, lead = index.every_token_words(), -1
        return lead, (index.stop_token_ids, allowed), index.trie_arrays()

    def precompute_rows(self, states: np.ndarray) -> None:
        """Compute now the bitmask rows of ``states`` (int array of DFA states) and keep them
        compact (:class:`~leapgen.compiler.compact_rows.CompactRows`, ~1-2 KB a JSON state with
        128k tokens): a fill then expands the row (~1 µs) instead of walking the vocabulary at
        the state's first visit, as xgrammar's compile-time token mask cache does for every
        state. Fills caches only (meaning unchanged).

        Raises
        ------
        CompileLimitError
            The compile time limit (:mod:`leapgen.automata.limits`) passed.
        """
        index = self.token_index
        states = np.asarray(states, np.int64)
        store = CompactRows(index.bitmask_words, self.n_states, len(states))
        if index.use_trie:  # forced text: one kernel call for all its states
            live = self.dfa.trans[states] >= 0
            # where the byte is TOKEN_LEAD a token literal may follow: those states' rows set literal bits
            single = (live.sum(axis=1) == 1) & ~live[:, TOKEN_LEAD]
            forced, states = states[single], states[~single]
            allowed = lead_free_words(index, self.tokenizer_info) if self.token_literals else index.every_token_words()
            offsets, idx, val, count = single_byte_rows(self.trans_flat, forced, self.accepting,
                                                        index.stop_token_ids, allowed, index.bitmask_words,
                                                        *index.trie_arrays())
            store.add_single_byte(forced, offsets, idx, val, count < index.vocab_size)
        allows_everything = index.allows_everything
        for state in states.tolist():
            check_deadline("computing the masks of a grammar's states")
            cached = state in self._rows  # visited before
            words = self.bitmask_row(state)[0].view(np.uint32) if cached else self._row_of(state)
            store.add(state, words, not allows_everything(words))
        self._compact = store.done()
        self._rows.clear()  # the rows computed on the way are in the store too

    def _forced_byte(self, state: int) -> int:
        if self._forced_bytes_of is None:  # first jump-forward: every state's at once (compiles stay cheap)
            live = self.dfa.trans >= 0
            if self.token_literals:
                live[:, TOKEN_LEAD] = False  # a token literal is not text (see token_literals)
            only = np.where(live.sum(axis=1) == 1, np.argmax(live, axis=1), -1)
            self._forced_bytes_of = np.where(self.dfa.accepting, -1, only).tolist()
        return self._forced_bytes_of[state]

    def memory_size_bytes(self) -> int:
        # the transition table, the accepting flags (an array and a list), the token-slice memo, and
        # the forced byte per state once a jump-forward asked for them (a list: ~8 bytes an entry)
        n = self.dfa.n_states
        lists = 8 * n * (1 + (self._forced_bytes_of is not None))
        return (super().memory_size_bytes() + int(self.trans_flat.nbytes + self.accepting.nbytes)
                + int(self._slice_memo.nbytes) + lists + n)


def entry_bytes(entry: tuple) -> int:
    """Bytes of an entry of a grammar's row cache: a whole row, or a packed one's two arrays."""
    return int(entry[0].nbytes) if len(entry) == 2 else int(entry[0].nbytes + entry[1].nbytes)


def lend_row(n_words: int) -> np.ndarray:
    """A uint32 row of ``n_words`` (contents undefined) the calling thread lends: one of its own, reused
    (memory already touched), to give back with :func:`give_back_row`. Rows computed to be packed
    (frame sorts, which nest: a LOOP state's within a walk; a batch's rows prepared ahead) use them,
    so a thread keeps a few."""
    rows = getattr(_SCRATCH, "rows", None)
    if rows is None:
        rows = _SCRATCH.rows = {}
    spare = rows.get(n_words)
    return spare.pop() if spare else np.empty(n_words, np.uint32)


def give_back_row(words: np.ndarray) -> None:
    """Return a row lent by :func:`lend_row` (no reference kept elsewhere)."""
    _SCRATCH.rows.setdefault(len(words), []).append(words)
