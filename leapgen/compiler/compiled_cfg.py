"""ContextFreeGrammar: a pushdown grammar bound to one vocabulary.

Token masks split the vocabulary per top frame ``(rule, state)``, as
xgrammar's adaptive token mask cache does (Dong et al., 2024, section 3.2):
tokens whose fate does not depend on the stack below are classified once by
a vectorized walk over the rule's context DFA (token slices and the
"unknown" sink state shortcut it, see :meth:`TokenIndex.token_sets`); only
the *uncertain* tokens (those that leave the rule or nest deeper than the
context DFA sees) are checked against the real stacks at run time, by a trie
walk over the configurations met (:meth:`TokenIndex.lazy_token_walk`).
"""

from __future__ import annotations

import threading

import numpy as np

from leapgen.automata.pda import CONTEXT_INLINE_DEPTH, Config, Pda
from leapgen.compiler.compiled import CompiledGrammar
from leapgen.compiler.token_index import sink_states

MAX_CONFIG_CACHE = 1 << 16


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
        self._contexts: dict[int, tuple] = {}
        self._frame_tokens: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._cfg_lock = threading.Lock()

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

    def is_accepting(self, state: Config) -> bool:
        return self.expansion(state).complete

    def _forced_byte(self, state: Config) -> int:
        exp = self.expansion(state)
        if exp.complete:
            return -1
        live = np.flatnonzero(exp.next_bytes)
        return int(live[0]) if len(live) == 1 else -1

    def frame_tokens(self, rule: int, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(certain, uncertain) uint32 token bitsets from a top frame; cached, read-only."""
        key = (rule, state)
        got = self._frame_tokens.get(key)
        if got is None:
            ctx = self._contexts.get(rule)
            if ctx is None:
                with self._cfg_lock:
                    ctx = self._contexts.get(rule)
                    if ctx is None:
                        trans_flat, certain, entry = self.pda.context_dfa(rule)
                        classes = np.where(certain, 1, 2).astype(np.int8)
                        ctx = self._contexts[rule] = (trans_flat, classes, entry, sink_states(trans_flat))
            trans_flat, classes, entry, sinks = ctx
            got = self._frame_tokens[key] = self.token_index.token_sets(trans_flat, entry[state], classes, sinks)
        return got

    def _allowed_bits(self, state: Config) -> np.ndarray:
        sure = self.token_index.empty_words()
        unsure = self.token_index.empty_words()
        # A token certain from its top frame may still push up to CONTEXT_INLINE_DEPTH frames; near
        # max_stack_depth those pushes are cut, so there its certain tokens are checked like uncertain ones.
        deep = self.pda.max_stack_depth - CONTEXT_INLINE_DEPTH
        # Classify from the expanded frames (the real stacks' pops and pushes followed), not the raw stacks:
        # a frame that can only return (say, after "}") would see its callers only through the context
        # DFA's over-approximation, and an epsilon path into its "unknown" state makes every token uncertain.
        tops = {(s.rule, s.state, s.depth > deep) for s in self.expansion(state).frames}
        for rule, q, near_limit in tops:
            a, b = self.frame_tokens(rule, q)
            if near_limit:
                unsure |= a
            else:
                sure |= a
            unsure |= b
        unsure &= ~sure
        if unsure.any():
            sure |= self.token_index.lazy_token_walk(state, self.step, unsure)
        return sure
