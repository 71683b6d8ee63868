"""Token slices: precomputed masks for the vocabulary's big, common subsets.

After llguidance's *slices* (``SlicedBiasComputer``: a JSON string body,
unbounded and with at most 10 or 30 characters), generalized to any count of
characters and to a few character classes. A slice is a character class
``C`` (e.g. the raw characters of a JSON string: no ``"``, ``\\``, C0
controls or DEL) and the tokens ``T`` made of characters of ``C`` only.
Built once per vocabulary: bitsets ``upto[k]`` of the tokens of ``T`` with at
most ``k <= MAX_SLICE_CHARS`` characters and ``every`` of all of ``T``; tries
of the tokens outside ``T``, of those outside ``upto[MAX]``, and of the
*remainders* of the tokens outside ``T`` (their bytes after their longest
prefix of whole characters of ``C``).

From a DFA state ``s`` let ``Q_j`` be the states reached by ``j`` characters
of ``C``; every state of ``Q_1, Q_2 ..`` must have one class (the set the
tokens go to). The slice applies with *limit*

- ``k <= MAX`` when every character of ``C`` is alive from every state of
  ``Q_0 .. Q_{k-1}`` and dies (at some byte) from every state of ``Q_k``:
  the tokens of ``T`` allowed are exactly ``upto[k]`` (a longer token has a
  prefix of ``k + 1`` characters, which dies);
- ``MORE``: alive through ``MAX`` characters, no fixpoint yet (a long
  ``maxLength``): ``upto[MAX]``, and the longer tokens are walked;
- ``UNBOUNDED``: the ``Q_j`` reach a fixpoint, every character alive: ``every``;
- ``LOOP``: every character leads back to ``s`` (a plain string body):
  ``every``, and a token outside ``T`` is alive iff its remainder is, so the
  remainder trie is walked (a few hundred live nodes inside a JSON string).

The mask is those bits plus a trie walk over the other tokens only. Where
some characters of ``C`` live and others die (a pattern, an escape) the
slice does not apply, and the next slice (a narrower class) or the whole
trie is tried: masks stay exact either way. The check costs a few
microseconds per character of depth, once per state (rows are cached by the
callers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leapgen.automata.dfa import compile_dfa
from leapgen.automata.jit import njit, njit_inline
from leapgen.compiler import trie_kernels
from leapgen.grammar import ir
from leapgen.grammar.regex import SPACE

_NOT_IN_JSON_STRINGS = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x7F)]
JSON_STRING_CHAR = ir.charset(_NOT_IN_JSON_STRINGS, negate=True)
"""Raw characters of a JSON string (llguidance's slice class: no quote, backslash, C0 control or DEL)."""

JSON_CONTENT_CLASSES = {
    "json_whitespace": ir.charset([(0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20)]),
}
"""Slices of JSON content built for structural tags only (see :meth:`TokenIndex.with_free_text_slice
<leapgen.compiler.token_index.TokenIndex.with_free_text_slice>`): whitespace. (A digits slice was
tried: it took string states whose walks jump to their body's row, and walked the vocabulary.)"""

SLICE_CHAR_CLASSES = {
    "json_string": JSON_STRING_CHAR,
    # ECMAScript '.' in a string pattern ("^.*@.*$"): no line terminators either
    "json_string_dot": ir.charset(_NOT_IN_JSON_STRINGS + [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)], negate=True),
    # no white space (``\S+``, ``[^\s]+``: ECMAScript's and Python's ``\s``, so either's ``\S`` holds it)
    "json_string_nonspace": ir.charset(_NOT_IN_JSON_STRINGS + list(SPACE) + [(0x85, 0x85)], negate=True),
    # RFC 3986 unreserved and sub-delims: a URI's host, path, query and fragment (format uri, URL patterns)
    "uri_chars": ir.charset([(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)] + [(ord(c), ord(c)) for c in "-._~!$&'()*+,;="]),
    # RFC 5322 atext: an e-mail's local part (format email, dot-atom)
    "email_atext": ir.charset([(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)]
                              + [(ord(c), ord(c)) for c in "!#$%&'*+/=?^_`{|}~-"]),
    # words: names, titles ([A-Za-z ]+)
    "alpha_space": ir.charset([(0x20, 0x20), (0x41, 0x5A), (0x61, 0x7A)]),
    # identifiers, keys, slugs, hosts: patterns such as [A-Za-z_][A-Za-z0-9_-]* or [a-z0-9.-]+
    "alnum": ir.charset([(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)]),
    "lower_alnum": ir.charset([(0x30, 0x39), (0x61, 0x7A)]),
    # lowercase words ([a-z]+, [a-z]{1,12}): sentences, slugs, enum-like patterns
    "lower": ir.charset([(0x61, 0x7A)]),
}
"""The slices built for every vocabulary (name -> one character). Each state
uses its first applicable slice, biggest first; a slice applies where its
class is a subset of the characters that live, so the narrower classes serve
states whose characters are fewer."""

MAX_SLICE_CHARS = 32
"""The deepest exact limit (characters); deeper, the check stops (see ``MORE``)."""
MORE, UNBOUNDED, LOOP = MAX_SLICE_CHARS + 1, MAX_SLICE_CHARS + 2, MAX_SLICE_CHARS + 3
"""Limits beyond ``MAX_SLICE_CHARS``: alive that deep (no more known); alive at any depth; and
alive at any depth with every character leading back to the state itself (``Q_1 = {s}``)."""

#: :func:`slice_limit` finds a state among those it met by a scan up to this many, by marks per state beyond.
MARK_AFTER = 64

MIN_SLICE_TOKENS = 256
"""A slice with fewer tokens than this saves less than its check costs: not built."""


@dataclass(frozen=True, eq=False)
class TokenSlice:
    """One slice of one vocabulary (immutable, thread-safe).

    Attributes
    ----------
    name : str
        Its key in :data:`SLICE_CHAR_CLASSES`.
    upto : numpy.ndarray
        uint32 ``(MAX_SLICE_CHARS + 1, ceil(vocab_size / 32))``, read-only:
        row ``k`` is the bitset of the slice's tokens of at most ``k``
        characters (row 0 is empty).
    every : numpy.ndarray
        uint32 ``(ceil(vocab_size / 32),)``, read-only: all the slice's tokens.
    count : int
        Tokens in the slice.
    char_dfa : tuple of numpy.ndarray
        The one-character DFA of ``C`` as int32 CSR arrays ``(edge_start,
        edge_end, edge_byte, edge_next)`` and bool ``complete`` per state;
        state 0 is the start, complete states have no edges.
    outside_trie : tuple of numpy.ndarray
        :func:`~leapgen.compiler.trie_kernels.build_trie` over the tokens
        outside the slice; for a small slice (under 3/4 of the vocabulary)
        over those outside ``upto[MAX_SLICE_CHARS]``.
    rest_trie : tuple of numpy.ndarray
        The same over the tokens outside ``upto[MAX_SLICE_CHARS]``: for a
        small slice ``outside_trie`` itself (its other tries would be
        near-complete copies).
    loop_trie : tuple of numpy.ndarray or None
        The trie of the remainders of the tokens outside the slice, for
        limit ``LOOP``; None for a small slice.
    loop_ids : numpy.ndarray or None
        int32: the token id of each of ``loop_trie``'s rows.
    """

    name: str
    upto: np.ndarray
    every: np.ndarray
    count: int
    char_dfa: tuple
    outside_trie: tuple
    rest_trie: tuple
    loop_trie: tuple | None
    loop_ids: np.ndarray | None

    def limit(self, trans_flat: np.ndarray, state: int, state_class: np.ndarray) -> tuple[int, int]:
        """Whether and how the slice applies from ``state``.

        Parameters as :meth:`TokenIndex.token_sets`.

        Returns
        -------
        k, target : int, int
            ``k = -1``: the slice does not apply. Else the limit (0 to
            ``MAX_SLICE_CHARS``, ``MORE``, ``UNBOUNDED`` or ``LOOP``; see the
            module docstring), the slice's tokens allowed ending in class
            ``target`` (0 when ``k == 0``).
        """
        return slice_limit(trans_flat, state, state_class, 0, *self.char_dfa,
                           np.full(len(state_class), -2, np.int32), np.zeros(0, np.int32))[:2]

    def split(self, k: int) -> tuple[np.ndarray | None, tuple, np.ndarray | None]:
        """For limit ``k >= 0``: the slice's allowed tokens (a read-only
        bitset, None for none), the trie left to walk, and the token id of
        each of its rows (None: the vocabulary's rows)."""
        if k == LOOP and self.loop_trie is not None:
            return self.every, self.loop_trie, self.loop_ids
        if k >= UNBOUNDED:
            return self.every, self.outside_trie, None
        if k == MORE:
            return self.upto[MAX_SLICE_CHARS], self.rest_trie, None
        return (self.upto[k] if k else None), self.outside_trie, None


def build_slices(byte_matrix: np.ndarray, lengths: np.ndarray, lex_order: np.ndarray, row_ids: np.ndarray,
                 bitmask_words: int) -> list[TokenSlice]:
    """Build the slices of :data:`SLICE_CHAR_CLASSES` for one vocabulary.

    Parameters as :func:`build_slice`.

    Returns
    -------
    list of TokenSlice
        Those with at least :data:`MIN_SLICE_TOKENS` tokens, biggest first.
    """
    got = [build_slice(byte_matrix, lengths, lex_order, row_ids, bitmask_words, name, node)
           for name, node in SLICE_CHAR_CLASSES.items()]
    return sorted((s for s in got if s is not None), key=lambda s: -s.count)


def build_slice(byte_matrix: np.ndarray, lengths: np.ndarray, lex_order: np.ndarray, row_ids: np.ndarray,
                bitmask_words: int, name: str, char_class: ir.Node) -> TokenSlice | None:
    """Build the slice of ``char_class`` for one vocabulary.

    Parameters
    ----------
    byte_matrix : numpy.ndarray
        uint8 ``(n_rows, max_len)``: token bytes, zero-padded.
    lengths : numpy.ndarray
        int32 ``(n_rows,)``: bytes per row.
    lex_order : numpy.ndarray
        int32 ``(n_rows,)``: rows in lexicographic order of their bytes.
    row_ids : numpy.ndarray
        int32 ``(n_rows,)``: token id of each row.
    bitmask_words : int
        Words of a vocabulary bitset.
    name : str
        The slice's name.
    char_class : ir.Node
        One character (a prefix-free byte language, e.g. an ``ir.charset``).

    Returns
    -------
    TokenSlice or None
        None when fewer than :data:`MIN_SLICE_TOKENS` tokens are in it.
    """
    dfa = compile_dfa(char_class)
    edges = _csr_edges(dfa)
    chars, size = char_prefix(*edges, byte_matrix, lengths)
    inside = size == lengths
    chars = np.where(inside, chars, 0)
    count = int(np.count_nonzero(inside))
    if count < MIN_SLICE_TOKENS:
        return None
    upto = np.zeros((MAX_SLICE_CHARS + 2, bitmask_words), np.uint32)  # the last row: every token
    for k in range(1, MAX_SLICE_CHARS + 2):
        ids = row_ids[(chars == k) if k <= MAX_SLICE_CHARS else (chars > MAX_SLICE_CHARS)].astype(np.int64)
        np.bitwise_or.at(upto[k], ids >> 5, np.uint32(1) << (ids & 31).astype(np.uint32))
    np.bitwise_or.accumulate(upto, axis=0, out=upto)
    upto.setflags(write=False)
    rest = trie_kernels.build_trie(byte_matrix, lengths, lex_order[(~inside | (chars > MAX_SLICE_CHARS))[lex_order]])
    if count * 4 < len(lengths) * 3:
        # a small slice: its other tries would be near-complete copies of this one, which serves as the
        # outside trie too (the slice's few tokens of more than MAX_SLICE_CHARS characters in it are
        # walked exactly, as every token walked is)
        return TokenSlice(name, upto[:-1], upto[-1], count, edges, rest, rest, None, None)
    outside = trie_kernels.build_trie(byte_matrix, lengths, lex_order[~inside[lex_order]])
    loop_trie, loop_ids = _remainder_trie(byte_matrix, lengths, row_ids, np.flatnonzero(~inside), size)
    return TokenSlice(name, upto[:-1], upto[-1], count, edges, outside, rest, loop_trie, loop_ids)


def _remainder_trie(byte_matrix, lengths, row_ids, rows, prefix_size) -> tuple[tuple, np.ndarray]:
    """The trie of ``rows``' remainders (the bytes after the first
    ``prefix_size[row]``) and the token id of each of its rows."""
    offset = prefix_size[rows]
    size = (lengths[rows] - offset).astype(np.int32)
    width = int(size.max()) if len(size) else 1
    cols = np.minimum(offset[:, None] + np.arange(width), byte_matrix.shape[1] - 1)
    mat = np.where(np.arange(width) < size[:, None], byte_matrix[rows[:, None], cols], 0).astype(np.uint8)
    order = np.lexsort((size,) + tuple(mat[:, c] for c in reversed(range(width))))  # lexicographic
    return trie_kernels.build_trie(mat, size, order.astype(np.int32)), row_ids[rows].astype(np.int32)


def _csr_edges(dfa) -> tuple:
    """A one-character DFA (start 0) as CSR edge arrays plus ``complete``."""
    live = dfa.trans >= 0
    if dfa.start != 0 or live[dfa.accepting].any():
        raise ValueError("a slice's character class must be prefix-free (one character)")
    counts = np.count_nonzero(live, axis=1).astype(np.int32)
    end = np.cumsum(counts, dtype=np.int32)
    states, byte = np.nonzero(live)
    return (end - counts, end, byte.astype(np.int32), dfa.trans[states, byte].astype(np.int32),
            dfa.accepting.astype(np.bool_))


@njit
def char_prefix(edge_start, edge_end, edge_byte, edge_next, complete, byte_matrix, lengths):
    """The longest prefix of whole characters of the class of each row.

    Returns
    -------
    chars, size : numpy.ndarray
        int32 ``(n_rows,)``: its characters and its bytes (``size ==
        lengths`` where the whole row is characters of the class).
    """
    n = lengths.shape[0]
    chars = np.zeros(n, np.int32)
    size = np.zeros(n, np.int32)
    for r in range(n):
        p = 0
        for c in range(lengths[r]):
            b = byte_matrix[r, c]
            nxt = -1
            for k in range(edge_start[p], edge_end[p]):
                if edge_byte[k] == b:
                    nxt = edge_next[k]
                    break
            if nxt < 0:
                break
            if complete[nxt]:
                chars[r] += 1
                size[r] = c + 1
                p = 0
            else:
                p = nxt
    return chars, size


@njit_inline
def _index_of(values, n, x):
    """Position of ``x`` in ``values[:n]``, or -1 (a linear scan: the sets here are small)."""
    for i in range(n):
        if values[i] == x:
            return i
    return -1


@njit_inline
def _append(values, n, x):
    """``values`` with ``x`` at position ``n`` (grown when full)."""
    if n == values.shape[0]:
        values = np.concatenate((values, np.empty_like(values)))
    values[n] = x
    return values


@njit_inline
def _has_pair(pair_s, pair_p, n, s, p):
    """Whether ``(s, p)`` is among the first ``n`` pairs (a linear scan: a character's pairs are few)."""
    for i in range(n):
        if pair_s[i] == s and pair_p[i] == p:
            return True
    return False


@njit
def slice_leaves(trans_flat, leave_row, q, k, step, p0, edge_start, edge_end, edge_byte, edge_next, complete):
    """Whether a token of a slice, from DFA state ``q`` with bounded limit ``k``
    (``1 <= k <= MAX_SLICE_CHARS``), may leave the rule on its way: 1 when a
    state its bytes reach, after the first byte and through the byte that dies
    in character ``k + 1``, has a leave row (``leave_row >= 0``: a call or a
    return, a superset of the bytes that leave), 0 when none has, -1 when the
    characters' states are not one chain (``step``: the state one character of
    the slice leads to from each state, ``< 0`` for none or unknown; row
    ``1 + i`` of :func:`first_slice`'s memo after the check of slice ``i``).
    The one-character DFA from ``p0`` as :func:`slice_limit`."""
    pair_s = np.empty(64, np.int64)
    pair_p = np.empty(64, np.int64)
    for j in range(k + 1):
        pair_s[0], pair_p[0] = q, p0
        n_pairs, head = 1, 0
        last_s, last_p = -1, -1  # consecutive bytes mostly lead to the same pair: skip the scans
        while head < n_pairs:
            s, p = pair_s[head], pair_p[head]
            head += 1
            for e in range(edge_start[p], edge_end[p]):
                ns = trans_flat[s * 256 + edge_byte[e]]
                if ns < 0:
                    continue
                if leave_row[ns] >= 0:
                    return 1
                np_ = edge_next[e]
                if complete[np_] or (ns == last_s and np_ == last_p):
                    continue
                last_s, last_p = ns, np_
                if not _has_pair(pair_s, pair_p, n_pairs, ns, np_):
                    pair_s = _append(pair_s, n_pairs, ns)
                    pair_p = _append(pair_p, n_pairs, np_)
                    n_pairs += 1
        if j < k:
            q = step[q]
            if q < 0:
                return -1
    return 0


@njit
def _one_char(trans_flat, q, p0, edge_start, edge_end, edge_byte, edge_next, complete, pair_s, pair_p, ends):
    """Walk every character of the class from DFA state ``q``: the product
    with the one-character DFA from its start ``p0``, breadth first over its
    distinct pairs (``pair_s``/``pair_p``, workspace, also the queue).

    Returns
    -------
    verdict, n_ends, pair_s, pair_p, ends
        ``verdict`` 1 when every character is alive, 0 when every one dies,
        -1 when some live and some die; ``ends[:n_ends]``: the distinct
        states where a character completes (arrays possibly grown).
    """
    pair_s[0], pair_p[0] = q, p0
    n_pairs, head, n_ends = 1, 0, 0
    any_dead, any_done = False, False
    last_s, last_p, last_end = -1, -1, -1  # consecutive bytes mostly lead to the same pair: skip the scans
    while head < n_pairs:
        s, p = pair_s[head], pair_p[head]
        head += 1
        base = s * 256
        for k in range(edge_start[p], edge_end[p]):
            ns = trans_flat[base + edge_byte[k]]
            if ns < 0:
                any_dead = True
                if any_done:
                    return -1, 0, pair_s, pair_p, ends
                continue
            np_ = edge_next[k]
            if complete[np_]:
                any_done = True
                if any_dead:
                    return -1, 0, pair_s, pair_p, ends
                if ns != last_end and _index_of(ends, n_ends, ns) < 0:
                    ends = _append(ends, n_ends, ns)
                    n_ends += 1
                last_end = ns
                continue
            if ns == last_s and np_ == last_p:
                continue
            last_s, last_p = ns, np_
            if not _has_pair(pair_s, pair_p, n_pairs, ns, np_):
                pair_s = _append(pair_s, n_pairs, ns)
                pair_p = _append(pair_p, n_pairs, np_)
                n_pairs += 1
    return (1 if any_done else 0), n_ends, pair_s, pair_p, ends


@njit
def slice_limit(trans_flat, start, state_class, p0, edge_start, edge_end, edge_byte, edge_next, complete,
                step_memo, side):
    """The limit ``k`` and target class of a slice, whose one-character DFA
    starts at ``p0``, from DFA state ``start`` (see the module docstring);
    ``(-1, 0)`` when it does not apply. Also the states met (an int64 array
    and its length): where ``k`` is ``UNBOUNDED`` each of them is too.

    ``step_memo`` (int32 ``(n_states,)`` for this slice, read and mutated)
    keeps per state what one character does from it: the one state every
    character leads to (``>= 0``), ``-1`` some live and some die, ``-3``
    all die, ``-4`` several states (not kept), ``-4 - o`` several states kept
    at offset ``o`` of ``side``, ``-2`` unknown. So the states of a counted
    string, and those of a string beside an enum's trie (a state's characters
    lead to a few states each, thousands in 32 characters), each met again by
    the checks of the next positions, are walked once. ``side`` (int32,
    mutated; length 0: none kept) holds the next free offset at 0, then per
    kept state the count of its states and the states.

    Breadth-first by characters: ``frontier`` holds the states of ``Q_j``
    not seen at a smaller depth. A state's successors do not depend on the
    depth, and every state seen so far lives on every character (else the
    walk has stopped), so a ``Q_{j+1}`` without new states is a fixpoint:
    all later depths live too.
    """
    seen = np.empty(64, np.int64)
    seen[0] = start
    n_seen = 1
    frontier = seen[:1].copy()
    n_front = 1
    pair_s = np.empty(64, np.int64)
    pair_p = np.empty(64, np.int64)
    ends = np.empty(64, np.int64)
    # Q_j holds states seen at a smaller depth: they live on every character, and so does every later
    # Q (their successors were seen, and stay in it), so has_old never goes back
    has_old = False
    target = 0
    # membership of seen / nxt: a linear scan while they are small, then marks per state (1 seen, 2 next)
    mark = np.zeros(0, np.int8)
    for j in range(MAX_SLICE_CHARS + 1):
        verdict = -2  # no state classified yet
        nxt = np.empty(max(n_front, 8), np.int64)
        n_next = 0
        for i in range(n_front):
            known = step_memo[frontier[i]]
            if known >= 0:
                v, n_ends = 1, 1
                ends[0] = known
            elif known == -1 or known == -3:
                v, n_ends = (-1 if known == -1 else 0), 0
            elif known <= -5:
                o = -4 - known
                v, n_ends = 1, side[o]
                while ends.shape[0] < n_ends:
                    ends = np.concatenate((ends, np.empty_like(ends)))
                for e in range(n_ends):
                    ends[e] = side[o + 1 + e]
            else:
                v, n_ends, pair_s, pair_p, ends = _one_char(trans_flat, frontier[i], p0, edge_start, edge_end,
                                                            edge_byte, edge_next, complete, pair_s, pair_p, ends)
                if known == -2:
                    step_memo[frontier[i]] = _step_code(v, n_ends, ends, side)
            if v < 0 or (verdict != -2 and v != verdict):
                return -1, 0, seen, 0
            verdict = v
            for e in range(n_ends):
                q = ends[e]
                c = state_class[q]
                if c == 0 or (target != 0 and c != target):
                    return -1, 0, seen, 0
                target = c
                if mark.shape[0] == 0 and n_seen + n_next > MARK_AFTER:
                    mark = np.zeros(state_class.shape[0], np.int8)
                    mark[seen[:n_seen]] = 1
                    mark[nxt[:n_next]] = 2
                if mark.shape[0] == 0:
                    is_old, is_new = _index_of(seen, n_seen, q) >= 0, _index_of(nxt, n_next, q) < 0
                else:
                    is_old, is_new = mark[q] == 1, mark[q] == 0
                if is_old:
                    has_old = True
                elif is_new:
                    nxt = _append(nxt, n_next, q)
                    n_next += 1
                    if mark.shape[0]:
                        mark[q] = 2
        if verdict == 0:
            return (-1 if has_old else j), (0 if has_old else target), seen, 0
        if n_next == 0:
            return (LOOP if n_seen == 1 else UNBOUNDED), target, seen, n_seen
        for i in range(n_next):
            seen = _append(seen, n_seen, nxt[i])
            n_seen += 1
            if mark.shape[0]:
                mark[nxt[i]] = 1
        frontier, n_front = nxt, n_next
    return MORE, target, seen, 0


@njit_inline
def _step_code(v, n_ends, ends, side):
    """:func:`slice_limit`'s ``step_memo`` entry for one character's ``_one_char`` result
    (``ends[:n_ends]`` kept in ``side`` when there are several and it has room; mutates ``side``)."""
    if v < 0:
        return -1
    if v == 0:
        return -3
    if n_ends == 1:
        return ends[0]
    if side.shape[0] == 0 or side[0] + 1 + n_ends > side.shape[0]:
        return -4
    o = side[0]
    side[o] = n_ends
    for e in range(n_ends):
        side[o + 1 + e] = ends[e]
    side[0] = o + 1 + n_ends
    return -4 - o


def pack_char_dfas(slices: list[TokenSlice]) -> tuple:
    """The slices' one-character DFAs in one set of CSR arrays, for :func:`first_slice`.

    Returns
    -------
    tuple of numpy.ndarray
        int32 ``starts`` (each slice's start state), then ``edge_start``,
        ``edge_end``, ``edge_byte``, ``edge_next`` (int32) and ``complete``
        (bool) over all the slices' states, renumbered.
    """
    starts, parts, n_states, n_edges = [], [], 0, 0
    for sl in slices:
        edge_start, edge_end, edge_byte, edge_next, complete = sl.char_dfa
        starts.append(n_states)
        parts.append((edge_start + n_edges, edge_end + n_edges, edge_byte, edge_next + n_states, complete))
        n_states += len(complete)
        n_edges += len(edge_byte)
    if not parts:
        empty = np.zeros(0, np.int32)
        return empty, empty, empty, empty, empty, np.zeros(0, np.bool_)
    return (np.array(starts, np.int32),) + tuple(np.concatenate(col) for col in zip(*parts))


@njit
def first_slice(trans_flat, state, state_class, memo, starts, edge_start, edge_end, edge_byte, edge_next, complete):
    """The first of the packed slices (:func:`pack_char_dfas`) that applies
    from ``state``: ``(index, k, target)`` as :meth:`TokenSlice.limit`, index
    -1 when none does. One call for all the slices (numba's dispatch costs
    more than a failed check). From a state with one live byte, index -1 at
    once unless some slice's characters all start with that byte (a limit of
    0 would only drop tokens dead at their first byte).

    ``memo`` (int32 ``(1 + n_slices, n_states)`` or ``(1 + 2 * n_slices,
    n_states)`` from :func:`new_memo`, kept per DFA and state classes) is
    read and mutated. Row 0: where slice ``i`` is ``UNBOUNDED`` from
    ``state``, it is from every state a string of its characters reaches too
    (their successors were all met), so those states get ``4 * i + target``
    and skip the check when their turn comes (``LOOP`` where row ``1 + i``
    says one character leads back to the state). Row ``1 + i``: slice ``i``'s
    one-character steps (``step_memo`` of :func:`slice_limit`); the rows
    after them, where there are, one ``side`` for all the slices.
    """
    if memo[0, state] >= 0:  # met by an UNBOUNDED check: a LOOP where one character leads back (row 1 + i)
        i = memo[0, state] >> 2
        return i, (LOOP if memo[1 + i, state] == state else UNBOUNDED), memo[0, state] & 3
    n = starts.shape[0]
    lone = _lone_byte(trans_flat, state)
    if lone >= 0 and not _some_class_led_by(lone, starts, edge_start, edge_end, edge_byte):
        # one live byte (forced text): a class with another lead byte has a character dead here, so
        # no slice applies with a limit above 0, and the callers walk the whole trie for these few tokens
        return -1, -1, 0
    zero, zero_target = -1, 0
    side = memo[1 + n:].reshape(-1) if memo.shape[0] > 1 + n else memo[0][:0]
    for i in range(n):
        if _mixed_first_bytes(trans_flat, state, starts[i], edge_start, edge_end, edge_byte, edge_next, complete):
            continue  # what slice_limit finds first, without its workspace
        k, target, seen, n_seen = slice_limit(trans_flat, state, state_class, starts[i], edge_start, edge_end,
                                              edge_byte, edge_next, complete, memo[1 + i], side)
        if k == 0:
            if zero < 0:
                zero, zero_target = i, target
        elif k > 0:
            if k == UNBOUNDED:
                for j in range(1, n_seen):
                    memo[0, seen[j]] = 4 * i + target
            return i, k, target
    return zero, (0 if zero >= 0 else -1), zero_target


@njit_inline
def _lone_byte(trans_flat, state):
    """The one byte with a transition from ``state`` (flat int32 table), -1 for none or several."""
    base = state * 256
    lone = -1
    for b in range(256):
        if trans_flat[base + b] >= 0:
            if lone >= 0:
                return -1
            lone = b
    return lone


@njit_inline
def _mixed_first_bytes(trans_flat, state, p0, edge_start, edge_end, edge_byte, edge_next, complete):
    """Whether, from ``state``, some one-byte character of the slice whose one-character DFA
    starts at ``p0`` lives and some first byte of its characters dies: the slice does not apply."""
    base = state * 256
    dead, done = False, False
    for e in range(edge_start[p0], edge_end[p0]):
        if trans_flat[base + edge_byte[e]] < 0:
            dead = True
        elif complete[edge_next[e]]:
            done = True
        if dead and done:
            return True
    return False


@njit_inline
def _some_class_led_by(b, starts, edge_start, edge_end, edge_byte):
    """Whether some packed slice's characters all start with byte ``b``."""
    for i in range(starts.shape[0]):
        p = starts[i]
        only = edge_start[p] < edge_end[p]
        for e in range(edge_start[p], edge_end[p]):
            if edge_byte[e] != b:
                only = False
                break
        if only:
            return True
    return False


#: Rows of a memo's ``side`` (:func:`new_memo`): room for the steps of a character to several states
#: from about ``n_states`` states (a count and two or three states each).
SIDE_ROWS = 3


def new_memo(n_states: int, n_slices: int, side: bool = False) -> np.ndarray:
    """A fresh memo for :func:`first_slice` over a DFA of ``n_states`` states (see there); with
    ``side``, :data:`SIDE_ROWS` more rows that keep the characters' steps to several states too."""
    out = np.full((1 + n_slices + (SIDE_ROWS if side else 0), n_states), -2, np.int32)
    out[0] = -1
    if side:
        out[1 + n_slices:] = 0
        out[1 + n_slices, 0] = 1  # the next free offset
    return out
