"""Pushdown automaton over per-rule byte-level DFAs.

Each recursive rule of a context-free grammar is compiled to a DFA over bytes
plus *call symbols* (``256 + callee``). A parse configuration is a set of
stacks of frames, each frame a *global state* (the rule's state offset by
:attr:`Pda.state_base`); stacks are interned as ints in the grammar's
:class:`~leapgen.automata.pda_stacks.StackStore`, so they share their tails
(xgrammar's persistent stack, Dong et al., 2024, "XGrammar", section 3.3),
and a configuration is a sorted tuple of stack ids: hashable, and nothing
the garbage collector tracks.

- expand: from each stack, follow call edges (push) and finished rules (pop)
  without consuming bytes, keeping the frames that can consume a byte;
- step: consume one byte from the expanded frames.

Left recursion is refused at compile time; every other push consumes a byte
before it can recur, so expansion terminates. A call whose return state can
only pop (a tail call) pushes no return frame, so right recursion keeps a
constant depth; calls from a rule with options (:class:`~leapgen.grammar.ir.RuleOptions`:
a temperature, a budget) are never tail calls, so its frame shows it active
until it ends. Stacks deeper than ``max_stack_depth`` are cut (documented
bound): tokens that would nest deeper are masked off, and accepting such a
token or string raises :class:`~leapgen.errors.StackDepthError` (see
:meth:`GrammarMatcher.accept_token`).

Token masks (:mod:`leapgen.compiler.compiled_cfg`) walk the vocabulary
trie through the rules' byte transitions in numba kernels
(:mod:`leapgen.compiler.pda_kernels`); :attr:`Pda.trans_flat` and the call
arrays hold every rule over global state ids for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from leapgen.automata.dfa import Dfa, compile_dfa, minimize
from leapgen.automata.keyed import KeyGuards
from leapgen.automata.pda_stacks import EMPTY, StackStore
from leapgen.automata.pda_tables import rule_byte_table
from leapgen.automata.tables import empty_table, full_table
from leapgen.automata.trim_kernel import csr_edges, useful_states
from leapgen.errors import AmbiguityLimitError, GrammarError
from leapgen.grammar import ir

DEFAULT_MAX_STACK_DEPTH = 4096
#: The most stacks one configuration's expansion may hold (:class:`~leapgen.errors.AmbiguityLimitError`
#: past it): an ambiguous grammar can have a number of parses exponential in the input's length (issue 15,
#: GBNF fuzz seed 88: 5,847 stacks after 8 bytes, the store's 1,048,576 after 12); unambiguous grammars
#: hold a few. The bound of llguidance's ``max_items_in_row`` (2,000 Earley items a row) in spirit.
MAX_CONFIG_STACKS = 20_000


#: A configuration: the sorted ids (:class:`StackStore`) of its stacks.
Config = tuple


class RuleDfas(Sequence):
    """A built automaton's rule DFAs (:attr:`Pda.dfas`), each rebuilt when asked for from the global
    tables: the byte transitions of :attr:`Pda.trans_flat` less the rule's base, the call columns
    from the packed call edges. Kept as compiled, the rule tables held every byte transition a
    second time (~1 KiB a state: ~50 MB for a grammar of 50,000 states); only serialization, rule
    budgets and structural tags read them after the build. Immutable; each item is a new
    :class:`Dfa` (int32 ``(n, 256 + n_rules)``).

    Parameters
    ----------
    trans_flat, state_base, accepting_flat, starts
        The :class:`Pda`'s arrays of the same names (``starts``: each rule's own start state).
    calls : tuple of numpy.ndarray
        ``(call_ptr, call_start, call_ret, rule_of)`` of the :class:`Pda`.
    """

    __slots__ = ("_trans", "_base", "_accepting", "_starts", "_calls")

    def __init__(self, trans_flat, state_base, accepting_flat, starts, calls):
        self._trans, self._base, self._accepting, self._starts, self._calls = (
            trans_flat, state_base, accepting_flat, starts, calls)

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, r):
        if isinstance(r, slice):
            return [self[i] for i in range(*r.indices(len(self)))]
        r = range(len(self))[r]  # IndexError out of range
        lo, hi = int(self._base[r]), int(self._base[r + 1])
        trans = full_table((hi - lo, 256 + len(self)), -1, np.int32)
        glob = self._trans[lo * 256:hi * 256].reshape(hi - lo, 256)
        np.subtract(glob, lo, out=trans[:, :256], where=glob >= 0)
        call_ptr, call_start, call_ret, rule_of = self._calls
        a, b = int(call_ptr[lo]), int(call_ptr[hi])
        state = np.repeat(np.arange(hi - lo), np.diff(call_ptr[lo:hi + 1]))
        trans[state, 256 + rule_of[call_start[a:b]]] = call_ret[a:b] - lo
        return Dfa(trans, self._accepting[lo:hi], self._starts[r])


class Expansion(NamedTuple):
    """What a configuration can do next without consuming a byte (a plain
    ``(frames, complete)`` tuple where the runtime caches it).

    Attributes
    ----------
    frames : tuple of int
        Ids of the stacks whose top frame has a byte edge (:meth:`Pda.next_bytes`:
        the bytes they can consume).
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

    Attributes
    ----------
    stacks : StackStore
        The parse stacks met so far (the run-time part: grown by
        :meth:`expand` and :meth:`step`, shared by every matcher).

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
        dfas = [compile_dfa(grammar.rules[n], max_states=max_states, rule_ids=rule_ids) for n in self.names]
        #: The guarded calls of the grammar's keyed objects (empty for most grammars).
        self.guards = KeyGuards(grammar.keyed, rule_ids)
        self._setup(self._drop_unproductive(self._dead_if_empty(dfas, len(self.names))), max_stack_depth,
                    grammar.options)

    @classmethod
    def from_rule_dfas(cls, names: list[str], dfas: list[Dfa], *, max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
                       options: dict[str, ir.RuleOptions] | None = None) -> "Pda":
        """The automaton of rules already compiled: ``dfas[i]`` is rule ``names[i]``
        (the root first) over bytes and the call symbols ``256 + j``, as
        :attr:`dfas` holds them (used to read a serialized grammar back). It has no
        key guards: keyed objects are not serializable (see :mod:`leapgen.xgrammar`).

        Raises
        ------
        GrammarError
            Names and DFAs of different lengths, a call to no rule, left recursion.
        """
        if len(names) != len(dfas) or not names:
            raise GrammarError(f"{len(names)} rule names for {len(dfas)} rule automata")
        dfas = cls._dead_if_empty(list(dfas), len(names))
        if any(d.trans.shape[1] != 256 + len(names) for d in dfas):
            raise GrammarError(f"rule automata must have 256 + {len(names)} columns (bytes, then one per rule)")
        pda = cls.__new__(cls)
        pda.names = list(names)
        pda.guards = KeyGuards((), {})
        pda._setup(dfas, max_stack_depth, options or {})
        return pda

    @staticmethod
    def _dead_if_empty(dfas: list[Dfa], n_rules: int) -> list[Dfa]:
        """A rule matching nothing (an empty key region, say) as one dead state, as wide as the others."""
        width = 256 + n_rules
        return [Dfa(np.full((1, width), -1, np.int32), np.zeros(1, bool), 0) if d.is_empty else d for d in dfas]

    def _setup(self, dfas: list[Dfa], max_stack_depth: int, options: dict) -> None:
        self.max_stack_depth = max_stack_depth
        #: The most stacks an expansion may hold (:data:`MAX_CONFIG_STACKS`; see :meth:`expand`).
        self.max_config_stacks = MAX_CONFIG_STACKS
        self.dfas = dfas
        #: Each rule's options (``None`` without), by rule id; see :class:`~leapgen.grammar.ir.RuleOptions`.
        self.options: list[ir.RuleOptions | None] = [options.get(n) for n in self.names]
        #: Whether some rule sets a temperature / a token or character budget.
        self.has_temperature = any(o is not None and o.temperature is not None for o in self.options)
        self.has_budget = any(o is not None and o.has_budget for o in self.options)
        self._check_left_recursion()
        n_rules = len(self.names)
        sizes = [d.n_states for d in self.dfas]
        #: int64 ``(n_rules + 1,)``: rule ``r``'s states are global ids ``state_base[r]:state_base[r + 1]``.
        self.state_base = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self._base = base = tuple(self.state_base.tolist())
        #: int32 ``(n_states * 256,)``: every rule's byte transitions over global state ids, -1 dead.
        self.trans_flat = empty_table(int(self.state_base[-1]) * 256, np.int32)
        has_bytes = np.empty(int(self.state_base[-1]), np.bool_)
        for d, lo, hi in zip(self.dfas, base, base[1:]):
            rule_byte_table(d.trans, lo, self.trans_flat[lo * 256:hi * 256], has_bytes[lo:hi])
        self._trans_view = memoryview(self.trans_flat)
        #: bool ``(n_states,)`` over global ids.
        self.has_bytes_flat = has_bytes
        self.accepting_flat = np.concatenate([d.accepting for d in self.dfas]).astype(np.bool_)
        # per rule, per state; tuples of ints and bools, which the garbage collector stops tracking (a
        # grammar's lists of tens of thousands of states were millions of references for each full collection)
        self.has_bytes = tuple(tuple(has_bytes[lo:hi].tolist()) for lo, hi in zip(base, base[1:]))
        self.accepting = tuple(tuple(d.accepting.tolist()) for d in self.dfas)
        #: int32 ``(n_states,)``: the rule of each global state.
        self.rule_of = np.repeat(np.arange(n_rules, dtype=np.int32), sizes)
        edges = self._call_edges()
        edge_rule, edge_state = edges[:2]
        calls: list[list] = [[()] * n for n in sizes]  # the states without calls share one empty tuple
        for r, q, callee, ret in zip(*(e.tolist() for e in edges)):
            calls[r][q] += ((callee, ret),)
        self.calls: tuple[tuple[tuple[tuple[int, int], ...], ...], ...] = tuple(map(tuple, calls))
        has_call = np.zeros(len(has_bytes), np.bool_)
        has_call[self.state_base[edge_rule] + edge_state] = True
        # exit states: accepting, with no byte and no call edge (a frame there can only pop); a rule with
        # options has none, so its frame stays below its callees (a matcher sees it active to the end)
        no_options = np.array([o is None for o in self.options], np.bool_)
        exit_g = self.accepting_flat & ~has_bytes & ~has_call & no_options[self.rule_of]
        self.is_exit = tuple(tuple(exit_g[lo:hi].tolist()) for lo, hi in zip(base, base[1:]))
        # the run-time tables, per global state
        self._has_bytes_g = tuple(has_bytes.tolist())
        self._accepting_g = tuple(self.accepting_flat.tolist())
        # (callee's start, return state, tail call, callee rule where the call is guarded else -1)
        guarded = self.guards.by_callee
        calls_g: list = [()] * len(has_bytes)
        for r, rows in enumerate(self.calls):
            for q in np.flatnonzero(has_call[base[r]:base[r + 1]]).tolist():
                calls_g[base[r] + q] = tuple((base[callee] + self.dfas[callee].start, base[r] + ret,
                                              self.is_exit[r][ret], callee if callee in guarded else -1)
                                             for callee, ret in rows[q])
        self._calls_g = tuple(calls_g)
        #: Per global state: a frame there can neither call nor return, so its expansion is itself (plain
        #: bytes: :meth:`walk_plain`).
        self.plain_g = tuple((~has_call & ~self.accepting_flat).tolist())
        self.stacks = StackStore()
        self.start_config: Config = (self.stacks.push(base[0] + self.dfas[0].start, EMPTY),)
        self._pack_calls(edges, has_call, exit_g)
        #: Each rule's start state (its own id), by rule.
        self.starts: tuple[int, ...] = tuple(d.start for d in self.dfas)
        # the rule tables are rebuilt from the global ones when asked for (see RuleDfas): kept, they held
        # every byte transition a second time
        self.dfas = RuleDfas(self.trans_flat, self.state_base, self.accepting_flat, self.starts,
                             (self.call_ptr, self.call_start, self.call_ret, self.rule_of))

    def _call_edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every call edge of the rules' automata: its rule, the rule's own state it leaves, the callee and
        the return state (the rule's own), int64 ``(m,)`` each, by global state then callee."""
        call_columns = np.arange(256, 256 + len(self.dfas))
        parts = []
        for r, d in enumerate(self.dfas):
            row_start, rets, symbols = csr_edges(d.trans, call_columns)
            qs = np.repeat(np.arange(d.n_states), np.diff(row_start))
            parts.append((np.full(len(qs), r, np.int64), qs, symbols - 256, rets))
        return tuple(np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64) for i in range(4))

    def _pack_calls(self, edges: tuple, has_call: np.ndarray, exit_g: np.ndarray) -> None:
        """The global arrays of :mod:`leapgen.compiler.pda_kernels` (see :func:`pda_walk`), from
        :meth:`_call_edges`, the states with a call and the exit states (bool ``(n_states,)`` each)."""
        edge_rule, edge_state, edge_callee, edge_ret = edges
        self._pack_leave_bytes(edges, has_call)
        starts = self.state_base[:-1] + np.array([d.start for d in self.dfas], np.int64)
        ret_g = self.state_base[edge_rule] + edge_ret
        per_state = np.bincount(self.state_base[edge_rule] + edge_state, minlength=len(has_call))
        self.call_ptr = np.concatenate(([0], np.cumsum(per_state))).astype(np.int32)
        self.call_start = starts[edge_callee].astype(np.int32)
        self.call_ret = ret_g.astype(np.int32)
        self.call_tail = exit_g[ret_g]
        #: bool, per call: a keyed object's guarded call (its frame's keys decide; the kernels give up there).
        self.call_guarded = np.isin(edge_callee, list(self.guards.by_callee))
        # the return sites of each rule: the states a frame of the rule may return to, over every call site
        # (a tail call's callee returns where its caller returns); the root's none (the end of the input)
        sites: list[set[int]] = [set() for _ in self.dfas]
        tails: list[set[int]] = [set() for _ in self.dfas]  # tails[r]: the callers that tail-call rule r
        for r, callee, back, tail in zip(edge_rule.tolist(), edge_callee.tolist(), ret_g.tolist(),
                                         self.call_tail.tolist()):
            (tails[callee].add(r) if tail else sites[callee].add(back))
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
                self.call_ret, self.call_tail, self.call_guarded, self.rule_of, self.ret_ptr, self.ret_site,
                self.leave_row, self.leave_bytes)

    def _pack_leave_bytes(self, edges: tuple, has_call: np.ndarray) -> None:
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
        base, push = self._base, self.stacks.push
        for r, d in enumerate(self.dfas):  # (guards off: the bytes any frame may take, whatever its keys)
            exp = self.expand((push(base[r] + d.start, EMPTY),), guards=False)
            first.append(self.next_bytes(exp) if not exp.complete else np.ones(256, np.bool_))
        edge_rule, _, edge_callee, edge_ret = edges
        for r, callee, ret in zip(edge_rule.tolist(), edge_callee.tolist(), edge_ret.tolist()):
            sites[callee].add((r, ret))
        # follow[r]: the bytes that may come first after rule r returns (a fixpoint over the call sites;
        # the root is followed by the end of the input)
        after = {}
        for r in range(n):
            for caller, ret in sites[r]:
                if (caller, ret) not in after:
                    after[caller, ret] = self.expand((push(base[caller] + ret, EMPTY),), guards=False)
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
        table = []
        leave_row = np.full(len(has_call), -1, np.int32)  # -1 where a frame can neither call nor return
        for g in np.flatnonzero(self.accepting_flat | has_call).tolist():
            r = int(self.rule_of[g])
            q = g - base[r]
            key = (r if self.accepting[r][q] else -1, tuple(sorted({callee for callee, _ in self.calls[r][q]})))
            row = rows.get(key)
            if row is None:
                got = follow[r].copy() if key[0] >= 0 else np.zeros(256, np.bool_)
                for callee in key[1]:
                    got |= first[callee]
                row = rows[key] = len(table)
                table.append(got)
            leave_row[g] = row
        self.leave_row = leave_row
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
        n = len(config)
        depths = [self.stacks.depth[s] for s in config]
        width = min(max(depths, default=1), max_frames)
        flat = depths + [min(d, max_frames) for d in depths]  # one array built
        for s in config:
            top = self.stacks.frames(s, width)
            flat += top + [0] * (width - len(top))
        arr = np.array(flat, np.int32)
        depth, count = arr[:n], arr[n:2 * n]
        return arr[2 * n:].reshape(n, width), count, depth > count, depth

    def top_frames(self, stack: int, n: int) -> list[int]:
        """The global states of the top ``n`` frames of ``stack``, top first (fewer where it is shorter)."""
        return self.stacks.frames(stack, n)

    def rule_state(self, g: int) -> tuple[int, int]:
        """The rule and the rule's own state of global state ``g``."""
        r = int(self.rule_of[g])
        return r, g - self._base[r]

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
        return self._dead_if_empty(out, n)  # an unproductive rule minimizes to no state at all

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

    def expand(self, config: Config, max_depth: int | None = None, guards: bool = True) -> Expansion:
        """Follow calls and returns from every stack of ``config`` (pure in meaning; interns
        the stacks it meets); pushes past ``max_depth`` (default ``max_stack_depth``) are cut;
        a keyed object's calls only where its guards admit them (:mod:`leapgen.automata.keyed`;
        ``guards=False``: all, for analyses of what any frame may do).

        Raises
        ------
        AmbiguityLimitError
            The expansion would hold more than :attr:`max_config_stacks` stacks."""
        return Expansion(*self.expand_tuple(config, max_depth, guards))

    def expand_tuple(self, config: Config, max_depth: int | None = None,
                     guards: bool = True) -> tuple[tuple, bool]:
        """:meth:`expand` as a plain ``(frames, complete)`` tuple (what the runtime caches)."""
        store = self.stacks
        top, below, depth, push, keys_of = store.top, store.below, store.depth, store.push, store.keys
        if len(config) == 1 and self.plain_g[top[config[0]]]:  # most configurations: one frame that only reads
            return (config if self._has_bytes_g[top[config[0]]] else ()), False
        limit = self.max_stack_depth if max_depth is None else max_depth
        has_bytes, accepting, calls, admit = self._has_bytes_g, self._accepting_g, self._calls_g, self.guards.admit
        seen: set[int] = set()
        frames = []
        complete = False
        work = list(config)
        cap = self.max_config_stacks
        while work:
            s = work.pop()
            if s in seen:
                continue
            seen.add(s)
            if len(seen) > cap:
                raise self.ambiguity_error(self.rule_of[top[x]] for x in seen)
            g = top[s]
            if has_bytes[g]:
                frames.append(s)
            edges = calls[g]
            if edges:
                b = below[s]
                keys = keys_of.get(s, 0)
                for start, ret, tail, guard in edges:
                    after = keys
                    if guard >= 0 and guards:
                        after = admit(guard, keys)
                        if after is None:  # refused: a key written already, out of order, or a dead end
                            continue
                    if tail:
                        # a tail call: the return frame could only pop, so the callee returns to our caller
                        # (right recursion such as ``items ::= item items?`` keeps a constant depth)
                        work.append(push(start, b))
                    elif depth[s] < limit:
                        work.append(push(start, push(ret, b, after)))
            if accepting[g]:
                b = below[s]
                if b == EMPTY:
                    complete = True
                else:
                    work.append(b)
        frames.sort()
        return tuple(frames), complete

    def ambiguity_error(self, rules) -> AmbiguityLimitError:
        """The error of an expansion past :attr:`max_config_stacks`; ``rules`` (ints): the rule on top of
        each of its stacks, named in the message by count."""
        counts = np.bincount(np.fromiter(rules, np.int64), minlength=len(self.names))
        worst = np.argsort(-counts, kind="stable")[:3]
        names = ", ".join(f"{self.names[r]!r} ({int(counts[r]):,})" for r in worst.tolist() if counts[r])
        return AmbiguityLimitError(
            f"the grammar is too ambiguous to follow here: more than {self.max_config_stacks:,} parse stacks at "
            f"once, on top of them rules {names}; the parses multiply with the input (a rule that can recur in "
            "several ways over the same bytes): rewrite those rules so that fewer parses stay open")

    def walk_plain(self, config: Config, data: bytes, i: int) -> tuple[Config | None, int]:
        """Consume ``data[i:]`` while ``config`` is one stack whose top frame is plain
        (:attr:`plain_g`): rule-internal bytes, one table read each, the stack interned once at
        the end. Returns the configuration (None: rejected) and where it stopped (pure in meaning)."""
        if len(config) != 1:
            return config, i
        store = self.stacks
        s = config[0]
        g = store.top[s]
        plain, trans = self.plain_g, self._trans_view
        j, n = i, len(data)
        while j < n and plain[g]:
            g = trans[(g << 8) | data[j]]
            if g < 0:
                return None, j
            j += 1
        if j == i:
            return config, i
        return (store.push(g, store.below[s], store.keys.get(s, 0)),), j

    def next_bytes(self, expansion: tuple) -> np.ndarray:
        """bool ``(256,)``: the bytes some frame of ``expansion`` (an :class:`Expansion` or its
        plain tuple) can consume (a fresh array)."""
        out = np.zeros(256, bool)
        top = self.stacks.top
        for s in expansion[0]:
            g = top[s]
            out |= self.trans_flat[g << 8:(g + 1) << 8] >= 0
        return out

    def step(self, expansion: tuple, byte: int) -> Config:
        """Consume one byte from an expansion (an :class:`Expansion` or its plain tuple); an
        empty result means rejected."""
        out = set()
        trans = self._trans_view
        store = self.stacks
        top, below, push, keys = store.top, store.below, store.push, store.keys
        for s in expansion[0]:
            t = trans[(top[s] << 8) | byte]
            if t >= 0:
                out.add(push(t, below[s], keys.get(s, 0)))
        return tuple(sorted(out))
