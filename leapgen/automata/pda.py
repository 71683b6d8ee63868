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
bound): tokens that would nest deeper are masked off, and accepting such a
token or string raises :class:`~leapgen.errors.StackDepthError` (see
:meth:`GrammarMatcher.accept_token`).

Token masks (:mod:`leapgen.compiler.compiled_cfg`) walk the vocabulary
trie through the rules' byte transitions in numba kernels
(:mod:`leapgen.compiler.pda_kernels`); :attr:`Pda.trans_flat` and the call
arrays hold every rule over global state ids for them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leapgen.automata.dfa import Dfa, compile_dfa, minimize
from leapgen.automata.trim_kernel import useful_states
from leapgen.errors import GrammarError
from leapgen.grammar import ir

DEFAULT_MAX_STACK_DEPTH = 4096


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
        Stacks whose top frame has a byte edge (:meth:`Pda.next_bytes`: the
        bytes they can consume).
    complete : bool
        The whole input may end here (root rule finished, empty stack below).
    """

    frames: tuple
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
        sizes = [d.n_states for d in self.dfas]
        #: int64 ``(n_rules + 1,)``: rule ``r``'s states are global ids ``state_base[r]:state_base[r + 1]``.
        self.state_base = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self._base = base = self.state_base.tolist()
        byte_tables = [d.trans[:, :256] for d in self.dfas]
        #: int32 ``(n_states * 256,)``: every rule's byte transitions over global state ids, -1 dead.
        self.trans_flat = np.concatenate([np.where(t >= 0, t + b, -1).astype(np.int32).reshape(-1)
                                          for t, b in zip(byte_tables, base)])
        self._trans_view = memoryview(self.trans_flat)
        self.has_bytes = [(t >= 0).any(axis=1).tolist() for t in byte_tables]
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
        self._pack_calls()

    def _pack_calls(self) -> None:
        """The global arrays of :mod:`leapgen.compiler.pda_kernels` (see :func:`pda_walk`)."""
        base = self._base
        flat = lambda per_rule: np.array([x for rows in per_rule for x in rows], np.bool_)  # noqa: E731
        #: bool ``(n_states,)`` over global ids.
        self.has_bytes_flat = flat(self.has_bytes)
        self.accepting_flat = flat(self.accepting)
        self._pack_leave_bytes()
        ptr, start, ret, tail = [0], [], [], []
        for r, rows in enumerate(self.calls):
            for calls in rows:
                for callee, back in calls:
                    start.append(base[callee] + self.dfas[callee].start)
                    ret.append(base[r] + back)
                    tail.append(self.is_exit[r][back])
                ptr.append(len(start))
        self.call_ptr = np.array(ptr, np.int32)
        self.call_start = np.array(start, np.int32)
        self.call_ret = np.array(ret, np.int32)
        self.call_tail = np.array(tail, np.bool_)
        sizes = np.diff(self.state_base)
        #: int32 ``(n_states,)``: the rule of each global state.
        self.rule_of = np.repeat(np.arange(len(self.dfas), dtype=np.int32), sizes)
        # the return sites of each rule: the states a frame of the rule may return to, over every call site
        # (a tail call's callee returns where its caller returns); the root's none (the end of the input)
        sites: list[set[int]] = [set() for _ in self.dfas]
        tails: list[set[int]] = [set() for _ in self.dfas]  # tails[r]: the callers that tail-call rule r
        for r, rows in enumerate(self.calls):
            for calls in rows:
                for callee, back in calls:
                    (tails[callee].add(r) if self.is_exit[r][back] else sites[callee].add(base[r] + back))
        changed = True
        while changed:
            changed = False
            for r, callers in enumerate(tails):
                for c in callers:
                    if not sites[c] <= sites[r]:
                        sites[r] |= sites[c]
                        changed = True
        #: int32 ``(n_rules + 1,)`` and ``(m,)``: rule ``r`` returns to ``ret_site[ret_ptr[r]:ret_ptr[r + 1]]``.
        self.ret_ptr = np.concatenate(([0], np.cumsum([len(x) for x in sites]))).astype(np.int32)
        self.ret_site = np.array([g for x in sites for g in sorted(x)], np.int32)

    @property
    def walk_arrays(self) -> tuple[np.ndarray, ...]:
        """The arrays :func:`~leapgen.compiler.pda_kernels.pda_walk` takes first, in its order."""
        return (self.trans_flat, self.has_bytes_flat, self.accepting_flat, self.call_ptr, self.call_start,
                self.call_ret, self.call_tail, self.rule_of, self.ret_ptr, self.ret_site, self.leave_row,
                self.leave_bytes)

    def _pack_leave_bytes(self) -> None:
        """Where a frame may leave its rule, and with which next bytes.

        ``leave_row`` (int32 ``(n_states,)``) is -1 where a frame can neither
        call nor return, else a row of ``leave_bytes`` (bool ``(m, 256)``,
        distinct rows): the bytes that can start one of the state's callees
        (every byte for a callee that may match nothing) and, for an
        accepting state, the rule's FOLLOW set (the bytes that may come first
        after it returns, over every call site: the classic LL(1) FOLLOW
        computation, here over bytes).
        """
        n = len(self.dfas)
        first, sites = [], [set() for _ in range(n)]
        for r, d in enumerate(self.dfas):
            exp = self.expand(frozenset((Stack(r, d.start, None),)))
            first.append(self.next_bytes(exp) if not exp.complete else np.ones(256, np.bool_))
            for calls in self.calls[r]:
                for callee, ret in calls:
                    sites[callee].add((r, ret))
        # follow[r]: the bytes that may come first after rule r returns (a fixpoint over the call sites;
        # the root is followed by the end of the input)
        after = {}
        for r in range(n):
            for caller, ret in sites[r]:
                if (caller, ret) not in after:
                    after[caller, ret] = self.expand(frozenset((Stack(caller, ret, None),)))
        follow = [np.zeros(256, np.bool_) for _ in range(n)]
        changed = True
        while changed:
            changed = False
            for r in range(n):
                got = follow[r].copy()
                for caller, ret in sites[r]:
                    exp = after[caller, ret]
                    got |= self.next_bytes(exp)
                    if exp.complete:
                        got |= follow[caller]
                if (got != follow[r]).any():
                    follow[r], changed = got, True
        rows: dict[tuple, int] = {}  # (rule if accepting else -1, callees) -> row of table
        table, leave_row = [], []
        for r, calls in enumerate(self.calls):
            for q, edges in enumerate(calls):
                if not (self.accepting[r][q] or edges):
                    leave_row.append(-1)
                    continue
                key = (r if self.accepting[r][q] else -1, tuple(sorted({callee for callee, _ in edges})))
                row = rows.get(key)
                if row is None:
                    got = follow[r].copy() if key[0] >= 0 else np.zeros(256, np.bool_)
                    for callee in key[1]:
                        got |= first[callee]
                    row = rows[key] = len(table)
                    table.append(got)
                leave_row.append(row)
        self.leave_row = np.array(leave_row, np.int32)
        self.leave_bytes = np.array(table, np.bool_).reshape(-1, 256)

    def stack_arrays(self, config: Config, max_frames: int) -> tuple[np.ndarray, ...]:
        """A configuration's stacks for :func:`~leapgen.compiler.pda_kernels.pda_walk` (pure).

        Returns
        -------
        frames : numpy.ndarray
            int32 ``(n_stacks, k)``: global states, top frame first, at most ``max_frames`` per stack.
        count : numpy.ndarray
            int32 ``(n_stacks,)``: frames given per stack.
        cut : numpy.ndarray
            bool ``(n_stacks,)``: the stack goes on below the frames given.
        depth : numpy.ndarray
            int32 ``(n_stacks,)``: each stack's depth.
        """
        stacks = list(config)
        n = len(stacks)
        width = min(max((s.depth for s in stacks), default=1), max_frames)
        flat = [s.depth for s in stacks] + [min(s.depth, max_frames) for s in stacks]  # one array built
        for s in stacks:
            top = self.top_frames(s, width)
            flat += top + [0] * (width - len(top))
        arr = np.array(flat, np.int32)
        depth, count = arr[:n], arr[n:2 * n]
        return arr[2 * n:].reshape(n, width), count, depth > count, depth

    def top_frames(self, stack: Stack, n: int) -> list[int]:
        """The global states of the top ``n`` frames of ``stack``, top first (fewer where it is shorter)."""
        base, out = self._base, []
        while stack is not None and len(out) < n:
            out.append(base[stack.rule] + stack.state)
            stack = stack.parent
        return out

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

    def expand(self, config: Config, max_depth: int | None = None) -> Expansion:
        """Follow calls and returns from every stack of ``config`` (pure); pushes
        past ``max_depth`` (default ``max_stack_depth``) are cut."""
        limit = self.max_stack_depth if max_depth is None else max_depth
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
                elif s.depth < limit:
                    work.append(Stack(callee, self.dfas[callee].start, Stack(r, ret, s.parent)))
            if self.accepting[r][q]:
                if s.parent is None:
                    complete = True
                else:
                    work.append(s.parent)
        return Expansion(tuple(frames), complete)

    def next_bytes(self, expansion: Expansion) -> np.ndarray:
        """bool ``(256,)``: the bytes some frame of ``expansion`` can consume (a fresh array)."""
        out = np.zeros(256, bool)
        base = self._base
        for s in expansion.frames:
            g = base[s.rule] + s.state
            out |= self.trans_flat[g << 8:(g + 1) << 8] >= 0
        return out

    def step(self, expansion: Expansion, byte: int) -> Config:
        """Consume one byte from an expansion; an empty result means rejected."""
        out = set()
        trans, base = self._trans_view, self._base
        for s in expansion.frames:
            b = base[s.rule]
            t = trans[((b + s.state) << 8) | byte]
            if t >= 0:
                out.add(Stack(s.rule, t - b, s.parent))
        return frozenset(out)
