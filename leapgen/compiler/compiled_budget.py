"""BudgetedGrammar: a context-free grammar with token / character budgets on rules.

EBNF ``name[max_tokens=N]`` and ``name[max_chars=N]`` (xgrammar's rule
options, :class:`~leapgen.grammar.ir.RuleOptions`) give every occurrence of a
rule a budget. Its semantics are xgrammar's, as its documentation states them
and as the installed xgrammar 0.2 behaves:

- a token counts against an occurrence when the occurrence was already active
  (in the expanded configuration) where the token starts; a character (a code
  point, counted at its first UTF-8 byte) counts wherever it is consumed
  inside the occurrence (nested rules included);
- an occurrence whose budget is spent must end at the first point where it can:
  for ``max_tokens`` the next token boundary, for ``max_chars`` the next
  character boundary, inside a token too. Where it cannot end yet, the budget
  is relaxed until it can (the output stays grammatical);
- ``accept_string`` counts as one token, as xgrammar 0.2 does, but is not
  refused where a spent token budget would end an occurrence (xgrammar's
  documentation says strings do not count at all; the installed xgrammar,
  the oracle of the tests, counts them).

The matcher state is a configuration of :class:`BudgetStack` (a parse stack
whose budgeted frames carry their counters). Token masks start from the mask of
the same configuration without counters (cached, exact wherever no budget can
bite within the next token) and, where one can, keep only the tokens that a
byte-by-byte walk with the budgets accepts.
"""

from __future__ import annotations

import warnings

import numpy as np

from leapgen.automata.pda import Config
from leapgen.automata.pda_stacks import EMPTY
from leapgen.compiler.compiled import CompiledGrammar
from leapgen.compiler.compiled_cfg import ContextFreeGrammar
from leapgen.errors import GrammarError

_MAX_CACHE = 1 << 14
#: Below this many tokens long enough for a character budget to bite, the byte-by-byte walk of each
#: (:meth:`BudgetedGrammar._drop_rejected`) is cheaper than the vectorized filter over the vocabulary.
FAST_FILTER_TOKENS = 2_000


class BudgetStack:
    """An immutable parse stack (a linked list of frames, where the plain runtime interns
    stacks in a :class:`~leapgen.automata.pda_stacks.StackStore`), whose
    frames of budgeted rules carry ``budget = (tokens, chars, fresh)``: the
    tokens and characters the occurrence has used, and whether it began inside
    the current token (then that token does not count)."""

    __slots__ = ("rule", "state", "parent", "budget", "has_budget", "depth", "_hash")

    def __init__(self, rule: int, state: int, parent: "BudgetStack | None", budget: tuple | None):
        self.rule, self.state, self.parent, self.budget = rule, state, parent, budget
        self.has_budget = budget is not None or (parent is not None and parent.has_budget)
        self.depth = 1 if parent is None else parent.depth + 1
        self._hash = hash((rule, state, budget, 0 if parent is None else parent._hash))

    @property
    def occurrence(self) -> tuple:
        """What identifies the rule occurrence of this (budgeted) frame, whatever
        its state: its rule, its counters and the stack below it."""
        return (self.rule, self.budget, self.parent)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        a, b = self, other
        while a is not b:
            if (a is None or b is None or a._hash != b._hash or a.rule != b.rule or a.state != b.state
                    or a.budget != b.budget):
                return False
            a, b = a.parent, b.parent
        return True

    def frames(self):
        """The frames from the top down."""
        s = self
        while s is not None:
            yield s
            s = s.parent

    def __repr__(self) -> str:
        return "BudgetStack(" + " < ".join(f"{s.rule}:{s.state}{'' if s.budget is None else list(s.budget)}"
                                           for s in self.frames()) + ")"


def _count_token(budget: tuple) -> tuple:
    """A budget after a token (or string) ended: one more token unless the
    occurrence began inside it."""
    return (budget[0] + (not budget[2]), budget[1], False)


def _rebuild(stack: BudgetStack | None, change) -> BudgetStack | None:
    """``stack`` with ``change(budget) -> budget`` applied to each budgeted frame
    (frames above the deepest budgeted one rebuilt, the rest shared)."""
    if stack is None or not stack.has_budget:
        return stack
    budget = stack.budget if stack.budget is None else change(stack.budget)
    return BudgetStack(stack.rule, stack.state, _rebuild(stack.parent, change), budget)


class BudgetedGrammar(CompiledGrammar):
    """A context-free grammar whose rules have token or character budgets (see the
    module docstring); matcher states are frozensets of :class:`BudgetStack`.

    Attributes
    ----------
    pda : Pda
        The rules' automata.
    plain : ContextFreeGrammar
        The same grammar without budgets: it computes the masks this one filters.
    token_chars : numpy.ndarray
        int32 ``(vocab_size,)``: the characters (UTF-8 lead bytes) of each token.
    """

    is_regular = False

    def __init__(self, pda, tokenizer_info, token_index, **kwargs):
        if pda.guards:  # budgets come from EBNF only, which has no keyed objects: stacks here hold no keys
            raise GrammarError("rule budgets (max_tokens / max_chars) are not supported in a grammar with "
                               "keyed JSON objects (any_order, finite extra-key sets)")
        super().__init__(tokenizer_info, token_index, **kwargs)
        self.pda = pda
        self.plain = ContextFreeGrammar(pda, tokenizer_info, token_index, **kwargs)
        self._max_tokens = [None if o is None else o.max_tokens for o in pda.options]
        self._max_chars = [None if o is None else o.max_chars for o in pda.options]
        #: The automata of the rules with a character budget (the fast filter walks them; Pda.dfas rebuilds one
        #: each time it is asked).
        self._chars_dfas = {r: pda.dfas[r] for r, m in enumerate(self._max_chars) if m is not None}
        self._budgeted = [o is not None and o.has_budget for o in pda.options]
        self._base = pda.state_base.tolist()
        self.token_chars = np.array([sum((b & 0xC0) != 0x80 for b in t) for t in tokenizer_info.token_bytes],
                                    np.int32)
        self._max_token_chars = int(self.token_chars.max(initial=0))
        chars = [m for m in self._max_chars if m is not None]
        #: The smallest character budget of any rule (None without one).
        self._least_chars = min(chars) if chars else None
        self._enters_chars = self._reach_char_budgets()
        self._plain_of: dict = {}
        self._warned = False

    def _reach_char_budgets(self) -> list[list[bool]]:
        """Per rule and state: whether going on from there (bytes or calls, in the
        rule or in callees) may enter a rule with a character budget."""
        pda = self.pda
        n = len(pda.dfas)
        enters = [self._max_chars[r] is not None for r in range(n)]  # the rule or a callee may start one
        changed = True
        while changed:
            changed = False
            for r in range(n):
                if not enters[r] and any(enters[c] for rows in pda.calls[r] for c, _ in rows):
                    enters[r] = changed = True
        out = []
        for r, d in enumerate(pda.dfas):
            reach = [any(enters[c] for c, _ in pda.calls[r][q]) for q in range(d.n_states)]
            succ = []
            for q in range(d.n_states):
                targets = d.trans[q, :256]
                succ.append(set(targets[targets >= 0].tolist()) | {ret for _, ret in pda.calls[r][q]})
            changed = True
            while changed:  # backward closure over the rule's own transitions
                changed = False
                for q in range(d.n_states):
                    if not reach[q] and any(reach[t] for t in succ[q]):
                        reach[q] = changed = True
            out.append(reach)
        return out

    @property
    def n_states(self) -> int:
        return self.plain.n_states

    def sort_all_frames(self) -> None:
        """Sort every frame's tokens now (see :meth:`ContextFreeGrammar.sort_all_frames`)."""
        self.plain.sort_all_frames()

    # -- stacks ----------------------------------------------------------------------------------

    def _frame(self, rule: int, state: int, parent, fresh: bool) -> BudgetStack:
        return BudgetStack(rule, state, parent, (0, 0, fresh) if self._budgeted[rule] else None)

    @property
    def start_state(self) -> frozenset:
        return frozenset((self._frame(0, self.pda.starts[0], None, False),))

    def _closing(self, s: BudgetStack, token_start: bool) -> bool:
        tokens, chars, _ = s.budget
        mc, mt = self._max_chars[s.rule], self._max_tokens[s.rule]
        return (mc is not None and chars >= mc) or (token_start and mt is not None and tokens >= mt)

    def to_plain(self, config) -> Config:
        """The configuration without budgets (a sorted tuple of stack ids of
        :attr:`Pda.stacks <leapgen.automata.pda.Pda.stacks>`), cached."""
        got = self._plain_of.get(config)
        if got is None:
            memo: dict[int, int] = {}
            push, base = self.pda.stacks.push, self._base

            def convert(s):
                if s is None:
                    return EMPTY
                out = memo.get(id(s))
                if out is None:
                    out = memo[id(s)] = push(base[s.rule] + s.state, convert(s.parent))  # keys=0: no guards
                return out

            got = tuple(sorted({convert(s) for s in config}))
            if len(self._plain_of) > _MAX_CACHE:
                self._plain_of.clear()
            self._plain_of[config] = got
        return got

    def expand_budgeted(self, config, *, token_start: bool, fresh: bool,
                        max_depth: int | None = None) -> tuple[list, bool, bool]:
        """The expansion of a budgeted configuration (see :meth:`Pda.expand`), with
        every stack still inside a spent occurrence that can end here dropped.

        Returns
        -------
        (frames, complete, pruned)
            The stacks that can consume a byte, whether the input may end here,
            whether some occurrence was made to end. Pure.

        Raises
        ------
        AmbiguityLimitError
            More than ``pda.max_config_stacks`` stacks (see :meth:`Pda.expand`).
        """
        pda = self.pda
        limit = pda.max_stack_depth if max_depth is None else max_depth
        seen, frames, popped = set(), [], set()
        complete = False
        work = list(config)
        while work:
            s = work.pop()
            if s in seen:
                continue
            seen.add(s)
            if len(seen) > pda.max_config_stacks:
                raise pda.ambiguity_error(x.rule for x in seen)
            r, q = s.rule, s.state
            if pda.has_bytes[r][q]:
                frames.append(s)
            for callee, ret in pda.calls[r][q]:
                start = pda.starts[callee]
                if pda.is_exit[r][ret]:
                    work.append(self._frame(callee, start, s.parent, fresh))
                elif s.depth < limit:
                    work.append(self._frame(callee, start, BudgetStack(r, ret, s.parent, s.budget), fresh))
            if pda.accepting[r][q]:
                if s.budget is not None and self._closing(s, token_start):
                    popped.add(s.occurrence)  # a spent occurrence that can end here: it must
                if s.parent is None:
                    complete = True
                else:
                    work.append(s.parent)
        if not popped:
            return frames, complete, False
        kept = [f for f in frames
                if not any(node.budget is not None and node.occurrence in popped for node in f.frames())]
        return kept, complete, len(kept) < len(frames)

    def step_budgeted(self, frames, byte: int) -> frozenset:
        """Consume one byte from expanded stacks, counting a character in every
        budgeted frame at a UTF-8 lead byte; empty means rejected. Pure."""
        trans, base = self.pda._trans_view, self._base
        lead = (byte & 0xC0) != 0x80
        out = set()
        for s in frames:
            b = base[s.rule]
            t = trans[((b + s.state) << 8) | byte]
            if t >= 0:
                top = BudgetStack(s.rule, t - b, s.parent, s.budget)
                if lead:
                    top = _rebuild(top, lambda bud: (bud[0], bud[1] + 1, bud[2]))
                out.add(top)
        return frozenset(out)

    def advance(self, state, data: bytes, *, token: bool, max_depth: int | None = None):
        """The state after ``data``, a token (``token=True``) or a string, or None if
        rejected. Either counts once against the token budget of each occurrence
        active where it starts; only a token is refused where a spent occurrence
        must end (xgrammar 0.2's ``accept_string`` is not). Pure.

        ``max_depth`` overrides the stack depth bound (see :meth:`Pda.expand`)."""
        config = state
        for i, b in enumerate(data):
            frames, _, _ = self.expand_budgeted(config, token_start=token and i == 0, fresh=i > 0,
                                                max_depth=max_depth)
            config = self.step_budgeted(frames, b)
            if not config:
                return None
        return frozenset(_rebuild(s, _count_token) for s in config)

    def walk(self, state, data: bytes):
        return self.advance(state, data, token=False)

    def accepted(self, state) -> None:
        """Warn once per grammar when an occurrence went past its budget (it could
        not end in time, so the budget was relaxed), as xgrammar does."""
        if self._warned:
            return
        for s in state:
            for f in s.frames():
                if f.budget is not None:
                    mt, mc = self._max_tokens[f.rule], self._max_chars[f.rule]
                    if (mt is not None and f.budget[0] > mt) or (mc is not None and f.budget[1] > mc):
                        self._warned = True
                        warnings.warn(f"rule {self.pda.names[f.rule]!r} went past its budget: it could not end "
                                      "where the budget ran out, so the budget is relaxed until it can end "
                                      "(warned once per grammar)", stacklevel=3)
                        return

    # -- what the matcher asks ---------------------------------------------------------------------

    def _pruned(self, state):
        """(plain configuration of the state once spent occurrences have ended, complete, budgeted frames)."""
        frames, complete, pruned = self.expand_budgeted(state, token_start=True, fresh=False)
        return self.to_plain(frozenset(frames)) if pruned else self.to_plain(state), complete, frames

    def is_accepting(self, state) -> bool:
        return self.expand_budgeted(state, token_start=True, fresh=False)[1]

    def rule_temperatures(self, state) -> tuple[float, ...]:
        if not self.pda.has_temperature:
            return ()
        return self.plain.stack_temperatures(self.to_plain(frozenset(self._pruned(state)[2])))

    def rejected_for_depth(self, state, data: bytes, *, token: bool = False) -> bool:
        return self.advance(state, data, token=token, max_depth=1 << 62) is not None

    def bitmask_row(self, state) -> tuple[np.ndarray, bool]:
        """The state's bitmask row: the plain grammar's for the state once spent
        occurrences have ended (cached there), without the tokens a budget
        rejects inside them; cached per state (LRU)."""
        got = self._rows.get(state)
        if got is not None:
            self.mask_cache_hits += 1
            return got
        self.mask_cache_misses += 1
        plain, complete, frames = self._pruned(state)
        row, _ = self.plain.bitmask_row(plain)
        words = row.view(np.uint32)
        least = self._least_risky_chars(frames)
        if least is not None or complete != self.plain.is_accepting(plain):
            words = words.copy()
            if least is not None and not self._drop_rejected_fast(frames, words, least):
                self._drop_rejected(state, words, least)
            self.token_index.set_stop_bits(words, complete)
        out = words.view(np.int32)
        out.flags.writeable = False
        return self._keep_row(state, (out, not self.token_index.allows_everything(words)))

    def has_bitmask_row(self, state) -> bool:
        return state in self._rows

    def _drop_rejected_fast(self, frames, words: np.ndarray, min_chars: int) -> bool:
        """:meth:`_drop_rejected` for the common case, vectorized over the vocabulary:
        one occurrence ``O`` with a character budget is the top of every stack that
        stays in it, its rule calls no rule, the other stacks are exactly where ``O``
        returns to, and no other budget can bite within a token. A token is then
        dropped when the walk of ``O``'s own DFA over it reaches the point where ``O``
        must end with bytes left, and no earlier end of ``O`` lets the rest go on
        where ``O`` returns (checked exactly, on the plain grammar, for the few
        tokens whose next byte fits). Only tokens of at least ``min_chars``
        characters can be dropped. Returns False (nothing done) otherwise, and
        where so few tokens are that long that walking them is cheaper."""
        if int(np.count_nonzero(self.token_chars >= min_chars)) < FAST_FILTER_TOKENS:
            return False
        tops = [f for f in frames if f.budget is not None and self._max_chars[f.rule] is not None]
        if len(tops) != 1:
            return False
        o = tops[0]
        r, pda = o.rule, self.pda
        if any(calls for calls in pda.calls[r]) or self._least_risky_chars(frames, skip=o) is not None:
            return False
        rest = [f for f in frames if f is not o]
        if any(node.budget is not None and node.occurrence == o.occurrence for f in rest for node in f.frames()):
            return False
        dfa = self._chars_dfas[r]
        after = (() if o.parent is None or not dfa.accepting[o.state]
                 else self.plain.expansion(self.to_plain(frozenset((o.parent,))))[0])
        cont = self.to_plain(frozenset(rest))
        if cont != after:
            return False  # other parse paths: the exact walk decides
        first = self.pda.next_bytes(self.plain.expansion(cont)) if cont else np.zeros(256, bool)
        matrix, lengths, ids = self.tokenizer_info.token_byte_matrix()
        rows = np.flatnonzero(((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)
                              & (self.token_chars[ids] >= min_chars))
        if not len(rows):
            return True
        mat, lens, tids = matrix[rows], lengths[rows], ids[rows]
        trans, accepting = dfa.trans[:, :256], dfa.accepting
        limit = self._max_chars[r]
        state = np.full(len(rows), o.state, np.int64)
        chars = np.full(len(rows), o.budget[1], np.int64)
        alive = np.ones(len(rows), bool)
        must_end = np.full(len(rows), -1, np.int64)  # where O must end with bytes left (-1: never)
        ends: list[tuple[np.ndarray, int]] = []  # (rows, position): O may end there and the rest may go on
        for col in range(int(lens.max())):
            idx = np.flatnonzero(alive & (col < lens))
            if not len(idx):
                break
            b = mat[idx, col]
            here = accepting[state[idx]] & first[b]
            if here.any():
                ends.append((idx[here], col))
            nxt = trans[state[idx], b]
            alive[idx[nxt < 0]] = False
            go = idx[nxt >= 0]
            bg = b[nxt >= 0]
            state[go] = nxt[nxt >= 0]
            chars[go] += (bg & 0xC0) != 0x80
            forced = go[(chars[go] >= limit) & accepting[state[go]] & (col + 1 < lens[go])]
            must_end[forced] = col + 1
            alive[forced] = False
            at = forced[first[mat[forced, col + 1]]]
            if len(at):
                ends.append((at, col + 1))
        affected = np.flatnonzero(must_end >= 0)
        if not len(affected):
            return True
        saved = set()
        token_bytes = self.tokenizer_info.token_bytes
        for idx, j in ends:
            for i in idx[must_end[idx] >= j].tolist():
                if i not in saved and self.plain.walk(cont, token_bytes[int(tids[i])][j:]) is not None:
                    saved.add(i)
        for t in tids[[i for i in affected.tolist() if i not in saved]].tolist():
            words[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)
        return True

    def _least_risky_chars(self, frames, skip=None) -> int | None:
        """The fewest characters a token must hold for a character budget to bite
        inside it (0: any token), or None when none can: an active occurrence
        with little left, or one the token may enter (a rule with a small
        budget reachable from some frame). ``skip``: a frame left out."""
        least = None
        small = self._least_chars is not None and self._least_chars < self._max_token_chars
        for s in frames:
            for f in s.frames():
                if f is skip:
                    continue
                if small and self._enters_chars[f.rule][f.state]:
                    least = self._least_chars + 1 if least is None else min(least, self._least_chars + 1)
                if f.budget is None or self._max_chars[f.rule] is None:
                    continue
                left = self._max_chars[f.rule] - f.budget[1]
                need = 0 if left <= 0 else left + 1  # a spent budget that could not end bites anywhere
                if need <= self._max_token_chars:
                    least = need if least is None else min(least, need)
        return least

    def _drop_rejected(self, state, words: np.ndarray, min_chars: int) -> None:
        """Clear (in ``words``, uint32) the allowed tokens of at least ``min_chars``
        characters that the budgets reject, each walked byte by byte (in byte
        order, so tokens sharing a prefix share its walk)."""
        vocab = self.token_index.vocab_size
        allowed = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab])
        token_bytes = self.tokenizer_info.token_bytes
        todo = sorted((token_bytes[t], t) for t in allowed[self.token_chars[allowed] >= min_chars].tolist()
                      if token_bytes[t])
        path: list = [state]  # path[i]: the configuration after the first i bytes of `prev`
        prev = b""
        for data, t in todo:
            common = 0
            while common < min(len(prev), len(data), len(path) - 1) and prev[common] == data[common]:
                common += 1
            del path[common + 1:]
            config = path[-1]
            for i in range(common, len(data)):
                if not config:
                    break
                frames, _, _ = self.expand_budgeted(config, token_start=i == 0, fresh=i > 0)
                config = self.step_budgeted(frames, data[i])
                path.append(config)
            prev = data
            if not config:
                words[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)

    def forced_bytes(self, state) -> bytes:
        """Bytes forced from ``state`` (budgets applied: a spent occurrence ends)."""
        out = bytearray()
        config = state
        while len(out) < 1 << 16:
            frames, complete, _ = self.expand_budgeted(config, token_start=not out, fresh=bool(out))
            if complete:
                break
            live: set[int] = set()
            for s in frames:
                g = self._base[s.rule] + s.state
                live.update(np.flatnonzero(self.pda.trans_flat[g << 8:(g + 1) << 8] >= 0).tolist())
                if len(live) > 1:
                    break
            if len(live) != 1:
                break
            b = live.pop()
            out.append(b)
            config = self.step_budgeted(frames, b)
        return bytes(out)

    def memory_size_bytes(self) -> int:
        return super().memory_size_bytes() + self.plain.memory_size_bytes()
