"""ContextFreeGrammar: a pushdown grammar bound to one vocabulary.

Token masks split the vocabulary per top frame ``(rule, state)``, as
xgrammar's adaptive token mask cache does (Dong et al., 2024, section 3.2):
tokens that a frame's rule (with its callees) consumes whole are *certain*
whatever the stack below; they are found once per frame by a pushdown trie
walk with the stack below unknown (token slices shortcut it), which also
collects the *uncertain* tokens, those that go on after the rule returned
(see :meth:`TokenIndex.frame_sets`). Only those are checked against the
real configuration at run time, by the same kernel over the real stacks
(:meth:`TokenIndex.pushdown_walk`; :meth:`TokenIndex.lazy_token_walk` where
it gives up).
"""

from __future__ import annotations

import numpy as np

from leapgen.automata.limits import check_deadline
from leapgen.automata.pda import Config, Pda
from leapgen.compiler.compiled import CompiledGrammar

MAX_CONFIG_CACHE = 1 << 16
#: A grammar with at most this many states with a byte edge sorts every frame's tokens at compile time
#: (:meth:`ContextFreeGrammar.sort_all_frames`), as xgrammar precomputes its adaptive token mask cache:
#: ~0.15 ms a frame with Llama-3, ~90 ms for the builtin JSON grammar's 564, paid once per grammar and
#: vocabulary; bigger grammars sort frames at their first mask fill.
EAGER_FRAMES = 640
#: Frames of each stack handed to the pushdown walk kernel; a token popping below them is walked in Python.
MAX_KERNEL_FRAMES = 256


class ContextFreeGrammar(CompiledGrammar):
    """A compiled context-free grammar; matcher states are configurations
    (frozensets of parse stacks). See :class:`CompiledGrammar`.

    Attributes
    ----------
    pda : Pda
        The rules' automata.
    """

    is_regular = False

    def __init__(self, pda: Pda, tokenizer_info, token_index, **kwargs):
        super().__init__(tokenizer_info, token_index, **kwargs)
        self.pda = pda
        self._expansions: dict = {}
        self._steps: dict = {}
        self._frame_tokens: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
        self._walks: dict[tuple, tuple[np.ndarray, int]] = {}  # see _check_uncertain
        self._walk_reads: dict[frozenset, set[int]] = {}
        self._base = pda.state_base.tolist()
        self._live = np.ones(len(pda.has_bytes_flat), np.int8)
        self._slice_memo = token_index.new_slice_memo(len(pda.has_bytes_flat))
        self._automaton = pda.walk_arrays
        self._leave = (pda.leave_row, pda.leave_bytes)

    @property
    def n_states(self) -> int:
        """Total DFA states over all rules."""
        return sum(d.n_states for d in self.pda.dfas)

    @property
    def start_state(self) -> Config:
        return self.pda.start_config

    def expansion(self, config: Config):
        got = self._expansions.get(config)
        if got is None:
            got = self.pda.expand(config)
            if len(self._expansions) > MAX_CONFIG_CACHE:
                self._expansions.clear()
            self._expansions[config] = got
        return got

    def step(self, config: Config, byte: int) -> Config | None:
        """The configuration after one byte, or None if rejected (pure, cached)."""
        key = (config, byte)
        got = self._steps.get(key)
        if got is None:
            exp = self.expansion(config)
            got = self.pda.step(exp, byte) if exp.next_bytes[byte] else frozenset()
            if len(self._steps) > MAX_CONFIG_CACHE:
                self._steps.clear()
            self._steps[key] = got
        return got or None

    def walk(self, state: Config, data: bytes) -> Config | None:
        for b in data:
            state = self.step(state, b)
            if state is None:
                return None
        return state

    def rejected_for_depth(self, state: Config, data: bytes) -> bool:
        for b in data:
            state = self.pda.step(self.pda.expand(state, max_depth=1 << 62), b)
            if not state:
                return False
        return True

    def is_accepting(self, state: Config) -> bool:
        return self.expansion(state).complete

    def _forced_byte(self, state: Config) -> int:
        exp = self.expansion(state)
        if exp.complete:
            return -1
        live = np.flatnonzero(exp.next_bytes)
        return int(live[0]) if len(live) == 1 else -1

    def frame_tokens(self, rule: int, state: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(certain, uncertain, pushed) from a top frame; cached, the bitsets read-only
        (see :meth:`TokenIndex.frame_sets`)."""
        g = self._base[rule] + state
        got = self._frame_tokens.get(g)
        if got is None:
            got = self._frame_tokens[g] = self._sort_frame(g)
        return got

    def _sort_frame(self, g: int) -> tuple[np.ndarray, np.ndarray, int]:
        return self.token_index.frame_sets(self._automaton, self._leave, g, self._live, self._slice_memo)

    def sort_all_frames(self) -> None:
        """Sort the tokens of every frame now (see :data:`EAGER_FRAMES`); mutates the frame cache only.

        Raises
        ------
        CompileLimitError
            The compile time limit (:mod:`leapgen.automata.limits`) passed.
        """
        for g in np.flatnonzero(self.pda.has_bytes_flat).tolist():
            check_deadline("sorting the tokens of every grammar state")
            if g not in self._frame_tokens:
                self._frame_tokens[g] = self._sort_frame(g)

    def _allowed_bits(self, state: Config) -> np.ndarray:
        certain = self.token_index.empty_words()
        uncertain = self.token_index.empty_words()
        limit = self.pda.max_stack_depth
        # Classify from the expanded frames (the real stacks' pops and pushes followed), not the raw stacks:
        # a token leaving a frame's rule before its first byte is the business of the frames expansion reached.
        tops = set()
        for s in self.expansion(state).frames:
            a, b, pushed = self.frame_tokens(s.rule, s.state)
            near_limit = s.depth + pushed > limit
            if near_limit:
                uncertain |= a  # a certain token may nest past max_stack_depth here: check it on the real stack
            else:
                certain |= a
            uncertain |= b
            tops.add((s.rule, s.state, near_limit))
        uncertain &= ~certain
        if uncertain.any():
            certain |= self._check_uncertain(state, uncertain, frozenset(tops))
        return certain

    def _check_uncertain(self, state: Config, candidates: np.ndarray, tops: frozenset) -> np.ndarray:
        """The candidate tokens that the configuration ``state`` accepts.

        ``candidates`` follow from ``tops``, the expanded frames' sort. The
        kernel's result depends only on the top frames of each stack that it
        read, so it is kept (bounded) under ``tops`` and those frames, and
        reused by configurations deeper or elsewhere in the document whose
        stacks agree that far.
        """
        pda = self.pda
        stacks = pda.stack_arrays(state, MAX_KERNEL_FRAMES)
        frames, count, _, depth = stacks
        deepest = int(depth.max())
        for read in tuple(self._walk_reads.get(tops, ())):  # a copy: a batch fill's pool thread may add to it
            got = self._walks.get((tops, _stack_key(frames, count, read)))
            if got is not None and deepest + got[1] <= pda.max_stack_depth:
                return got[0]
        got, pushed, read = self.token_index.pushdown_walk(self._automaton, stacks, pda.max_stack_depth, candidates)
        if got is None:
            return self.token_index.lazy_token_walk(state, self.step, candidates)
        if len(self._walks) > MAX_CONFIG_CACHE:
            self._walks.clear()
            self._walk_reads.clear()
        self._walk_reads.setdefault(tops, set()).add(read)
        self._walks[tops, _stack_key(frames, count, read)] = (got, pushed)
        return got


def _stack_key(frames: np.ndarray, count: np.ndarray, read: int) -> tuple:
    """The top ``read`` frames of each stack (fewer where a stack is shorter), in a canonical order."""
    return tuple(sorted(tuple(row[:min(read, n)].tolist()) + ((-1,) if n < read else ())
                        for row, n in zip(frames, count.tolist())))
