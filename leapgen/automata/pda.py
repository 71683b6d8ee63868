"""Pushdown automaton over per-rule byte-level DFAs.

Each recursive rule of a context-free grammar is compiled to a DFA over bytes
plus *call symbols* (``256 + callee``). A parse configuration is a set of
stacks of frames ``(rule, state)``; stacks are persistent linked lists, so
configurations share structure and hash in O(1) (the design of xgrammar's
persistent stack, Dong et al., 2024, "XGrammar", section 3.3).

- expand: from each stack, follow call edges (push) and finished rules (pop)
  without consuming bytes, keeping the frames that can consume a byte;
- step: consume one byte from the expanded frames.

Left recursion is refused at compile time; every other push consumes a byte
before it can recur, so expansion terminates. A call whose return state can
only pop (a tail call) pushes no return frame, so right recursion keeps a
constant depth. Stacks deeper than ``max_stack_depth`` are cut (documented
bound): tokens that would nest deeper are masked off.

Context DFAs (per rule, built on demand) classify tokens from a frame without
looking at the rest of the stack: callees are inlined a few levels deep and
the rule's exit (and deeper nesting) lead to an "unknown" state, so a token is
*certain* (valid whatever the stack below), *uncertain* (checked against the
real stack at run time) or dead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leapgen.automata.dfa import Dfa, compile_dfa, minimize
from leapgen.automata.nfa import Nfa, table_ranges
from leapgen.automata.subset import determinize
from leapgen.automata.trim_kernel import useful_states
from leapgen.errors import CompileLimitError, GrammarError
from leapgen.grammar import ir

DEFAULT_MAX_STACK_DEPTH = 4096
CONTEXT_NFA_BUDGET = 20_000
#: Most DFA states of a context automaton beyond twice its rule's own; past it the next (smaller) of
#: CONTEXT_LEVELS is tried, so a failed level costs at most that many states of subset construction
#: (the last level gets four times as many). Measured on the bench_masks workload: 10,000 rather than
#: 40,000 cut leapgen's TBM mean by a third and its p99 by 40 % (fewer, smaller builds at first visits;
#: the extra uncertain tokens are cheap to walk).
CONTEXT_DFA_BUDGET = 10_000
#: (callee inlining depth, caller return levels) of context DFAs, tried in order. Measured on the
#: bench_masks workload: starting at (2, 2) rather than (3, 2) cut leapgen's TBM mean by 20 % at the same
#: p99 (smaller builds at first visits outweigh the extra uncertain tokens walked).
CONTEXT_LEVELS = ((2, 2), (1, 1), (1, 0), (0, 0))
#: Most frames a token classified *certain* by a context DFA can push above its top frame.
CONTEXT_INLINE_DEPTH = max(d for d, _ in CONTEXT_LEVELS)


class Stack:
    """An immutable stack of frames; ``parent`` is the stack below the top frame."""

    __slots__ = ("rule", "state", "parent", "depth", "_hash")

    def __init__(self, rule: int, state: int, parent: "Stack | None"):
        self.rule = rule
        self.state = state
        self.parent = parent
        self.depth = 1 if parent is None else parent.depth + 1
        self._hash = hash((rule, state, 0 if parent is None else parent._hash))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        a, b = self, other
        while a is not b:
            if (a is None or b is None or a._hash != b._hash or a.rule != b.rule or a.state != b.state):
                return False
            a, b = a.parent, b.parent
        return True

    def __repr__(self) -> str:
        frames = []
        s = self
        while s is not None and len(frames) < 8:
            frames.append(f"{s.rule}:{s.state}")
            s = s.parent
        return "Stack(" + " < ".join(frames) + (" ..." if s is not None else "") + ")"


Config = frozenset  # of Stack


@dataclass(frozen=True, slots=True)
class Expansion:
    """What a configuration can do next without consuming a byte.

    Attributes
    ----------
    frames : tuple of Stack
        Stacks whose top frame has a byte edge.
    next_bytes : numpy.ndarray
        bool, ``(256,)``: bytes some frame can consume.
    complete : bool
        The whole input may end here (root rule finished, empty stack below).
    """

    frames: tuple
    next_bytes: np.ndarray
    complete: bool


class Pda:
    """The rules of a context-free grammar as DFAs with call edges (immutable).

    Parameters
    ----------
    grammar : ir.Grammar
        Root plus recursive rules (see :func:`leapgen.grammar.cfg.simplify_grammar`).
    max_states : int
        Limit on each rule's automaton states.
    max_stack_depth : int
        Deepest stack kept (see module docstring).

    Raises
    ------
    GrammarError
        Left recursion; the root can never finish.
    CompileLimitError
        A rule's automaton is too large.
    """

    def __init__(self, grammar: ir.Grammar, *, max_states: int, max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH):
        self.names = [grammar.root] + [n for n in grammar.rules if n != grammar.root]
        rule_ids = {n: i for i, n in enumerate(self.names)}
        self.max_stack_depth = max_stack_depth
        dfas = [compile_dfa(grammar.rules[n], max_states=max_states, rule_ids=rule_ids) for n in self.names]
        self.dfas = self._drop_unproductive(dfas)
        self._check_left_recursion()
        n_rules = len(self.names)
        self.byte_trans = [np.ascontiguousarray(d.trans[:, :256]) for d in self.dfas]
        self.byte_flat = [memoryview(t.reshape(-1)) for t in self.byte_trans]
        self.has_bytes = [(t >= 0).any(axis=1).tolist() for t in self.byte_trans]
        self.accepting = [d.accepting.tolist() for d in self.dfas]
        self.calls: list[list[tuple[tuple[int, int], ...]]] = []
        for d in self.dfas:
            per_state: list[list[tuple[int, int]]] = [[] for _ in range(d.n_states)]
            block = d.trans[:, 256:256 + n_rules]
            qs, callees = np.nonzero(block >= 0)
            for q, callee, ret in zip(qs.tolist(), callees.tolist(), block[qs, callees].tolist()):
                per_state[q].append((callee, ret))
            self.calls.append([tuple(c) for c in per_state])
        # exit states: accepting, with no byte and no call edge (a frame there can only pop)
        self.is_exit = [[acc and not nb and not cl for acc, nb, cl in zip(a, h, c)]
                        for a, h, c in zip(self.accepting, self.has_bytes, self.calls)]
        self.start_config: Config = frozenset((Stack(0, self.dfas[0].start, None),))

    # -- compile-time analysis -----------------------------------------------------------------

    def _drop_unproductive(self, dfas: list[Dfa]) -> list[Dfa]:
        n = len(dfas)
        productive = [False] * n
        changed = True
        while changed:
            changed = False
            for r, d in enumerate(dfas):
                if not productive[r] and self._reaches_accept(d, [256 + c for c in range(n) if productive[c]]):
                    productive[r] = changed = True
        if not productive[0]:
            raise GrammarError(f"the grammar matches nothing: rule {self.names[0]!r} can never finish")
        dead_cols = [256 + c for c in range(n) if not productive[c]]
        out = []
        for d in dfas:
            if dead_cols and (d.trans[:, dead_cols] >= 0).any():
                t = d.trans.copy()
                t[:, dead_cols] = -1
                d = minimize(Dfa(t, d.accepting, d.start))
            out.append(d)
        return out

    @staticmethod
    def _reaches_accept(d: Dfa, call_cols: list[int]) -> bool:
        """Whether ``d`` accepts some string over bytes and the call symbols ``call_cols``."""
        cols = np.concatenate((np.arange(256), np.asarray(call_cols, np.int64)))
        return bool(useful_states(d.trans, d.start, d.accepting, cols)[d.start])

    def _check_left_recursion(self) -> None:
        n = len(self.dfas)
        nullable = [False] * n
        changed = True
        while changed:
            changed = False
            for r, d in enumerate(self.dfas):
                if not nullable[r] and self._empty_reach(d, nullable)[1]:
                    nullable[r] = changed = True
        left: dict[int, set[int]] = {}
        for r, d in enumerate(self.dfas):
            reach, _ = self._empty_reach(d, nullable)
            left[r] = {c for q in reach for c in range(n) if d.trans[q, 256 + c] >= 0}
        for r in range(n):
            seen, todo = set(), list(left[r])
            while todo:
                c = todo.pop()
                if c == r:
                    raise GrammarError(f"rule {self.names[r]!r} is left-recursive (it can call itself before "
                                       "consuming any text); rewrite it with repetition")
                if c not in seen:
                    seen.add(c)
                    todo.extend(left[c])

    @staticmethod
    def _empty_reach(d: Dfa, nullable: list[bool]) -> tuple[set[int], bool]:
        """States reachable from the start through calls of nullable rules only."""
        seen = {d.start}
        todo = [d.start]
        while todo:
            q = todo.pop()
            for c, ok in enumerate(nullable):
                t = int(d.trans[q, 256 + c])
                if ok and t >= 0 and t not in seen:
                    seen.add(t)
                    todo.append(t)
        return seen, any(d.accepting[q] for q in seen)

    # -- run time --------------------------------------------------------------------------------

    def expand(self, config: Config) -> Expansion:
        """Follow calls and returns from every stack of ``config`` (pure)."""
        seen: set[Stack] = set()
        frames = []
        complete = False
        work = list(config)
        while work:
            s = work.pop()
            if s in seen:
                continue
            seen.add(s)
            r, q = s.rule, s.state
            if self.has_bytes[r][q]:
                frames.append(s)
            for callee, ret in self.calls[r][q]:
                if self.is_exit[r][ret]:
                    # a tail call: the return frame could only pop, so the callee returns to our caller
                    # (right recursion such as ``items ::= item items?`` keeps a constant depth)
                    work.append(Stack(callee, self.dfas[callee].start, s.parent))
                elif s.depth < self.max_stack_depth:
                    work.append(Stack(callee, self.dfas[callee].start, Stack(r, ret, s.parent)))
            if self.accepting[r][q]:
                if s.parent is None:
                    complete = True
                else:
                    work.append(s.parent)
        next_bytes = np.zeros(256, bool)
        for s in frames:
            next_bytes |= self.byte_trans[s.rule][s.state] >= 0
        return Expansion(tuple(frames), next_bytes, complete)

    def step(self, expansion: Expansion, byte: int) -> Config:
        """Consume one byte from an expansion; an empty result means rejected."""
        out = set()
        for s in expansion.frames:
            t = self.byte_flat[s.rule][(s.state << 8) | byte]
            if t >= 0:
                out.add(Stack(s.rule, t, s.parent))
        return frozenset(out)

    # -- context DFAs ------------------------------------------------------------------------------

    def context_dfa(self, rule: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """The context DFA of ``rule`` (see module docstring).

        Callees are inlined ``depth`` levels deep; the rule's exit continues
        into every place the rule is called from (``return_levels`` levels of
        callers; a union over callers, so it over-approximates) and then into
        the "unknown" state. Only states of the rule itself and of its inlined
        callees are *certain*.

        Returns
        -------
        trans_flat : numpy.ndarray
            int32, ``(n * 256,)`` byte transitions.
        certain : numpy.ndarray
            bool, ``(n,)``: a token ending here is valid whatever the stack below.
        entry : list of int
            The context-DFA state of each of the rule's DFA states.
        """
        budget = CONTEXT_DFA_BUDGET + 2 * self.dfas[rule].n_states
        for i, (depth, return_levels) in enumerate(CONTEXT_LEVELS):
            last = i == len(CONTEXT_LEVELS) - 1
            try:
                return self._build_context_dfa(rule, depth, return_levels, 4 * budget if last else budget)
            except CompileLimitError:
                continue  # fewer inlined levels: more tokens are checked at run time
        raise CompileLimitError(f"context automaton of rule {self.names[rule]!r} is too large")

    def _call_sites(self) -> list[list[tuple[int, int]]]:
        sites: list[set[tuple[int, int]]] = [set() for _ in self.dfas]
        for caller, per_state in enumerate(self.calls):
            for calls in per_state:
                for callee, ret in calls:
                    sites[callee].add((caller, ret))
        return [sorted(s) for s in sites]

    def _byte_ranges(self, rule: int) -> np.ndarray:
        """The byte edges of ``rule``'s DFA as int32 rows ``(q, lo, hi, target)`` (cached, read-only)."""
        cache = self.__dict__.setdefault("_ranges_cache", {})
        got = cache.get(rule)
        if got is None:
            got = cache[rule] = table_ranges(self.byte_trans[rule])
        return got

    def _build_context_dfa(self, rule: int, depth: int, return_levels: int, max_states: int):
        nfa = Nfa(CONTEXT_NFA_BUDGET, None)
        unknown = nfa.new_state()
        nfa.add_edge(unknown, 0, 255, unknown)
        certain = nfa.new_state()
        sites = self._call_sites()
        embedded: dict[tuple, int] = {}
        returns: dict[tuple[int, int], int] = {}

        def embed(r: int, d: int, exit_target: int, sure: bool) -> int:
            """The first NFA state of a copy of rule ``r``'s DFA (its states are consecutive)."""
            key = (r, d, exit_target, sure)
            if key in embedded:
                return embedded[key]
            base = embedded[key] = nfa.new_states(self.dfas[r].n_states)
            ranges = self._byte_ranges(r).copy()
            ranges[:, 0] += base
            ranges[:, 3] += base
            nfa.add_edge_block(ranges)
            for q in range(self.dfas[r].n_states):
                b = base + q
                if sure:
                    nfa.add_eps(b, certain)
                for callee, ret in self.calls[r][q]:
                    if d == 0:
                        nfa.add_eps(b, unknown)
                    else:
                        nfa.add_eps(b, embed(callee, d - 1, base + ret, sure) + self.dfas[callee].start)
                if self.accepting[r][q]:
                    nfa.add_eps(b, exit_target)
            return base

        def return_to_callers(r: int, levels: int) -> int:
            key = (r, levels)
            if key not in returns:
                node = returns[key] = nfa.new_state()
                if levels == 0:
                    nfa.add_eps(node, unknown)
                else:
                    for caller, ret in sites[r]:
                        base = embed(caller, max(depth - 1, 0), return_to_callers(caller, levels - 1), False)
                        nfa.add_eps(node, base + ret)
            return returns[key]

        base = embed(rule, depth, return_to_callers(rule, return_levels), True)
        starts = list(range(base, base + self.dfas[rule].n_states))
        trans, accepting, entry = determinize(nfa, starts, certain, max_states)
        return np.ascontiguousarray(trans.reshape(-1)), accepting, entry
