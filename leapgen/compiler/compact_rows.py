"""Compact bitmask rows: every state's token bitmask row of a grammar, kept in little memory.

After xgrammar's *adaptive token mask cache* (per state, the accepted or the rejected tokens,
whichever are fewer; Dong et al., "XGrammar: Flexible and Efficient Structured Generation Engine
for Large Language Models", 2024), at the granularity of the row's 32-bit
words: per state, the words that differ from a base word (all zeros, or all ones where most tokens
are allowed), with their indices. A JSON state's row of a few hundred tokens takes ~1-2 KB instead
of 16 KB (Llama-3's 128k tokens), and is expanded back into a full row in about a microsecond, so
a grammar can compute its costly states' rows at compile time (see
:meth:`~leapgen.compiler.compiled.RegularGrammar.precompute_rows`) and its matchers do not walk the
vocabulary when such a state is first visited.
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.jit import njit, njit_inline
from leapgen.compiler.trie_kernels import WALK_DEPTH, _deeper, _grow

_FULL = np.uint32(0xFFFFFFFF)


def index_type(n_words: int) -> np.ndarray:
    """An empty array of the dtype that indexes a row of ``n_words`` words in :func:`compact_words`
    (uint16 where it fits; numba specializes on it, so every caller passes this)."""
    return np.zeros(0, np.uint16 if n_words <= 1 << 16 else np.int32)


@njit
def compact_words(words, index_dtype, vocab_size=0, max_listed=-1):
    """The words of ``words`` (uint32) that differ from its base word: ``(idx, val, ones, every,
    packed)``, fresh arrays of their indices (of ``index_dtype``'s type) and values, whether the
    base is all ones (where more words are all ones than all zeros; else the base is zero), whether
    the bits of all ``vocab_size`` tokens are set (False for ``vocab_size`` 0), and whether the
    arrays hold the row: False (both empty, not filled) where more than ``max_listed`` words differ
    (``max_listed`` >= 0; -1: no bound)."""
    zeros, ones = 0, 0
    for w in range(words.shape[0]):
        x = words[w]
        if x == 0:
            zeros += 1
        elif x == _FULL:
            ones += 1
    full = ones > zeros
    base = _FULL if full else np.uint32(0)
    n = words.shape[0] - (ones if full else zeros)
    packed = max_listed < 0 or n <= max_listed
    if not packed:
        n = 0
    idx = np.empty(n, index_dtype.dtype)
    val = np.empty(n, np.uint32)
    k = 0
    for w in range(words.shape[0] if packed else 0):
        if words[w] != base:
            idx[k] = w
            val[k] = words[w]
            k += 1
    whole = vocab_size // 32
    every = vocab_size > 0 and ones >= whole
    if every:
        for w in range(whole):
            if words[w] != _FULL:
                every = False
                break
    rest = vocab_size % 32
    if every and rest:
        tail = (np.uint32(1) << np.uint32(rest)) - np.uint32(1)
        every = (words[whole] & tail) == tail
    return idx, val, full, every, packed


@njit
def row_hash(words, salt):
    """A 64-bit hash of the row ``words`` (uint32): the sum of each word times its position's
    ``salt`` (uint64, random and odd, at least as long), modulo 2**64 (a word's change moves it by a
    multiple of that position's salt; ~1 µs for 4,008 words). Not collision-free: a caller that
    shares rows by hash compares them (:func:`matches_whole`)."""
    total = np.uint64(0)
    for w in range(words.shape[0]):
        total += np.uint64(words[w]) * salt[w]
    return total ^ (total >> np.uint64(29))


@njit
def matches_whole(words, row):
    """Whether the rows ``words`` and ``row`` (uint32, the same length) are equal."""
    differ = np.uint32(0)
    for w in range(words.shape[0]):
        differ |= words[w] ^ row[w]
    return differ == 0


@njit
def expand_words(out, ones, idx, val, lo, hi):
    """Write a row into ``out`` (uint32, mutated): the base (all ones where ``ones``, else zeros)
    with the words ``idx[lo:hi]`` set to ``val[lo:hi]``."""
    out[:] = _FULL if ones else np.uint32(0)
    for k in range(lo, hi):
        out[idx[k]] = val[k]


@njit
def single_byte_rows(trans_flat, states, accepting, stop_ids, allowed_words, n_words, child_start, child_end,
                     child_byte, child_node, node_tok_start, node_tok_end, node_toks, sub_tok_end, node_byte,
                     node_depth, node_end, token_ids):
    """The rows of DFA states from which exactly one byte may follow (forced text: a tag's begin and
    end, a JSON key), in one call: the trie walk of :func:`~leapgen.compiler.trie_kernels.trie_walk`
    (every state live) entered only at the root's child of that byte, keeping the tokens set in
    ``allowed_words`` (uint32 bitset: all ones, or the tokens without a 0xFF byte where the grammar
    has token literals), plus the stop tokens where the state accepts. Returns ``(offsets, idx, val, count)``: int64 ``(len(states) + 1,)`` and state
    ``i``'s nonzero words ``idx[offsets[i]:offsets[i + 1]]`` (int32) with their values ``val``
    (uint32), zero the base word; int64 ``count``: the tokens each row allows."""
    scratch = np.zeros(n_words, np.uint32)
    touched = np.empty(n_words, np.int32)
    offsets = np.zeros(states.shape[0] + 1, np.int64)
    count = np.zeros(states.shape[0], np.int64)
    idx = np.empty(max(1024, 4 * states.shape[0]), np.int32)
    val = np.empty(idx.shape[0], np.uint32)
    state_at = np.empty(WALK_DEPTH, np.int32)
    pos = 0
    for i in range(states.shape[0]):
        s = states[i]
        base = s * 256
        b = 0
        while b < 256 and trans_flat[base + b] < 0:
            b += 1
        n_touched, state_at = _walk_under_byte(trans_flat, s, b, allowed_words, scratch, touched, 0, state_at,
                                               child_start, child_end, child_byte, child_node, node_tok_start,
                                               node_tok_end, node_toks, node_byte, node_depth, node_end, token_ids)
        if accepting[s]:
            for t in stop_ids:
                n_touched = _set_bit(scratch, touched, n_touched, t)
        if pos + n_touched > idx.shape[0]:
            idx, val = _grow(idx), _grow(val)
            while pos + n_touched > idx.shape[0]:
                idx, val = _grow(idx), _grow(val)
        for j in range(n_touched):
            w = touched[j]
            x = scratch[w]
            idx[pos] = w
            val[pos] = x
            scratch[w] = 0
            pos += 1
            count[i] += _popcount(x)
        offsets[i + 1] = pos
    return offsets, idx[:pos], val[:pos], count


@njit
def narrow_byte(trans_flat, state, lead):
    """Whether the text ahead of DFA state ``state`` is narrow: -1 where no byte may follow, the byte
    where exactly one may (not ``lead``, a token literal's lead byte; -1: none) and at most one after
    it (a JSON key's letters, ``":``, a closing ``"}``), else -2. A state whose one byte opens a wide
    text, such as a string's quote, is not narrow: every token that starts with the quote goes on,
    and the ordinary walk serves it (a token slice where one applies; in a context-free frame, a jump
    to the string body's LOOP state: :meth:`TokenIndex.frame_sets
    <leapgen.compiler.token_index.TokenIndex.frame_sets>`)."""
    base = state * 256
    b = -1
    for c in range(256):
        if trans_flat[base + c] >= 0:
            if b >= 0 or c == lead:
                return -2
            b = c
    if b >= 0:
        after = trans_flat[base + b] * 256
        seen = 0
        for c in range(256):
            if trans_flat[after + c] >= 0:
                seen += 1
                if seen > 1:
                    return -2
    return b


@njit
def narrow_row(trans_flat, state, b, accepting, stop_ids, allowed_words, out, index_dtype, child_start, child_end,
               child_byte, child_node, node_tok_start, node_tok_end, node_toks, sub_tok_end, node_byte, node_depth,
               node_end, token_ids):
    """The row of DFA state ``state`` whose text ahead is narrow (:func:`narrow_byte` gave ``b``): the
    walk of :func:`single_byte_rows` under the root's child of byte ``b`` only (-1: none), so the row
    costs its few tokens, not a pass over the whole vocabulary. ``out`` (uint32 ``(n_words,)``) is
    overwritten with the row; the tokens kept are those set in ``allowed_words`` (as
    :func:`single_byte_rows`), plus ``stop_ids`` where ``accepting``. Returns ``(idx, val, count)``:
    the row's nonzero words in increasing order (``idx`` of ``index_dtype``'s type, ``val`` uint32,
    zero the base word) and the tokens it allows."""
    out[:] = 0
    touched = np.empty(out.shape[0], np.int32)
    n_touched = 0
    if b >= 0:
        n_touched, _ = _walk_under_byte(trans_flat, state, b, allowed_words, out, touched, 0,
                                        np.empty(WALK_DEPTH, np.int32), child_start, child_end, child_byte,
                                        child_node, node_tok_start, node_tok_end, node_toks, node_byte,
                                        node_depth, node_end, token_ids)
    if accepting:
        for t in stop_ids:
            n_touched = _set_bit(out, touched, n_touched, t)
    order = np.sort(touched[:n_touched])
    idx = np.empty(n_touched, index_dtype.dtype)
    val = np.empty(n_touched, np.uint32)
    count = 0
    for j in range(n_touched):
        idx[j] = order[j]
        val[j] = out[order[j]]
        count += _popcount(val[j])
    return idx, val, count


@njit_inline
def _walk_under_byte(trans_flat, s, b, allowed_words, scratch, touched, n_touched, state_at, child_start,
                     child_end, child_byte, child_node, node_tok_start, node_tok_end, node_toks, node_byte,
                     node_depth, node_end, token_ids):
    """Set in ``scratch`` the bits of the tokens of byte ``b``'s subtree of the trie whose walk from
    DFA state ``s`` stays alive (every state live) and that ``allowed_words`` holds, noting new words
    in ``touched`` (:func:`_set_bit`). Returns the count of touched words and ``state_at`` (grown
    where the trie is deeper)."""
    for k in range(child_start[0], child_end[0]):
        if child_byte[k] != b:
            continue
        top = child_node[k]
        state_at[0] = s
        v = top
        while v < node_end[top]:
            d = node_depth[v]
            nxt = trans_flat[state_at[d - 1] * 256 + node_byte[v]]
            if nxt < 0:
                v = node_end[v]
                continue
            state_at = _deeper(state_at, d)
            state_at[d] = nxt
            for j in range(node_tok_start[v], node_tok_end[v]):
                t = token_ids[node_toks[j]]
                if (allowed_words[t >> 5] >> np.uint32(t & 31)) & np.uint32(1):
                    n_touched = _set_bit(scratch, touched, n_touched, t)
            v += 1
        break
    return n_touched, state_at


@njit_inline
def _popcount(x):
    """The set bits of the uint32 ``x``."""
    n = 0
    while x:
        x &= x - np.uint32(1)
        n += 1
    return n


@njit
def _set_bit(scratch, touched, n_touched, t):
    """Set token ``t``'s bit in ``scratch``, noting its word in ``touched`` when it was zero; returns
    the new count of touched words."""
    w = t >> 5
    if scratch[w] == 0:
        touched[n_touched] = w
        n_touched += 1
    scratch[w] |= np.uint32(1) << np.uint32(t & 31)
    return n_touched


class CompactRows:
    """Rows of some states of an automaton whose states are ``0 .. n_states - 1``, added once each
    (:meth:`add`), then read (:meth:`row`). Immutable once :meth:`done` returned; reads are
    thread-safe.

    Parameters
    ----------
    n_words : int
        Words of a row, ``ceil(vocab_size / 32)``.
    n_states : int
        States of the automaton.
    n_rows : int
        Rows to be added.
    """

    def __init__(self, n_words: int, n_states: int, n_rows: int):
        self.n_words = n_words
        self._slot = np.full(n_states, -1, np.int32)  # state -> its row's slot, -1: none
        self._offsets = np.zeros(n_rows + 1, np.int64)
        self._ones = np.zeros(n_rows, np.bool_)
        self._need_apply = np.zeros(n_rows, np.bool_)
        self._index_dtype = index_type(n_words)
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._idx = self._val = None

    def add(self, state: int, words: np.ndarray, need_apply: bool) -> None:
        """Keep the row of ``state``: uint32 ``words`` ``(n_words,)`` (read, not kept) and its
        need_apply flag (False: every token allowed). Mutates the store.

        Raises
        ------
        ValueError
            ``state`` was added before, or more rows than ``n_rows``.
        """
        slot = len(self._parts)
        if self._slot[state] >= 0 or slot == len(self._ones):
            raise ValueError(f"row of state {state} added twice or past {len(self._ones)} rows")
        idx, val, ones, _, _ = compact_words(words, self._index_dtype)
        self._parts.append((idx, val))
        self._slot[state] = slot
        self._offsets[slot + 1] = self._offsets[slot] + len(idx)
        self._ones[slot] = ones
        self._need_apply[slot] = need_apply

    def done(self) -> CompactRows:
        """Join the rows into two arrays (every one of ``n_rows`` must have been added); returns self."""
        if len(self._parts) != len(self._ones):
            raise ValueError(f"{len(self._parts)} of {len(self._ones)} rows added")
        self._idx = np.concatenate([p[0] for p in self._parts] or [self._index_dtype])
        self._val = np.concatenate([p[1] for p in self._parts] or [np.zeros(0, np.uint32)])
        self._parts = []
        return self

    def add_single_byte(self, states: np.ndarray, offsets: np.ndarray, idx: np.ndarray, val: np.ndarray,
                        need_apply: np.ndarray) -> None:
        """Keep the rows of ``states`` as :func:`single_byte_rows` gives them (zero base), with
        their need_apply flags (bool array). Mutates the store; raises as :meth:`add`."""
        first = len(self._parts)
        slots = first + np.arange(len(states))
        if len(states) and ((self._slot[states] >= 0).any() or slots[-1] >= len(self._ones)):
            raise ValueError(f"rows added twice or past {len(self._ones)} rows")
        self._slot[states] = slots
        self._offsets[first + 1:first + 1 + len(states)] = self._offsets[first] + offsets[1:]
        self._need_apply[slots] = need_apply
        self._parts.extend([(np.zeros(0, self._index_dtype.dtype), np.zeros(0, np.uint32))] * (len(states) - 1))
        if len(states):
            self._parts.append((idx.astype(self._index_dtype.dtype), val))

    def holds(self, state: int) -> bool:
        """Whether the row of ``state`` is kept."""
        return bool(self._slot[state] >= 0)

    def write(self, state: int, out: np.ndarray) -> bool | None:
        """Write the row of ``state`` into ``out`` (uint32 ``(n_words,)``, mutated) and return its
        need_apply flag; None (``out`` untouched) where not kept."""
        slot = self._slot[state]
        if slot < 0:
            return None
        expand_words(out, self._ones[slot], self._idx, self._val, self._offsets[slot], self._offsets[slot + 1])
        return bool(self._need_apply[slot])

    def row(self, state: int) -> tuple[np.ndarray, bool] | None:
        """A fresh uint32 row of ``state`` and its need_apply flag, None where not kept (pure)."""
        out = np.empty(self.n_words, np.uint32)
        need_apply = self.write(state, out)
        return None if need_apply is None else (out, need_apply)

    @property
    def nbytes(self) -> int:
        """Bytes the store holds."""
        held = sum(i.nbytes + v.nbytes for i, v in self._parts)
        if self._idx is not None:
            held += self._idx.nbytes + self._val.nbytes
        return int(self._slot.nbytes + self._offsets.nbytes + self._ones.nbytes + self._need_apply.nbytes + held)
