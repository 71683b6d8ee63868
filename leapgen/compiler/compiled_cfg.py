"""ContextFreeGrammar: a pushdown grammar bound to one vocabulary.

Token masks split the vocabulary per top frame ``(rule, state)``, as
xgrammar's adaptive token mask cache does (Dong et al., 2024, section 3.2):
tokens that a frame's rule (with its callees) consumes whole are *certain*
whatever the stack below; they are found once per frame by a pushdown trie
walk with the stack below unknown (token slices shortcut it), which also
collects the *uncertain* tokens, those that go on after the rule returned
into some caller that may accept them (see :meth:`TokenIndex.frame_sets`).
Only those are checked against the real configuration at run time, by the
same kernel over the real stacks and a trie of the candidates alone
(:meth:`TokenIndex.pushdown_walk`; :meth:`TokenIndex.lazy_token_walk` where
it gives up).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from leapgen.automata.limits import check_deadline
from leapgen.automata.pda import Config, Pda
from leapgen.automata.pda_classes import LookaheadClasses
from leapgen.automata.pda_stacks import EMPTY
from leapgen.compiler.compiled import WIDE_STATE_BYTES, CompiledGrammar, entry_bytes, give_back_row, lend_row
from leapgen.compiler.token_index import LoopJumps
from leapgen.grammar.ir import TOKEN_LEAD

MAX_CONFIG_CACHE = 1 << 16
#: Distinct sets of top frames whose joined sorts are kept (two bitsets each).
MAX_TOPS_CACHE = 1024


class FrameSort(NamedTuple):
    """The tokens sorted from one top frame (:meth:`TokenIndex.frame_sets`). The grammar keeps them as
    plain tuples in this order (a tuple of arrays and ints is not tracked by the garbage collector;
    a NamedTuple instance is): :data:`CERTAIN`, :data:`UNCERTAIN`, ... index them.

    Attributes
    ----------
    certain, uncertain : numpy.ndarray
        uint32 bitsets ``(ceil(vocab_size / 32),)``, read-only. The grammar keeps ``certain`` as a
        row-cache entry (:meth:`~leapgen.compiler.compiled.CompiledGrammar._pack`: most frames' are
        packed, ~1-2 KB instead of 16 KB of memory never touched before), the row of the
        configurations whose expansion has that one top frame and no uncertain token.
    pushed : int
        The most frames a certain token may push.
    has_uncertain : bool
    walk : tuple or None
        :meth:`TokenIndex.candidate_walk` of the uncertain tokens (None
        without them or without the trie kernels): over their own trie when
        the frame was sorted at compile time (:meth:`ContextFreeGrammar.sort_all_frames`),
        else over the vocabulary's (a frame sorted at a first fill is often
        met once: a position in a long string).
    """

    certain: np.ndarray
    uncertain: np.ndarray
    pushed: int
    has_uncertain: bool
    walk: tuple | None


CERTAIN, UNCERTAIN, PUSHED, HAS_UNCERTAIN, WALK = range(5)

#: A grammar with at most this many states with a byte edge sorts every frame's tokens at compile time
#: (:meth:`ContextFreeGrammar.sort_all_frames`), as xgrammar precomputes its adaptive token mask cache:
#: ~0.2 ms a frame with Llama-3, ~110 ms for the builtin JSON grammar's 564, paid once per grammar and
#: vocabulary; bigger grammars sort frames at their first mask fill.
EAGER_FRAMES = 640
#: Frames of each stack handed to the pushdown walk kernel; a token popping below them is walked in Python.
MAX_KERNEL_FRAMES = 256


class ContextFreeGrammar(CompiledGrammar):
    """A compiled context-free grammar; matcher states are configurations
    (sorted tuples of the ids of their parse stacks in ``pda.stacks``). See
    :class:`CompiledGrammar`.

    Attributes
    ----------
    pda : Pda
        The rules' automata.
    """

    is_regular = False

    def __init__(self, pda: Pda, tokenizer_info, token_index, **kwargs):
        super().__init__(tokenizer_info, token_index, **kwargs)
        token_index.warm_up_pushdown()
        self.pda = pda
        self._expansions: dict = {}
        self._steps: dict = {}
        self._temperatures: dict = {}
        self._frame_tokens: dict[int, tuple] = {}  # global state -> FrameSort's fields, certain a row-cache entry
        self._frames_bytes = 0  # what the frame sorts' sets hold
        self._dense: dict[tuple, np.ndarray] = {}  # top frames -> their certain tokens whole (see _whole)
        self._tops: dict[tuple, tuple] = {}  # sorted (global state, near the depth bound) of the top frames -> see _sort_tops
        self._tops_bytes = 0
        self._all_sorted = False  # every frame sorted at compile time (sort_all_frames)
        self._own_tries = False  # frames sorted now get a trie of their own (sort_all_frames)
        self._walks: dict[tuple, tuple[np.ndarray, int]] = {}  # see _check_uncertain
        self._walk_reads: dict[tuple, set[int]] = {}
        self._classes = LookaheadClasses(pda, token_index.max_token_bytes)  # the walks' keys (_check_uncertain)
        self._past_returns: dict[tuple, np.ndarray | None] = {}  # see _accepted_past_returns; cleared with _walks
        self._base = pda.state_base.tolist()
        self._live = np.ones(len(pda.has_bytes_flat), np.int8)
        # side rows: a frame sort's slice check walks up to 32 characters of states, thousands beside an enum's trie
        self._slice_memo = token_index.new_slice_memo(len(pda.has_bytes_flat), side=True)
        self._loops = LoopJumps()
        self._automaton = pda.walk_arrays
        self._automaton_bytes = sum(int(a.nbytes) for a in self._automaton if isinstance(a, np.ndarray))
        self._find_token_literals([pda.trans_flat.reshape(-1, 256)])  # every rule's bytes, over global ids

    def use_slices(self, slices) -> None:
        super().use_slices(slices)
        self._loops = LoopJumps()  # its LOOP states were found with the old set

    @property
    def n_states(self) -> int:
        """Total DFA states over all rules."""
        return int(self.pda.state_base[-1])

    @property
    def start_state(self) -> Config:
        return self.pda.start_config

    def expansion(self, config: Config) -> tuple[tuple, bool]:
        """``(frames, complete)`` of :meth:`Pda.expand <leapgen.automata.pda.Pda.expand>` (cached)."""
        got = self._expansions.get(config)
        if got is None:
            got = self.pda.expand_tuple(config)
            if len(self._expansions) > MAX_CONFIG_CACHE:
                self._expansions.clear()
            self._expansions[config] = got
        return got

    def rule_temperatures(self, config: Config) -> tuple[float, ...]:
        """The distinct temperatures of the active rules: for each stack of the
        expansion that can consume a byte, the innermost rule with a
        temperature (cached per configuration)."""
        if not self.pda.has_temperature:
            return ()
        got = self._temperatures.get(config)
        if got is None:
            got = self.stack_temperatures(self.expansion(config)[0])
            if len(self._temperatures) > MAX_CONFIG_CACHE:
                self._temperatures.clear()
            self._temperatures[config] = got
        return got

    def stack_temperatures(self, stacks) -> tuple[float, ...]:
        """The distinct temperatures of ``stacks``' (stack ids of :attr:`Pda.stacks`) innermost
        rules with one, sorted."""
        pda = self.pda
        options, rule_of = pda.options, pda.rule_of
        top, below = pda.stacks.top, pda.stacks.below
        temps = set()
        for s in stacks:
            while s != EMPTY:
                opt = options[rule_of[top[s]]]
                if opt is not None and opt.temperature is not None:
                    temps.add(opt.temperature)
                    break
                s = below[s]
        return tuple(sorted(temps))

    def step(self, config: Config, byte: int) -> Config | None:
        """The configuration after one byte, or None if rejected (pure, cached)."""
        key = (config, byte)
        got = self._steps.get(key)
        if got is None:
            exp = self.expansion(config)
            got = self.pda.step(exp, byte)
            if len(self._steps) > MAX_CONFIG_CACHE:
                self._steps.clear()
            self._steps[key] = got
        return got or None

    def walk(self, state: Config, data: bytes) -> Config | None:
        walk_plain, i, n = self.pda.walk_plain, 0, len(data)
        while i < n:
            state, i = walk_plain(state, data, i)  # rule-internal bytes without the step cache
            if state is None:
                return None
            if i < n:
                state = self.step(state, data[i])
                if state is None:
                    return None
                i += 1
        return state

    def rejected_for_depth(self, state: Config, data: bytes, *, token: bool = False) -> bool:
        for b in data:
            state = self.pda.step(self.pda.expand_tuple(state, max_depth=1 << 62), b)
            if not state:
                return False
        return True

    def is_accepting(self, state: Config) -> bool:
        return self.expansion(state)[1]

    def memory_size_bytes(self) -> int:
        """Approximate bytes held (see :meth:`CompiledGrammar.memory_size_bytes`): the cached rows, the
        frame sorts' and the joined sorts' sets, the reused walks (a bitset each), the whole certain
        sets of :meth:`_certain`, the token-slice memo and the rules' automata; the configuration
        caches' Python objects are not counted, and a row that is a frame sort's entry or a kept
        walk's array (see :meth:`_write_new_row`) is counted twice."""
        sorts = self._frames_bytes + self._tops_bytes + (len(self._walks) + len(self._dense)) * self._row_bytes
        return super().memory_size_bytes() + sorts + int(self._slice_memo.nbytes) + self._automaton_bytes

    def _forced_byte(self, state: Config) -> int:
        exp = self.expansion(state)
        if exp[1]:
            return -1
        live = np.flatnonzero(self.pda.next_bytes(exp))
        if self.token_literals:
            live = live[live != TOKEN_LEAD]  # a token literal is not text (see token_literals)
        return int(live[0]) if len(live) == 1 else -1

    def frame_tokens(self, rule: int, state: int) -> FrameSort:
        """The tokens sorted from a top frame (cached; see :meth:`TokenIndex.frame_sets`)."""
        g = self._base[rule] + state
        return FrameSort(self._certain(g), *self._frame_sort(g)[1:])

    def _frame_sort(self, g: int) -> tuple:
        """:meth:`frame_tokens` of global state ``g``, as the plain tuple kept (``certain`` a row-cache entry)."""
        got = self._frame_tokens.get(g)
        if got is None:
            got = self._frame_tokens[g] = self._sort_frame(g)
            self._frames_bytes += entry_bytes(got[CERTAIN]) + (self._row_bytes if got[HAS_UNCERTAIN] else 0)
        return got

    def _sort_frame(self, g: int) -> tuple:
        """The frame sort of global state ``g`` (not cached), its certain tokens computed in a scratch
        row and packed (:meth:`_pack`)."""
        words = lend_row(self.token_index.bitmask_words)
        try:
            certain, uncertain, pushed = self.token_index.frame_sets(
                self._automaton, g, self._live, self._slice_memo, self._slices, self._loops, self._loop_sort, out=words)
            entry = self._pack(certain)
        finally:
            give_back_row(words)
        has_uncertain = self.token_index.any_bits(uncertain)
        walk = self.token_index.candidate_walk(uncertain, self._own_tries) if has_uncertain else None
        return entry, uncertain, pushed, has_uncertain, walk

    def _loop_sort(self, g: int) -> tuple:
        """``(certain, uncertain, pushed)`` of the frame sort of global state ``g``, ``certain`` whole
        (the LOOP state a frame's walk jumps to: :meth:`TokenIndex.frame_sets`'s ``sort_of``)."""
        f = self._frame_sort(g)
        return self._certain(g), f[UNCERTAIN], f[PUSHED]

    def _certain(self, g: int) -> np.ndarray:
        """The certain tokens of global state ``g``'s frame sort, a whole uint32 bitset (read-only, kept)."""
        return self._whole(((g, False),), self._frame_sort(g)[CERTAIN])

    def _whole(self, tops: tuple, entry: tuple) -> np.ndarray:
        """The row of ``entry``, the certain tokens of the top frames ``tops`` (see :meth:`_top_sort`), as
        a whole uint32 bitset: read-only, expanded once and kept (bounded with the joined sorts) where a
        whole row is asked for (the LOOP state a frame's walk jumps to; :meth:`bitmask_row`, which
        configurations with these top frames then share)."""
        got = self._dense.get(tops)
        if got is None:
            if len(entry) == 2:
                got = entry[0].view(np.uint32)
            else:
                got = np.empty(self.token_index.bitmask_words, np.uint32)
                self._write_entry(entry, got)
                got.flags.writeable = False
            self._dense[tops] = got
        return got

    def sort_all_frames(self) -> None:
        """Sort the tokens of every frame now (see :data:`EAGER_FRAMES`); mutates the frame cache only.

        Raises
        ------
        CompileLimitError
            The compile time limit (:mod:`leapgen.automata.limits`) passed.
        """
        states = np.flatnonzero(self.pda.has_bytes_flat).tolist()
        self._sort_own_tries(states, "sorting the tokens of every grammar state")
        self._all_sorted = True

    def prepare_free_text(self, limit: int) -> None:
        wide = np.flatnonzero((self.pda.trans_flat.reshape(-1, 256) >= 0).sum(axis=1) >= WIDE_STATE_BYTES)
        self._sort_own_tries(wide[:limit].tolist(), "sorting the tokens of free-text states")

    def _sort_own_tries(self, states: list[int], doing: str) -> None:
        """Sort these frames now, each (and those they jump to) with a trie of its own."""
        self._own_tries = True
        try:
            for g in states:
                check_deadline(doing)
                self._frame_sort(g)
        finally:
            self._own_tries = False

    def _allowed_bits(self, state: Config) -> np.ndarray:
        tops, (certain, checks) = self._top_sort(state)
        if checks:
            return self._check_uncertain(state, checks, tops, certain)
        return self._whole(tops, certain)  # shared, not copied (see CompiledGrammar._row_of)

    def _write_new_row(self, state: Config, words: np.ndarray) -> bool | None:
        """Where the top frames' sort needs no check on the real stacks (most configurations), write
        its certain tokens into ``words`` (uint32, mutated), and keep as the configuration's row the
        sort's own entry (shared) or, with stop or literal bits, the row packed; else None."""
        certain, checks = self._top_sort(state)[1]
        if checks:
            return None
        self.mask_cache_misses += 1
        self._write_entry(certain, words)
        if self.token_literals or self.is_accepting(state) or self.token_index.any_stop_bits(words):
            self._add_literal_and_stop_bits(state, words)
            return self._keep_packed(state, words)
        return self._keep_row(state, certain)[-1]

    def _top_sort(self, state: Config) -> tuple[tuple, tuple]:
        """``(tops, (certain, checks))``: the expanded frames of ``state`` (sorted pairs of global state and
        whether near the stack depth bound) and their :meth:`_sort_tops` (cached)."""
        # Classify from the expanded frames (the real stacks' pops and pushes followed), not the raw stacks:
        # a token leaving a frame's rule before its first byte is the business of the frames expansion reached.
        limit = self.pda.max_stack_depth
        store = self.pda.stacks
        top, depth, sort = store.top, store.depth, self._frame_sort
        tops = tuple(sorted({(top[s], depth[s] + sort(top[s])[PUSHED] > limit) for s in self.expansion(state)[0]}))
        got = self._tops.get(tops)
        if got is None:
            if len(self._tops) > MAX_TOPS_CACHE:
                self._tops.clear()
                self._dense.clear()
                self._tops_bytes = 0
            got = self._tops[tops] = self._sort_tops(tops)
            if len(tops) != 1 or tops[0][1]:  # a joined sort's own sets (one frame's are counted with it)
                self._tops_bytes += entry_bytes(got[0]) + self._row_bytes * len(got[1])
        return tops, got

    def _sort_tops(self, tops: tuple) -> tuple[tuple, tuple]:
        """The frames' sorts joined (pure): the certain tokens, a row-cache entry (see :meth:`_pack`;
        one frame's own), and what to check on the real stacks: ``(candidates, walk)`` pairs for
        :meth:`TokenIndex.pushdown_walk`.

        One frame's uncertain tokens are walked over its :attr:`FrameSort.walk`; several
        frames' together (one kernel call a check, not one a frame), over a trie of their own
        built here where every frame was sorted at compile time, else over the vocabulary's.
        Near the stack depth bound, a frame's certain tokens are checked too, with all the
        candidates, over the vocabulary's trie (their positions found once here).
        """
        sorts = [(self._frame_sort(g), near_limit) for g, near_limit in tops]
        if len(sorts) == 1 and not sorts[0][1]:
            f = sorts[0][0]
            return f[CERTAIN], ((f[UNCERTAIN], f[WALK]),) if f[HAS_UNCERTAIN] else ()
        certain = lend_row(self.token_index.bitmask_words)
        try:
            certain[:] = 0
            for f, near_limit in sorts:
                if not near_limit:
                    _or_entry(certain, f[CERTAIN])
            candidates = self.token_index.empty_words()
            for f, near_limit in sorts:
                candidates |= f[UNCERTAIN]
                if near_limit:
                    _or_entry(candidates, f[CERTAIN])  # a certain token may nest past max_stack_depth here: check it
            candidates &= ~certain
            entry = self._pack(certain)
        finally:
            give_back_row(certain)
        if not self.token_index.any_bits(candidates):
            return entry, ()
        # one walk of the frames' candidates together (the kernel walks them from the whole configuration
        # either way): over their own trie, built once for these frames, where the grammar's frames were all
        # sorted at compile time (a few sets of top frames, met again and again); else, as near the depth
        # bound, over the vocabulary's trie (frames sorted at a first fill, such as the positions of a long
        # string, make sets of top frames often met once)
        near = any(near_limit for _, near_limit in sorts)
        walk = self.token_index.candidate_walk(candidates, own_trie=self._all_sorted and not near)
        candidates.flags.writeable = False  # after the trie kernel: a read-only array is another numba signature
        return entry, ((candidates, walk),)

    def _check_uncertain(self, state: Config, checks: tuple, tops: tuple, certain: tuple) -> np.ndarray:
        """The tokens of ``certain`` (a row-cache entry) with the candidate tokens that the
        configuration ``state`` accepts: a fresh uint32 array, the caller's to mutate, or a
        read-only one kept (shared).

        ``checks`` and ``certain`` (see :meth:`_sort_tops`) follow from ``tops``, the expanded
        frames' sort. The kernel's result depends only on the top frames of
        each stack that it read, so it is kept (bounded) under ``tops`` and
        those frames, and reused by configurations deeper or elsewhere in the
        document whose stacks agree that far, unless the walk came near
        ``max_stack_depth``: a push cut there makes the result hold for this
        depth alone (it would mask tokens off where the stack is shallower).
        """
        pda = self.pda
        depth = pda.stacks.depth
        deepest = max(depth[s] for s in state)
        reads = tuple(self._walk_reads.get(tops, ()))  # a copy: a batch fill's pool thread may add to it
        chains, chained = None, 0  # the stacks' chains of their top `chained` frames (they key any fewer too)
        if reads:
            chained = max(reads)
            chains = _stack_chains(pda, state, chained, self._classes)
            for read in reads:
                got = self._walks.get((tops, _stack_key(chains, read)))
                if got is not None and deepest + got[1] <= pda.max_stack_depth:
                    return got[0]
        stacks = pda.stack_arrays(state, MAX_KERNEL_FRAMES)
        row, pushed, read = np.empty(self.token_index.bitmask_words, np.uint32), 0, 0
        self._write_entry(certain, row)  # the kernel sets the accepted candidates' bits in it
        sure = self._accepted_past_returns(state)
        for candidates, walk in checks:
            if sure is not None:  # accepted, read from the stacks' top two frames: walk the others only
                accepted = candidates & sure
                row |= accepted
                candidates, walk, read = np.bitwise_xor(candidates, accepted, out=accepted), None, 2
                if not self.token_index.any_bits(candidates):
                    continue
            walked, p, r = self.token_index.pushdown_walk(self._automaton, stacks, pda.max_stack_depth, candidates,
                                                        walk=walk, out=row)
            if walked is None:
                joined = np.bitwise_or.reduce([c for c, _ in checks])
                self._write_entry(certain, row)
                return row | self.token_index.lazy_token_walk(state, self.step, joined)
            pushed, read = max(pushed, p), max(read, r)
        if deepest + pushed >= pda.max_stack_depth:  # some push may have been cut: not reusable elsewhere
            return row
        if len(self._walks) > MAX_CONFIG_CACHE:
            self._walks.clear()
            self._walk_reads.clear()
            self._past_returns.clear()
        self._walk_reads.setdefault(tops, set()).add(read)
        row.flags.writeable = False  # kept, and shared with the caller (see CompiledGrammar._row_of)
        if chains is None or read > chained:
            chains = _stack_chains(pda, state, read, self._classes)
        self._walks[tops, _stack_key(chains, read)] = (row, pushed)
        return row


    def _accepted_past_returns(self, state: Config) -> np.ndarray | None:
        """The tokens the configuration surely accepts past a return from its stacks' top frames
        (:meth:`TokenIndex.accepted_past_return`, kept per pair of frames), None for none; never with
        budgets (their frames count what they consume)."""
        if self.pda.has_budget:
            return None
        store, got = self.pda.stacks, []
        for s in state:
            if store.depth[s] < 2:
                continue
            pair = tuple(self.pda.top_frames(s, 2))
            sure = self._past_returns.get(pair, False)
            if sure is False:
                sure = self._past_returns[pair] = self.token_index.accepted_past_return(
                    self.pda.trans_flat, self.pda.accepting_flat, *pair, self._live, self._slice_memo)
            if sure is not None:
                got.append(sure)
        return np.bitwise_or.reduce(got) if got else None


def _stack_chains(pda: Pda, config: Config, frames: int, classes: LookaheadClasses) -> list[tuple]:
    """The top ``frames`` frames of each stack as look-ahead classes of their states, then ``-1``
    where a stack is shorter (what :func:`pda_walk` reads of them, up to what no token tells apart)."""
    of = classes.of
    chains = []
    for s in config:
        chain = [of(g) for g in pda.top_frames(s, frames)]
        chains.append(tuple(chain) if len(chain) == frames else (*chain, -1))
    return chains


def _stack_key(chains: list[tuple], read: int) -> tuple:
    """The top ``read`` frames of each chain (with the ``-1`` of a shorter stack), in a canonical order;
    ``chains`` from :func:`_stack_chains` with at least ``read`` frames."""
    return tuple(sorted(c[:read] for c in chains))


def _or_entry(words: np.ndarray, entry: tuple) -> None:
    """Set in ``words`` (uint32, mutated) the bits of a row-cache entry (whole or packed, see
    :meth:`~leapgen.compiler.compiled.CompiledGrammar._pack`)."""
    if len(entry) == 2:
        words |= entry[0].view(np.uint32)
    elif entry[2]:  # packed over a base of ones: every word full but those listed
        got = words[entry[0]] | entry[1]
        words[:] = 0xFFFFFFFF
        words[entry[0]] = got
    else:
        words[entry[0]] |= entry[1]
