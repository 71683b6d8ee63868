"""Token index: which vocabulary tokens keep a DFA alive from a state.

One :class:`TokenIndex` per vocabulary, shared by every grammar compiled for
it. With numba, tokens are walked as a trie (depth first, pruned as soon as
a prefix dies: see :mod:`leapgen.compiler.trie_kernels`); without it, all
tokens' bytes are walked column by column with numpy gathers, tokens sorted
by length so each column only touches tokens long enough. With numba the
index also holds the vocabulary's token slices
(:mod:`leapgen.compiler.token_slices`): where one applies, only the tokens
outside it are walked. :meth:`TokenIndex.lazy_token_walk` walks tokens
through an automaton known only by its step function (pushdown
configurations).
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Callable, Hashable, NamedTuple

import numpy as np

from leapgen.automata.jit import HAVE_NUMBA
from leapgen.compiler import index_cache, pda_kernels, trie_kernels
from leapgen.compiler.compact_rows import (CompactRows, compact_words, index_type, narrow_byte, narrow_row,
                                           single_byte_rows)
from leapgen.compiler.counted_kernels import count_bytes_in, counted_trie_allowed, refuse_counted
from leapgen.compiler.shared_rows import SharedRows
from leapgen.compiler.token_slices import (JSON_CONTENT_CLASSES, LOOP, MAX_SLICE_CHARS, UNBOUNDED, TokenSlice, build_slice,
                                           build_slices, first_slice, new_memo, pack_char_dfas, slice_leaves)
from leapgen.grammar import ir
from leapgen.vocab import TokenizerInfo

_ONE_FRAME = np.ones(1, np.int32)
_CUT = np.ones(1, np.bool_)
_ASCII = np.arange(256) < 128  # the warm-ups' one-byte characters
_NO_DEPTH_LIMIT = 1 << 40
_NO_WORK_LIMIT = 1 << 60
#: How many bytes deep :meth:`TokenIndex.token_row` and :meth:`TokenIndex.frame_sets` look for a LOOP
#: state to jump to (a JSON string's ``\\u`` escape: five bytes back to the body).
LOOP_JUMP_DEPTH = 6
#: A state with fewer live ASCII bytes is not tried as a LOOP state to jump to (a string body has ~90).
LOOP_JUMP_MIN_LIVE = 64
#: The tries whose walk records (:meth:`TokenIndex.walk_records`) are kept at most; past it, all are dropped.
MAX_WALK_RECORDS = 64


class LoopJumps:
    """One context-free grammar's memo for the LOOP-state jumps of :meth:`TokenIndex.frame_sets`
    (mutated by it; not thread-safe beyond the GIL's dict operations, and a lost update only costs a
    jump).

    Attributes
    ----------
    slice_of : dict of int to numpy.ndarray
        LOOP states met (a slice applies with limit ``LOOP``): state -> that slice's one-byte
        characters (a row of :attr:`SliceSet.class_bytes`).
    target : dict of int to int
        Per state checked: the LOOP state its bytes of one-byte slice characters reach within
        :data:`LOOP_JUMP_DEPTH`, or -1.
    """

    __slots__ = ("slice_of", "target")

    def __init__(self):
        self.slice_of: dict[int, np.ndarray] = {}
        self.target: dict[int, int] = {}


#: Closure items a frame's refinement with context expansion (:meth:`TokenIndex.frame_sets`) may compute:
#: past a rule's return it follows every caller, which fans out in grammars whose rules are called from
#: many places (at most 2,000 items for the builtin JSON grammar's frames). Past it, the refinement
#: stops at the rule's return instead.
CONTEXT_WORK_LIMIT = 3_000
#: Slice sets with a free-text slice kept per vocabulary (:meth:`TokenIndex.with_free_text_slice`).
MAX_FREE_TEXT_SLICES = 16


class SliceSet(NamedTuple):
    """Token slices tried in this order (biggest first), their one-character DFAs packed
    (:func:`~leapgen.compiler.token_slices.pack_char_dfas`), bool ``class_bytes``
    ``(n_slices, 256)``: each slice's one-byte characters, and bool ``any_class_byte`` ``(256,)``:
    their union (the bytes a LOOP-state jump follows)."""

    slices: tuple
    char_dfas: tuple
    class_bytes: np.ndarray
    any_class_byte: np.ndarray


def slice_set(slices: list[TokenSlice]) -> SliceSet:
    """A :class:`SliceSet` over ``slices`` (in this order)."""
    class_bytes = np.zeros((len(slices), 256), np.bool_)
    for n, sl in enumerate(slices):
        edge_start, edge_end, edge_byte, edge_next, complete = sl.char_dfa
        for e in range(edge_start[0], edge_end[0]):
            class_bytes[n, edge_byte[e]] = complete[edge_next[e]]
    return SliceSet(tuple(slices), pack_char_dfas(list(slices)), class_bytes, class_bytes.any(axis=0))


class TokenIndex:
    """Vectorized token walks over one vocabulary (immutable, thread-safe).

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
        The vocabulary. Special and padding ids are never walked.
    use_trie : bool or None
        Use the numba trie kernels (default: when numba is installed).
    use_slices : bool
        With the trie kernels, build and use token slices (default True).
    cache_dir : str or os.PathLike, optional
        Keep the trie and the slices there (:mod:`leapgen.compiler.index_cache`), and read
        them back in a later process instead of building them.

    Attributes
    ----------
    tokenizer_info : TokenizerInfo
        The vocabulary it was built for.
    token_slices : list of TokenSlice
        Biggest first; empty without the trie kernels.
    """

    def __init__(self, tokenizer_info: TokenizerInfo, *, use_trie: bool | None = None, use_slices: bool = True,
                 cache_dir: str | os.PathLike | None = None):
        self.tokenizer_info = tokenizer_info
        self.vocab_size = tokenizer_info.vocab_size
        self.bitmask_words = (self.vocab_size + 31) // 32
        self.stop_token_ids = np.array(sorted(tokenizer_info.stop_token_ids), np.int64)
        stop_words: dict[int, int] = {}
        for t in self.stop_token_ids.tolist():
            stop_words[t >> 5] = stop_words.get(t >> 5, 0) | (1 << (t & 31))
        self._stop_words = [(w, np.uint32(bits)) for w, bits in stop_words.items()]  # (word, its stop bits)
        self.use_trie = HAVE_NUMBA if use_trie is None else use_trie
        self._token_bytes = tokenizer_info.token_bytes
        self._rank: np.ndarray | None = None
        self._free_text: dict[frozenset, SliceSet] = {}
        self._json_content_slices: list[TokenSlice] | None = None  # see _json_slices
        self.token_slices: list[TokenSlice] = []
        self._no_words = self.empty_words()  # the empty bitset, shared (read-only)
        self._no_words.flags.writeable = False
        self._spare = threading.local()  # .words: a zeroed bitset, lent per thread (see _borrow_words)
        self._token_sets: dict[tuple, np.ndarray] = {}  # see tokens_longer_than, tokens_holding
        self._records: dict[tuple, tuple] = {}  # see walk_records
        #: The vocabulary's rows by content, shared by its grammars (None without numba: hashing a
        #: row in Python would cost more than computing it)
        self.shared_rows: SharedRows | None = SharedRows(self.bitmask_words) if self.use_trie else None
        self._sets_lock = threading.Lock()
        if self.use_trie:
            if not self._load(cache_dir, tokenizer_info, use_slices):
                self._build(tokenizer_info, *tokenizer_info.token_byte_matrix(), use_slices)
                if cache_dir is not None:
                    self._save(cache_dir, tokenizer_info, use_slices)
            self.default_slices = slice_set(self.token_slices)
            self._warm_up()
        else:
            self.default_slices = slice_set([])
            mat, lens, ids = tokenizer_info.token_byte_matrix()
            order = np.argsort(-lens.astype(np.int64), kind="stable")
            self.lengths = lens[order].astype(np.int32)
            self.token_ids = ids[order].astype(np.int64)
            max_len = int(self.lengths[0]) if self.lengths.size else 0
            self.columns = [np.ascontiguousarray(mat[order, c]).astype(np.int64) for c in range(max_len)]
            self.longer_than = [int(np.count_nonzero(self.lengths > c)) for c in range(max_len)]

    def _build(self, tokenizer_info: TokenizerInfo, mat: np.ndarray, lens: np.ndarray, ids: np.ndarray,
               use_slices: bool) -> None:
        """The trie, the rows' ids and positions, and the slices, from the vocabulary."""
        token_bytes = tokenizer_info.token_bytes
        order = np.array(sorted(range(len(ids)), key=lambda r: token_bytes[ids[r]]), np.int32)
        self._trie = trie_kernels.build_trie(mat, lens, order)
        self._byte_matrix, self._byte_lengths = mat, lens
        self._row_ids = ids.astype(np.int32)
        node_toks = self._trie[6]
        self._trie_pos = np.full(self.vocab_size, -1, np.int64)  # token id -> position in node_toks
        self._trie_pos[self._row_ids[node_toks[:len(order)]]] = np.arange(len(order))
        self._lex_order = order
        if use_slices:
            self.token_slices = build_slices(mat, lens, order, self._row_ids, self.bitmask_words)

    def _save(self, cache_dir, tokenizer_info: TokenizerInfo, use_slices: bool) -> None:
        arrays = {"byte_matrix": self._byte_matrix, "byte_lengths": self._byte_lengths, "row_ids": self._row_ids,
                  "trie_pos": self._trie_pos, "lex_order": self._lex_order}
        index_cache.save_index(cache_dir, tokenizer_info.fingerprint, self.vocab_size, arrays, self._trie,
                               self.token_slices if use_slices else None)

    def _load(self, cache_dir, tokenizer_info: TokenizerInfo, use_slices: bool) -> bool:
        """Read the trie and the slices from ``cache_dir``; False (nothing set) on a miss."""
        if cache_dir is None:
            return False
        got = index_cache.load_index(cache_dir, tokenizer_info.fingerprint, self.vocab_size, use_slices)
        if got is None:
            return False
        arrays, self._trie, self.token_slices = got
        self._byte_matrix, self._byte_lengths = arrays["byte_matrix"], arrays["byte_lengths"]
        self._byte_matrix.setflags(write=False)  # as TokenizerInfo.token_byte_matrix gives them
        self._byte_lengths.setflags(write=False)
        self._row_ids, self._trie_pos, self._lex_order = arrays["row_ids"], arrays["trie_pos"], arrays["lex_order"]
        return True

    def _warm_up(self) -> None:
        """Run the kernels of a regular grammar's rows once on a one-state automaton, so that numba
        loads them (from its cache, or compiles them) now, not in a request's first mask; the
        pushdown kernels wait for the first context-free grammar (:meth:`warm_up_pushdown`)."""
        loop = np.zeros(256, np.int32)  # every byte leads back to state 0
        live = np.ones(1, np.int8)
        self.token_row(loop, 0, live)
        row = self.empty_words()
        compact = CompactRows(self.bitmask_words, 1, 1)  # a structural tag's rows, computed at compile time
        compact.add(0, row, True)
        compact.done().row(0)
        compact_words(row, index_type(self.bitmask_words), self.vocab_size, 0)  # a first visit's row packed
        self.shared_rows.warm_up()  # or, too dense, shared (CompiledGrammar._pack)
        every = self.every_token_words()  # read-only, as the lead-free set of grammars with token literals
        single_byte_rows(loop, np.zeros(1, np.int64), np.ones(1, np.bool_), self.stop_token_ids, every,
                         self.bitmask_words, *self.trie_arrays())
        narrow_byte(loop, 0, -1)  # a regular grammar's narrow states (RegularGrammar._write_new_row)
        narrow_row(loop, 0, -1, True, self.stop_token_ids, every, row,
                   index_type(self.bitmask_words), *self.trie_arrays())
        one = np.zeros(1, np.int32)  # a counted grammar's check (leapgen.compiler.compiled_counted), nothing to walk
        words, candidates = self.empty_words(), np.zeros(0, np.int32)
        words.flags.writeable = candidates.flags.writeable = False  # a cached row and a cached set, as there
        refuse_counted(words, 0, candidates, self.empty_words(), loop, one, one, one, np.zeros(1, np.int64),
                       np.zeros(1, np.int64), 0, 0, *self.token_rows())
        dead = np.full(256, -1, np.int32)  # near a count's hi: the trie walk, every first byte refused (~0.05 ms)
        self.counted_row(words, (dead, one, one, one, np.zeros(1, np.int64), np.zeros(1, np.int64)), 0, 0)
        mat, lens, _, _ = self.token_rows()
        count_bytes_in(mat[:1], lens[:1], np.zeros(256, np.bool_))  # the token sets' kernel, on one row
        self._pushdown_warm = False

    def warm_up_pushdown(self) -> None:
        """Load the kernels of context-free masks (once; see :meth:`_warm_up`). Idempotent."""
        if not self.use_trie or self._pushdown_warm:
            return
        loop = np.zeros(256, np.int32)
        live = np.ones(1, np.int8)
        one = self.empty_words()  # the first walkable token (none in a vocabulary of special tokens only)
        if len(self._row_ids):
            one[self._row_ids[0] >> 5] = np.uint32(1) << np.uint32(self._row_ids[0] & 31)
        self.lazy_token_walk(0, lambda state, byte: None, one)
        none = np.zeros(0, np.int32)
        automaton = (loop, np.ones(1, np.bool_), np.ones(1, np.bool_), np.zeros(2, np.int32), none, none,
                     np.zeros(0, np.bool_), np.zeros(0, np.bool_), np.zeros(1, np.int32), np.zeros(2, np.int32), none,
                     np.zeros(1, np.int32), np.ones((1, 256), np.bool_))
        self.frame_sets(automaton, 0, live)
        trie_kernels.chain_states(loop, 0, _ASCII, 1, 1)  # a frame's LOOP jump (_loop_target)
        self.candidate_walk(one)
        stacks = (np.zeros((1, 1), np.int32), np.ones(1, np.int32), np.zeros(1, np.bool_), np.ones(1, np.int32))
        self.pushdown_walk(automaton, stacks, 8, one)
        row = self.empty_words()
        pda_kernels.frame_walk_via(loop, 0, automaton[-2], automaton[-1], 0, row, row, _ASCII,
                                   *self.walk_records(self._trie, self._row_ids), self._trie[7], row, row)
        if self.default_slices.slices:  # a bounded slice from a frame that may leave its rule
            starts, *char_dfa = self.default_slices.char_dfas
            slice_leaves(loop, automaton[-2], 0, 1, self.new_slice_memo(1)[1], starts[0], *char_dfa)
        self._pushdown_warm = True

    def token_rank(self) -> np.ndarray:
        """int64 ``(vocab_size,)``: each token's rank in lexicographic order of its bytes (cached)."""
        got = self._rank
        if got is None:
            order = sorted(range(len(self._token_bytes)), key=self._token_bytes.__getitem__)
            got = np.empty(len(order), np.int64)
            got[order] = np.arange(len(order))
            self._rank = got
        return got

    def new_slice_memo(self, n_states: int, slices: SliceSet | None = None, side: bool = False) -> np.ndarray:
        """A fresh int32 ``(1 + n_slices, n_states)`` memo for :meth:`token_sets` and :meth:`frame_sets`
        (``slices``: the set they are given, default the vocabulary's); with ``side``, a few rows more: it
        keeps the characters' steps to several states too (see
        :func:`~leapgen.compiler.token_slices.first_slice`)."""
        return new_memo(n_states, len((slices or self.default_slices).slices), side)

    def with_free_text_slice(self, stops: frozenset) -> SliceSet:
        """The vocabulary's slices, the slice of every character but ``stops`` and those of JSON
        content (:meth:`_json_slices`) (cached, bounded).

        For the free text of a structural tag, ``stops`` holding the last character of each of its
        patterns: characters of the slice never complete a trigger or an excluded string, so from
        a free-text state every string of them stays free text and the slice applies (biggest,
        tried first), where no vocabulary slice does once a trigger lies ahead. Building it walks
        the vocabulary once (~0.2 s with 128k tokens); without the trie kernels (or slices), the
        vocabulary's set.
        """
        key = frozenset(stops)
        got = self._free_text.get(key)
        if got is None:
            if not self.token_slices:
                return self.default_slices
            node = ir.charset([(ord(c), ord(c)) for c in key], negate=True)
            free = build_slice(self._byte_matrix, self._byte_lengths, self._lex_order, self._row_ids,
                               self.bitmask_words, "free_text", node)
            # free text first (the biggest), then whitespace: a whitespace state stops at its slice
            # instead of trying every vocabulary slice (each a limit of 0 there)
            got = slice_set([*([free] if free is not None else []), *self._json_slices(), *self.token_slices])
            if len(self._free_text) >= MAX_FREE_TEXT_SLICES:
                self._free_text.clear()
            self._free_text[key] = got
        return got

    def trie_arrays(self) -> tuple:
        """The vocabulary trie's arrays and the token id of each of its rows, as the trie kernels
        take them (:mod:`leapgen.compiler.trie_kernels`; read-only; with the trie kernels only)."""
        return (*self._trie, self._row_ids)

    def ids_in_byte_order(self) -> np.ndarray | None:
        """The non-special tokens' ids sorted by their bytes (ties by id), as the index keeps them
        (read from its disk cache, not sorted again); None without the trie kernels.

        Returns
        -------
        numpy.ndarray or None
            int64, shape ``(n_tokens,)``: every id whose bytes are not empty, once. A fresh array.
        """
        if not self.use_trie:
            return None
        return self._row_ids[self._lex_order].astype(np.int64)

    def _json_slices(self) -> list[TokenSlice]:
        """The slices of :data:`~leapgen.compiler.token_slices.JSON_CONTENT_CLASSES`, built once (~0.03 s
        with 128k tokens): a structural tag's JSON content with flexible whitespace has a state per
        count of whitespace characters still allowed, which then takes its runs of whitespace
        tokens at once."""
        if self._json_content_slices is None:
            got = [build_slice(self._byte_matrix, self._byte_lengths, self._lex_order, self._row_ids,
                               self.bitmask_words, name, node) for name, node in JSON_CONTENT_CLASSES.items()]
            self._json_content_slices = [s for s in got if s is not None]
        return self._json_content_slices

    @functools.cached_property
    def _rows_of_tokens(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if hasattr(self, "_byte_matrix"):  # the trie's own (maybe read from the index cache)
            mat, lens, ids = self._byte_matrix, self._byte_lengths, self._row_ids
        else:
            mat, lens, ids = self.tokenizer_info.token_byte_matrix()
        row_of_id = np.full(self.vocab_size, -1, np.int32)
        row_of_id[ids] = np.arange(len(ids), dtype=np.int32)
        id_of_row = np.array(ids, np.int32)  # a copy: the trie's own row ids stay as they are
        for a in (row_of_id, id_of_row):
            a.flags.writeable = False
        return mat, lens, row_of_id, id_of_row

    def token_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The vocabulary's bytes for per-token walks (computed once; read-only).

        Returns
        -------
        byte_matrix : numpy.ndarray
            uint8 ``(rows, max_len)``, zero-padded (:meth:`TokenizerInfo.token_byte_matrix`).
        lengths : numpy.ndarray
            int32 ``(rows,)``: each row's byte length, non-increasing.
        row_of_id : numpy.ndarray
            int32 ``(vocab_size,)``: the row of each token id, ``-1`` for one without bytes.
        id_of_row : numpy.ndarray
            int32 ``(rows,)``: the token id of each row.
        """
        return self._rows_of_tokens

    def rows_longer_than(self, k: int) -> int:
        """How many tokens have more than ``k`` bytes: they are the first rows of :meth:`token_rows`."""
        counts = self._rows_longer
        return counts[k] if 0 <= k < len(counts) else (counts[0] if k < 0 else 0)

    @functools.cached_property
    def _rows_longer(self) -> list[int]:
        lengths = self.token_rows()[1]  # non-increasing
        return np.searchsorted(-lengths, -np.arange(self.max_token_bytes + 1), side="left").tolist()

    def token_set(self, key: tuple, make: Callable[[], np.ndarray]) -> np.ndarray:
        """``make()``'s array, made once per ``key`` for this vocabulary (a set of tokens: shared by
        every grammar, read-only; thread-safe)."""
        got = self._token_sets.get(key)
        if got is None:
            got = make()
            got.flags.writeable = False
            with self._sets_lock:
                self._token_sets[key] = got
        return got

    def _bitset_of_rows(self, rows: np.ndarray) -> np.ndarray:
        """uint32 bitset of the tokens of the byte-matrix rows where bool ``rows`` is set."""
        _, _, row_of_id, _ = self.token_rows()
        ids = np.flatnonzero(row_of_id >= 0)  # none in a vocabulary of special tokens only
        has = np.zeros(self.bitmask_words * 32, np.bool_)
        has[ids] = rows[row_of_id[ids]]
        return np.packbits(has, bitorder="little").view(np.uint32).copy()

    def every_token_words(self) -> np.ndarray:
        """uint32 bitset (read-only, cached) with every word all ones."""
        return self.token_set(("every",), lambda: np.full(self.bitmask_words, 0xFFFFFFFF, np.uint32))

    def tokens_longer_than(self, k: int) -> np.ndarray:
        """uint32 bitset (read-only, cached) of the tokens of more than ``k`` bytes."""
        k = max(int(k), 0)
        return self.token_set(("longer", k), lambda: self._bitset_of_rows(self.token_rows()[1] > k))

    def tokens_holding(self, byte_set: np.ndarray, count: int) -> np.ndarray:
        """uint32 bitset (read-only, cached) of the tokens holding at least ``count`` bytes that are
        in ``byte_set`` (bool ``(256,)``)."""
        def make() -> np.ndarray:
            mat, lens, _, _ = self.token_rows()
            return self._bitset_of_rows(count_bytes_in(mat, lens, np.ascontiguousarray(byte_set, np.bool_)) >= count)
        return self.token_set(("holding", np.packbits(byte_set).tobytes(), int(count)), make)

    def counted_row(self, words: np.ndarray, kernel_args: tuple, q: int, c: int) -> np.ndarray:
        """The tokens of ``words`` (uint32 bitset, not mutated) that a counted DFA takes from its state
        ``(q, c)``, walked over the vocabulary's trie (:func:`~leapgen.compiler.counted_kernels.counted_trie_allowed`);
        the tokens without bytes (special, stop) as ``words`` has them. ``kernel_args``: the
        :class:`~leapgen.automata.counted.CountedDfa`'s ``(byte_trans, item_to, end_to,
        boundary_region, lo, hi)``. Returns a fresh bitset (trie kernels only)."""
        allowed = self.empty_words()
        t = self._trie
        counted_trie_allowed(allowed, *kernel_args, q, c, self.max_token_bytes + 1, t[4], t[5], t[6], t[8], t[9],
                             t[10], self._row_ids)
        without_bytes = self.token_set(("without bytes",), lambda: ~self._bitset_of_rows(
            np.ones(len(self.token_rows()[1]), np.bool_)))
        return words & (allowed | without_bytes)

    def trie_nodes_within(self, depth: int) -> int:
        """How many nodes of the vocabulary's trie are ``depth`` bytes deep or less (its root included)."""
        nodes = self._trie_nodes_by_depth
        return int(nodes[min(max(depth, 0), len(nodes) - 1)])

    @functools.cached_property
    def _trie_nodes_by_depth(self) -> np.ndarray:
        return np.cumsum(np.bincount(self._trie[9]))

    @functools.cached_property
    def max_token_bytes(self) -> int:
        """The byte length of the vocabulary's longest token (0 for none)."""
        return max(map(len, self._token_bytes), default=0)

    def empty_words(self) -> np.ndarray:
        """A zeroed uint32 bitset of ``ceil(vocab_size / 32)`` words."""
        return np.zeros(self.bitmask_words, np.uint32)

    def _borrow_words(self) -> np.ndarray:
        """A zeroed bitset as :meth:`empty_words`, the calling thread's spare where it has one (taken from
        it): the caller keeps it, or gives it back all zeros (:meth:`_give_back_words`). A 16 KB bitset
        in memory the process had not touched costs ~10 µs of page faults (first-visit masks allocate
        little else)."""
        words = getattr(self._spare, "words", None)
        if words is None:
            return self.empty_words()
        self._spare.words = None
        return words

    def _give_back_words(self, words: np.ndarray) -> None:
        """Make ``words`` (all zeros, no other reference kept) the calling thread's spare."""
        self._spare.words = words

    def any_bits(self, words: np.ndarray) -> bool:
        """Whether uint32 bitset ``words`` has a bit set (a kernel where numba is: ``ndarray.any``
        costs ~4 µs on a 128k-token bitset)."""
        if words is self._no_words:
            return False
        return bool(pda_kernels.bitset_any(words)) if self.use_trie else bool(words.any())

    def token_sets(self, trans_flat: np.ndarray, state: int, state_class: np.ndarray,
                   slice_memo: np.ndarray | None = None,
                   slices: SliceSet | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Walk every token from ``state`` and sort them by where they end.

        Parameters
        ----------
        trans_flat : numpy.ndarray
            int32, ``(n_states * 256,)``: a byte DFA's transitions, ``-1`` dead.
        state : int
            Where each walk starts.
        state_class : numpy.ndarray
            int8, ``(n_states,)``: 1 or 2 for the set a token ending in that
            state goes to, 0 for neither.
        slice_memo : numpy.ndarray, optional
            From :meth:`new_slice_memo`, kept by the caller for this DFA and
            these classes (mutated: see
            :func:`~leapgen.compiler.token_slices.first_slice`); none: a
            fresh one for this call.
        slices : SliceSet, optional
            The slices to try (the memo's); default: the vocabulary's.

        Returns
        -------
        set_a, set_b : numpy.ndarray
            uint32 bitsets, ``(ceil(vocab_size / 32),)``: bit ``i % 32`` of
            word ``i // 32`` is set when token ``i`` ends in a class-1 (a) or
            class-2 (b) state. Fresh arrays (the caller may mutate them).

        Notes
        -----
        The first token slice (biggest first) that applies from ``state``
        supplies its tokens' bits at once, and the trie walk covers only the
        other tokens.
        """
        a, b = self.empty_words(), self.empty_words()
        if self.use_trie:
            trie, ids = self._trie, self._row_ids
            slices = slices or self.default_slices
            memo = self.new_slice_memo(len(state_class), slices) if slice_memo is None else slice_memo
            i, k, target = first_slice(trans_flat, state, state_class, memo, *slices.char_dfas)
            if i >= 0:
                words, sliced, sliced_ids = slices.slices[i].split(k)
                if words is not None:
                    (a if target == 1 else b)[:] = words
                trie, ids = sliced, (ids if sliced_ids is None else sliced_ids)
            trie_kernels.trie_walk(trans_flat, state, state_class, *trie, ids, a, b)
            return a, b
        ids, ends = self._column_walk(trans_flat, state)
        cls = state_class[ends]
        for words, c in ((a, 1), (b, 2)):
            chosen = ids[cls == c]
            np.bitwise_or.at(words, chosen >> 5, (np.uint32(1) << (chosen & 31).astype(np.uint32)))
        return a, b

    def token_row(self, trans_flat: np.ndarray, state: int, live: np.ndarray,
                  slice_memo: np.ndarray | None = None, slices: SliceSet | None = None,
                  out: np.ndarray | None = None) -> np.ndarray:
        """The tokens whose walk from ``state`` stays alive: :meth:`token_sets`'s first set for
        a ``live`` (int8, all ones) state class, in one kernel call. ``out``, or a fresh bitset.

        Parameters as :meth:`token_sets` (``slice_memo`` mutated), and:

        out : numpy.ndarray, optional
            uint32 ``(bitmask_words,)``, overwritten with the row (memory already touched: a fresh
            16 KB bitset costs ~10 µs of page faults here).

        Notes
        -----
        Unlike :meth:`frame_sets`, the walk never jumps to a LOOP state's row (a JSON string's
        escapes lead back to its body): the search for one (:meth:`_loop_target`) ran wherever no
        slice applies, found one rarely, and cost regular grammars' first visits more than the
        jumps saved (see ``benchmarks/README.md``, stop 43).
        """
        if not self.use_trie:
            words = self.token_sets(trans_flat, state, live, slice_memo, slices)[0]
            if out is None:
                return words
            out[:] = words
            return out
        if out is None:
            out = np.empty(self.bitmask_words, np.uint32)
        trie, ids, init = self._trie, self._row_ids, None
        slices = slices or self.default_slices
        memo = self.new_slice_memo(len(live), slices) if slice_memo is None else slice_memo
        i, k, _ = first_slice(trans_flat, state, live, memo, *slices.char_dfas)
        if i >= 0:
            init, sliced, sliced_ids = slices.slices[i].split(k)
            trie, ids = sliced, (ids if sliced_ids is None else sliced_ids)
        return trie_kernels.row_walk(trans_flat, state, live, self._no_words if init is None else init,
                                     init is not None, *self.walk_records(trie, ids), out)

    def walk_records(self, trie: tuple, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`~leapgen.compiler.trie_kernels.walk_records` of ``trie`` (the vocabulary's or a
        slice's) with the token ids ``ids`` of its rows, built at its first use (~4 ms with 128k
        tokens) and kept (~7 MB for the vocabulary's trie: 24 bytes a node, 4 a token);
        thread-safe."""
        key = (id(trie[0]), id(ids))
        got = self._records.get(key)
        if got is None:
            if len(self._records) >= MAX_WALK_RECORDS:  # free-text slices come and go (with_free_text_slice)
                self._records.clear()
            got = self._records[key] = (trie_kernels.walk_records(trie, ids), trie, ids)  # keeps the keys' arrays alive
        return got[0]

    def _loop_target(self, trans_flat: np.ndarray, state: int, live: np.ndarray, memo: np.ndarray,
                     slices: SliceSet, loops: LoopJumps, leave_row: np.ndarray) -> int:
        """The LOOP state a frame's walk jumps to from ``state`` (memoized in ``loops``), or -1: the
        first of the states its bytes of the slices' one-byte characters (``slices.any_class_byte``)
        reach (:func:`~leapgen.compiler.trie_kernels.chain_states`) that is one (met before, or checked
        now where it has enough live bytes) and cannot leave its rule (``leave_row`` < 0)."""
        got = loops.target.get(state)
        if got is None:
            got = -1
            for q in trie_kernels.chain_states(trans_flat, state, slices.any_class_byte, LOOP_JUMP_DEPTH,
                                               LOOP_JUMP_MIN_LIVE).tolist():
                if leave_row[q] >= 0:
                    continue
                if q not in loops.slice_of:
                    i, k, _ = first_slice(trans_flat, q, live, memo, *slices.char_dfas)
                    if i >= 0 and k == LOOP:
                        loops.slice_of[q] = slices.class_bytes[i]
                if q in loops.slice_of:
                    got = q
                    break
            loops.target[state] = got
        return got

    def frame_sets(self, automaton: tuple, state: int, live: np.ndarray, slice_memo: np.ndarray | None = None,
                   slices: SliceSet | None = None, loops: LoopJumps | None = None, sort_of: Callable | None = None,
                   out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        """Sort every token from a top frame of a pushdown automaton, the stack below unknown.

        Parameters
        ----------
        automaton : tuple of numpy.ndarray
            :attr:`Pda.walk_arrays <leapgen.automata.pda.Pda.walk_arrays>`
            (see :func:`~leapgen.compiler.pda_kernels.pda_walk`).
        state : int
            The frame's global state.
        live : numpy.ndarray
            int8, ``(n_states,)``, all ones (the token slices' state classes).
        slice_memo : numpy.ndarray, optional
            As :meth:`token_sets` (mutated).
        slices : SliceSet, optional
            As :meth:`token_sets`.
        loops, sort_of : optional
            As :meth:`token_row`'s ``loops`` and ``row_of``: ``sort_of(q)`` is the frame sort
            (a tuple that starts ``certain, uncertain, pushed``) of a LOOP state ``q`` that cannot
            leave its rule; where no slice applies, or a slice applies at any depth (``UNBOUNDED``,
            a string's first character) and leaves the tokens outside it, the walk jumps to it
            (:func:`~leapgen.compiler.pda_kernels.frame_walk_via`).
        out : numpy.ndarray, optional
            uint32 ``(ceil(vocab_size / 32),)``, overwritten with ``certain`` (memory already
            touched, such as a scratch row the caller packs: a fresh 16 KB bitset costs ~10 µs of
            page faults).

        Returns
        -------
        certain, uncertain : numpy.ndarray
            uint32 bitsets, ``(ceil(vocab_size / 32),)``: tokens the
            frame's rule (with its callees) consumes whole, valid whatever
            the stack below (``out`` where given); and tokens that may go on only after the rule
            returned, to be checked against the real stacks (a superset: where a token slice's
            characters die after a bounded count and the frame may leave its rule on the way, all of
            the slice's longer tokens, unrefined). Fresh, but for
            an ``uncertain`` found empty by the walk: the index's one shared
            empty bitset (read-only).
        pushed : int
            The most frames a certain token may push above the frame.
        """
        trans_flat, leave_row, leave_bytes = automaton[0], automaton[-2], automaton[-1]
        if not self.use_trie:
            certain, uncertain = self._frame_sets_columns(trans_flat, state, leave_row, leave_bytes)
            if out is not None:
                out[:] = certain
                certain = out
            return certain, uncertain, 0
        if out is None:
            certain = self.empty_words()
        else:
            certain = out
            certain[:] = 0
        uncertain = self._borrow_words()  # most frames' uncertain stays empty
        trie, ids = self._trie, self._row_ids
        slices = slices or self.default_slices
        memo = self.new_slice_memo(len(live), slices) if slice_memo is None else slice_memo
        jumped, maybe_uncertain, target, deferred = 0, False, -1, None
        jumps = loops is not None and sort_of is not None
        if narrow_byte(trans_flat, state, -1) > -2:
            # little text ahead (a key's letters): the walk reads one byte's subtree, where no slice or loop jump pays
            i, k, jumps = -1, 0, False
        else:
            i, k, _ = first_slice(trans_flat, state, live, memo, *slices.char_dfas)
        if i >= 0:
            if k == LOOP and leave_row[state] >= 0:
                k = UNBOUNDED  # the remainder trie walks from after the prefix, where other paths may be open
            if k == LOOP and loops is not None:
                loops.slice_of[state] = slices.class_bytes[i]
            words, sliced, sliced_ids = slices.slices[i].split(k)
            if words is not None:
                certain[:] = words
            # A bounded limit (1..MAX_SLICE_CHARS characters) says the slice's longer tokens die in the
            # rule's own DFA; here a token dying there is dead only if the frame could not leave the rule
            # (call or return) on the way, else uncertain (``s ::= [a-z] s``: one character, then a call).
            # So they are walked too: the whole trie, not the trie of the tokens outside the slice.
            if not 0 < k <= MAX_SLICE_CHARS:
                trie, ids = sliced, (ids if sliced_ids is None else sliced_ids)
                if k == UNBOUNDED and jumps:  # the outside tokens' walk may jump too (a string's first character)
                    target = self._loop_target(trans_flat, state, live, memo, slices, loops, leave_row)
            else:
                # the slice's tokens of more than k characters die in the rule: uncertain where the frame may
                # leave it on their way (a block of a long string returns at its end), else dead; only the
                # tokens outside are walked. Uncertain ones are left to the check on the real stacks, not
                # refined below: they are most of the vocabulary's (13-43k of Llama-3's 128k tokens), the
                # refinement took 3 ms a frame to keep them uncertain (the text after a block goes on), and
                # an uncertain set may hold more than the real stacks allow (they are checked there)
                starts, *char_dfa = slices.char_dfas
                leaves = slice_leaves(trans_flat, leave_row, state, k, memo[1 + i], starts[i], *char_dfa)
                if leaves >= 0:
                    if leaves:
                        deferred = slices.slices[i].every & ~words
                    trie, ids = sliced, (ids if sliced_ids is None else sliced_ids)
        elif jumps:
            target = self._loop_target(trans_flat, state, live, memo, slices, loops, leave_row)
        if target >= 0:
            loop_certain, loop_uncertain, jumped = sort_of(target)[:3]  # certain here too, as deep
            maybe_uncertain |= pda_kernels.frame_walk_via(
                trans_flat, state, leave_row, leave_bytes, target, loop_certain, loop_uncertain,
                loops.slice_of[target], *self.walk_records(trie, ids), trie[7], certain, uncertain)
        else:
            maybe_uncertain |= pda_kernels.frame_walk(trans_flat, state, leave_row, leave_bytes,
                                                      *self.walk_records(trie, ids), trie[7], certain, uncertain)
        if not (maybe_uncertain and self.any_bits(uncertain)):
            if deferred is not None:  # (disjoint from certain: the slice's tokens of more than k characters)
                uncertain |= deferred
                return certain, uncertain, jumped
            self._give_back_words(uncertain)
            return certain, self._no_words, jumped  # most frames: one shared empty bitset, not 16 KB each
        # refine: follow calls through the callees, with the stack below the frame unknown
        pos = self.candidate_positions(uncertain)
        stacks = (np.full((1, 1), state, np.int32), _ONE_FRAME, _CUT, _ONE_FRAME)
        through, after = self.empty_words(), self.empty_words()
        for mode, work in ((pda_kernels.FRAME_CONTEXT, CONTEXT_WORK_LIMIT), (pda_kernels.FRAME_RETURN, _NO_WORK_LIMIT)):
            status, pushed, _ = pda_kernels.pda_walk(*automaton, *stacks, _NO_DEPTH_LIMIT, work, mode, *self._trie,
                                                     self._row_ids, pos, uncertain, through, after)
            if status == pda_kernels.WALK_DONE:
                break
            through[:], after[:] = 0, 0
        certain |= through
        if status == pda_kernels.WALK_DONE:
            uncertain &= after
        # else (a walk outgrowing its buffers): every candidate stays uncertain, checked on the real stacks
        if deferred is not None:
            uncertain |= deferred
        uncertain &= ~certain
        return certain, uncertain, max(pushed, jumped)

    def _frame_sets_columns(self, trans_flat: np.ndarray, state: int, leave_row: np.ndarray,
                            leave_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`frame_sets` without the trie kernels (certain and uncertain
        tokens; a coarser split, as exact in the end): a token is certain when
        its bytes stay inside the frame's own rule, uncertain when it dies
        there after it could have left the rule (call or return). The column
        walk over a table of three copies of the states (at the start; has
        not left yet; may have left) and an "unknown" sink."""
        trans = trans_flat.reshape(-1, 256).astype(np.int64)
        n = len(trans)
        alive = trans >= 0
        leave = np.zeros((n, 256), np.bool_)
        leave[leave_row >= 0] = leave_bytes[leave_row[leave_row >= 0]]
        table = np.empty((3 * n + 1, 256), np.int64)
        table[:n] = np.where(alive, n + trans, -1)
        table[n:2 * n] = np.where(alive, np.where(leave, 2 * n, n) + trans, np.where(leave, 3 * n, -1))
        table[2 * n:3 * n] = np.where(alive, 2 * n + trans, 3 * n)
        table[3 * n] = 3 * n
        classes = np.concatenate((np.ones(3 * n, np.int8), [2])).astype(np.int8)
        return self.token_sets(table.astype(np.int32).reshape(-1), state, classes)

    def lazy_token_walk(self, start: Hashable, step: Callable[[Hashable, int], Hashable | None],
                        candidates: np.ndarray) -> np.ndarray:
        """Which candidate tokens an automaton known only by its step function lets through.

        For pushdown configurations, whose automaton is infinite: states are
        numbered as the walk meets them and ``step`` is called once per
        (state, byte) that a candidate's bytes need.

        Parameters
        ----------
        start : hashable
            The state before the token.
        step : callable
            ``step(state, byte) -> next state``, or None where ``byte`` is
            rejected (pure).
        candidates : numpy.ndarray
            uint32 ``(ceil(vocab_size / 32),)``: the tokens to check (not mutated).

        Returns
        -------
        numpy.ndarray
            uint32 bitset, a subset of ``candidates``: tokens whose every byte
            steps to a state (a fresh array).

        Notes
        -----
        With numba, a depth-first walk of the vocabulary trie
        (:func:`~leapgen.compiler.trie_kernels.lazy_trie_walk`) entering only
        subtrees that hold a candidate; it sets aside the pairs that need a
        transition not computed yet, they are computed here, and the walk
        resumes from those pairs. Without numba, the candidates in
        lexicographic order, each walked from the longest prefix it shares
        with the one before.
        """
        ids = np.flatnonzero(np.unpackbits(candidates.view(np.uint8), bitorder="little"))
        if not self.use_trie:
            return self._sorted_walk(start, step, ids)
        out = self.empty_words()
        pos = self._trie_pos[ids]
        pos = np.sort(pos[pos >= 0])
        states, numbers = [start], {start: 0}
        rows = np.full((64, 256), -2, np.int32)
        nodes, at = np.zeros(1, np.int32), np.zeros(1, np.int32)
        while True:
            nodes, at, need_state, need_byte = trie_kernels.lazy_trie_walk(
                rows, nodes, at, len(nodes), *self._trie, self._row_ids, pos, candidates, out)
            if not len(nodes):
                return out
            for q, byte in zip(need_state.tolist(), need_byte.tolist()):
                if rows[q, byte] != -2:
                    continue
                nxt = step(states[q], byte)
                if nxt is None:
                    rows[q, byte] = -1
                    continue
                n = numbers.get(nxt)
                if n is None:
                    n = numbers[nxt] = len(states)
                    states.append(nxt)
                rows[q, byte] = n
            if len(states) > len(rows):
                rows = np.concatenate((rows, np.full((max(len(rows), len(states) - len(rows)), 256), -2, np.int32)))
            nodes, at = nodes.copy(), at.copy()

    def accepted_past_return(self, trans_flat: np.ndarray, accepting: np.ndarray, top: int, below: int,
                             live: np.ndarray, memo: np.ndarray) -> np.ndarray | None:
        """Tokens that a parse stack surely accepts by leaving its top frame's rule: the tokens of a slice
        whose characters the top frame takes to its rule's end and the frame below goes on with.

        From ``top`` the slice has a bounded limit ``k`` (:mod:`~leapgen.compiler.token_slices`), the states
        its characters lead to are one chain and the ``k``-th is accepting, so every token of the slice
        takes ``k`` characters to the end of the rule, which may return there to ``below``; from
        ``below`` the same slice has limit ``k2`` in its own rule. The slice's tokens of ``k + 1`` to
        ``k + k2`` characters (at most :data:`MAX_SLICE_CHARS`; any number past a ``k2`` without bound)
        are then accepted: a string's block ends, and the caller goes on with the string
        (:mod:`leapgen.grammar.json.lengths`). A stack accepts more tokens than these, by other paths.

        Parameters
        ----------
        trans_flat, accepting : numpy.ndarray
            The pushdown automaton's byte transitions (int32 ``(n_states * 256,)``) and accepting states
            (bool ``(n_states,)``), over global states.
        top, below : int
            The stack's top two frames (global states).
        live, memo : numpy.ndarray
            As :meth:`frame_sets` (``memo`` mutated).

        Returns
        -------
        numpy.ndarray or None
            A fresh uint32 bitset ``(ceil(vocab_size / 32),)``, or None where the shape does not hold
            (or without the trie kernels). Pure but for ``memo``.
        """
        if not self.use_trie:
            return None
        slices = self.default_slices
        starts, *char_dfa = slices.char_dfas
        i, k, _ = first_slice(trans_flat, top, live, memo, starts, *char_dfa)
        if i < 0 or not 0 < k <= MAX_SLICE_CHARS:
            return None
        q, step = top, memo[1 + i]
        for _ in range(k):
            q = int(step[q])
            if q < 0:
                return None
        if not accepting[q]:
            return None
        j, k2, _ = first_slice(trans_flat, below, live, memo, starts, *char_dfa)
        if j != i or k2 <= 0:
            return None
        chosen = slices.slices[i]
        upto = chosen.every if k2 >= UNBOUNDED else chosen.upto[min(k + min(k2, MAX_SLICE_CHARS), MAX_SLICE_CHARS)]
        return upto & ~chosen.upto[k]

    def pushdown_walk(self, automaton: tuple, stacks: tuple, max_depth: int, candidates: np.ndarray,
                      max_work: int = 1_000_000, walk: tuple | None = None, out: np.ndarray | None = None,
                      ) -> tuple[np.ndarray | None, int, int]:
        """Which candidate tokens a pushdown configuration accepts, walked in one numba kernel.

        Parameters
        ----------
        automaton : tuple of numpy.ndarray
            As :meth:`frame_sets`.
        stacks : tuple of numpy.ndarray
            ``(frames, count, cut, depth)`` from :meth:`Pda.stack_arrays`.
        max_depth : int
            The deepest stack kept; deeper pushes are cut.
        candidates : numpy.ndarray
            uint32 ``(ceil(vocab_size / 32),)``: the tokens to check (not mutated).
        max_work : int
            Closure items computed before giving up.
        walk : tuple, optional
            :meth:`candidate_walk` of ``candidates``, if the caller keeps it
            (else the vocabulary's trie is walked).
        out : numpy.ndarray, optional
            uint32 bitset to set the accepted candidates' bits in (mutated; its
            other bits are left as they are); default a fresh zeroed one.

        Returns
        -------
        words : numpy.ndarray or None
            ``out`` (default: a fresh bitset holding a subset of ``candidates``), or None when
            the kernel gave up (a token pops below the frames given, or the
            work limit; ``out`` then holds some of the accepted bits): use
            :meth:`lazy_token_walk`. None too without numba.
        pushed, read : int
            What the result depends on (see
            :func:`~leapgen.compiler.pda_kernels.pda_walk`): the most frames
            pushed, and the frames of each stack read from the top.
        """
        if not self.use_trie:
            return None, 0, 0
        if walk is None:
            trie, ids, pos = self._trie, self._row_ids, self.candidate_positions(candidates)
        else:
            trie, ids, pos = walk
        if out is None:
            out = self.empty_words()
        status, pushed, read = pda_kernels.pda_walk(*automaton, *stacks, max_depth, max_work, pda_kernels.CHECK,
                                                    *trie, ids, pos, candidates, out, out)
        return (out if status == pda_kernels.WALK_DONE else None), pushed, read

    def candidate_positions(self, words: np.ndarray) -> np.ndarray:
        """int32, sorted: the trie positions of the tokens set in uint32 bitset ``words`` (trie kernels only)."""
        return pda_kernels.candidate_positions(words, self._trie_pos)

    def candidate_walk(self, words: np.ndarray, own_trie: bool = True) -> tuple | None:
        """What :meth:`pushdown_walk` walks to check the tokens set in uint32 bitset ``words``. Pure.

        Parameters
        ----------
        words : numpy.ndarray
            uint32 ``(ceil(vocab_size / 32),)``, not mutated.
        own_trie : bool
            A trie of only these tokens: a few kilobytes where the
            vocabulary's trie is tens of megabytes, so a walk stays in the
            CPU caches; ~15 µs + 0.1 µs a token to build, worth it for
            candidates checked again and again. Else the vocabulary's trie,
            with the tokens' positions in it.

        Returns
        -------
        tuple or None
            ``(trie arrays, row ids, positions)`` as
            :func:`~leapgen.compiler.pda_kernels.pda_walk` takes them; None
            without the trie kernels.
        """
        if not self.use_trie:
            return None
        if not own_trie:
            return self._trie, self._row_ids, self.candidate_positions(words)
        trie, rows, positions = pda_kernels.candidate_trie(words, self._trie_pos, self._trie[6], self._byte_matrix,
                                                           self._byte_lengths)
        return trie, self._row_ids[rows], positions

    def _sorted_walk(self, start: Hashable, step, ids: np.ndarray) -> np.ndarray:
        """:meth:`lazy_token_walk` without the trie kernels."""
        token_bytes = self._token_bytes
        if ids.size > 1:  # lexicographic order: consecutive tokens share prefixes, walked once
            ids = ids[np.argsort(self.token_rank()[ids], kind="stable")]
        prev = b""
        path = [start]  # path[i]: the state after prev[:i]
        dead_at = -1  # prev was rejected at byte dead_at (path[dead_at] is the last live state)
        allowed = []
        for t in ids.tolist():
            tb = token_bytes[t]
            n = min(len(tb), len(prev))
            c = 0
            while c < n and tb[c] == prev[c]:
                c += 1
            prev = tb
            if 0 <= dead_at < c:
                continue  # shares the rejected prefix
            del path[c + 1:]
            dead_at = -1
            q = path[c]
            for i in range(c, len(tb)):
                q = step(q, tb[i])
                if q is None:
                    dead_at = i
                    break
                path.append(q)
            else:
                allowed.append(t)
        out = self.empty_words()
        if allowed:
            got = np.array(allowed, np.int64)
            np.bitwise_or.at(out, got >> 5, np.uint32(1) << (got & 31).astype(np.uint32))
        return out

    def _column_walk(self, trans_flat: np.ndarray, state: int) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.token_ids)
        pos = np.arange(n)
        st = np.full(n, state, np.int64)
        for c, limit in enumerate(self.longer_than):
            k = int(np.searchsorted(pos, limit))
            if k == 0:
                break
            nxt = trans_flat[st[:k] * 256 + self.columns[c][pos[:k]]]
            alive = nxt >= 0
            if alive.all():
                st[:k] = nxt
            else:
                st = np.concatenate((nxt[alive], st[k:]))
                pos = np.concatenate((pos[:k][alive], pos[k:]))
        return self.token_ids[pos], st

    def set_stop_bits(self, words: np.ndarray, allow: bool) -> None:
        """Set (``allow``) or clear the stop tokens' bits in ``words`` (mutates)."""
        for w, bits in self._stop_words:
            if allow:
                words[w] |= bits
            else:
                words[w] &= ~bits

    def any_stop_bits(self, words: np.ndarray) -> bool:
        """Whether bitset ``words`` allows a stop token."""
        return any(words[w] & bits for w, bits in self._stop_words)

    def allows_everything(self, words: np.ndarray) -> bool:
        """Whether bitset ``words`` allows every id below ``vocab_size``."""
        full, rest = divmod(self.vocab_size, 32)
        if full and words[0] != np.uint32(0xFFFFFFFF):  # most rows: no pass over the whole bitset
            return False
        if not (words[:full] == np.uint32(0xFFFFFFFF)).all():
            return False
        return rest == 0 or (int(words[full]) & ((1 << rest) - 1)) == (1 << rest) - 1
