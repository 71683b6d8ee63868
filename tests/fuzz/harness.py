"""The differential fuzzer's checks, shared by its front-end tiers (issue 15).

Nothing here comes from leapgen's compiler: grammars are compiled and matched
through leapgen's public API only, and every verdict is compared with an
oracle of the tier (the ``regex`` module, ``lark``, ``jsonschema``) or with a
brute-force walk written here.

- :class:`Vocab`: a vocabulary (the toy one of ``conftest.py`` and real ones
  from ``vocab_loaders``) with its compiler and the arrays of a brute-force
  token walk.
- :class:`Brute`: per compiled grammar, the tokens ``accept_token`` would take
  in a state, for every token at once: each token's bytes are stepped one
  column at a time (numpy gathers) through the grammar's own one-byte steps
  (``compiled.walk(state, bytes([b]))``, memoized per pair), as a lazily
  built DFA over matcher states; a sample is checked with ``accept_token``
  itself.
- :func:`check_mask`: the filled bitmask equals it, both directions, over
  every token; :func:`check_jump_forward`: the forced string is a prefix of
  every continuation (the tokens allowed, and the strings through the state).
- :func:`leapgen_strings`: complete strings walked out of leapgen's automaton.
- :class:`Report` / :func:`shrink` / :func:`shrink_failure`: counts for the note, and a failing case
  reduced to a small reproducer before it is reported.
"""

from __future__ import annotations

import collections
import functools
import random
from dataclasses import dataclass, field

import numpy as np

from leapgen import GrammarCompiler, GrammarMatcher

#: Real vocabularies of the mask checks: byte-level BPE, SentencePiece byte fallback, tiktoken ranks.
REAL_FAMILIES = ("llama3", "mistral", "cl100k")


class Failure(Exception):
    """A disagreement: ``check`` (what disagreed), ``grammar`` and ``text`` (the input), ``detail``."""

    def __init__(self, check: str, grammar: str, text, detail: str):
        self.check, self.grammar, self.text, self.detail = check, grammar, text, detail
        super().__init__(f"{check}: {detail}\n  grammar: {grammar!r}\n  input:   {text!r}")


@dataclass
class Report:
    """Counts of one tier (printed in the terminal summary, see ``conftest.py``)."""

    grammars: int = 0
    refused: int = 0
    strings: int = 0
    token_verdicts: int = 0
    states: int = 0
    mask_tokens: int = 0
    vocabularies: set = field(default_factory=set)
    notes: collections.Counter = field(default_factory=collections.Counter)

    def line(self, tier: str) -> str:
        notes = ", ".join(f"{k} {v}" for k, v in sorted(self.notes.items()))
        # a tier that gives no per-token verdicts (the GBNF tier checks strings and masks) does not list them
        verdicts = f"{self.token_verdicts:,} per-token verdicts, " if self.token_verdicts else ""
        return (f"{tier}: {self.grammars:,} grammars ({self.refused:,} refused), {self.strings:,} strings, "
                f"{verdicts}{self.states:,} mask states over {self.mask_tokens:,} tokens, "
                f"vocabularies {sorted(self.vocabularies)}" + (f"; {notes}" if notes else ""))


REPORTS: dict[str, Report] = collections.defaultdict(Report)


class Vocab:
    """A vocabulary, its compiler, and the arrays of :class:`Brute` (build with :func:`vocab`)."""

    def __init__(self, name: str, info):
        self.name = name
        self.info = info
        self.compiler = GrammarCompiler(info, cache_entries=4)
        self.vocab_size = info.vocab_size
        self.token_bytes = info.token_bytes
        self.stop_ids = sorted(info.stop_token_ids)
        ids = [i for i, b in enumerate(self.token_bytes) if b]
        lens = np.array([len(self.token_bytes[i]) for i in ids], np.int64)
        order = np.argsort(-lens, kind="stable")  # longest first: column c is a prefix of the array
        self.ids = np.array(ids, np.int64)[order]
        lens = lens[order]
        mat = np.zeros((len(ids), int(lens.max()) if len(ids) else 1), np.uint8)
        for row, i in enumerate(self.ids.tolist()):
            mat[row, :len(self.token_bytes[i])] = np.frombuffer(self.token_bytes[i], np.uint8)
        self.columns = [np.ascontiguousarray(mat[:, c]) for c in range(mat.shape[1])]
        self.longer_than = [int(np.count_nonzero(lens > c)) for c in range(mat.shape[1])]
        self.texts = {}  # token id -> its text, for tokens whose bytes are whole UTF-8 characters
        for i in ids:
            try:
                self.texts[i] = self.token_bytes[i].decode("utf-8")
            except UnicodeDecodeError:
                pass


@functools.lru_cache(maxsize=None)
def vocab(family: str) -> Vocab:
    """The :class:`Vocab` of ``"toy"`` (the ``toy_info`` fixture's) or a ``vocab_loaders`` family (skips when missing)."""
    from vocab_loaders import load_tokenizer_info, toy_tokenizer_info

    if family == "toy":
        return Vocab("toy", toy_tokenizer_info())
    return Vocab(family, load_tokenizer_info(family))


class Brute:
    """The tokens ``accept_token`` takes, by brute force (see the module docstring)."""

    def __init__(self, compiled, v: Vocab):
        self.compiled, self.v = compiled, v
        self.numbers: dict = {}
        self.states: list = []
        self.next: dict[int, int] = {}  # state number << 8 | byte -> state number, or -1

    def number(self, state) -> int:
        k = self.numbers.get(state)
        if k is None:
            k = self.numbers[state] = len(self.states)
            self.states.append(state)
        return k

    def _step(self, keys: np.ndarray) -> np.ndarray:
        uniq, inverse = np.unique(keys, return_inverse=True)
        out = np.empty(len(uniq), np.int64)
        for j, key in enumerate(uniq.tolist()):
            got = self.next.get(key)
            if got is None:
                nxt = self.compiled.walk(self.states[key >> 8], bytes((key & 255,)))
                got = self.next[key] = -1 if nxt is None else self.number(nxt)
            out[j] = got
        return out[inverse]

    def mask(self, state) -> np.ndarray:
        """bool ``(vocab_size,)``: the tokens accepted from ``state`` (stop tokens where it may end)."""
        v = self.v
        pos = np.arange(len(v.ids))
        cur = np.full(len(v.ids), self.number(state), np.int64)
        for c, limit in enumerate(v.longer_than):
            k = int(np.searchsorted(pos, limit))
            if k == 0:
                break
            nxt = self._step((cur[:k] << 8) | v.columns[c][pos[:k]])
            alive = nxt >= 0
            cur = np.concatenate((nxt[alive], cur[k:]))
            pos = np.concatenate((pos[:k][alive], pos[k:]))
        out = np.zeros(v.vocab_size, bool)
        out[v.ids[pos]] = True
        if self.compiled.is_accepting(state):
            out[v.stop_ids] = True
        return out


def filled_mask(matcher: GrammarMatcher, vocab_size: int) -> np.ndarray:
    """bool ``(vocab_size,)`` from ``fill_next_token_bitmask``."""
    bitmask = np.zeros((1, (vocab_size + 31) // 32), np.int32)
    matcher.fill_next_token_bitmask(bitmask)
    return np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


def check_mask(matcher: GrammarMatcher, brute: Brute, rng: random.Random, grammar: str, where,
               report: Report) -> np.ndarray:
    """The bitmask equals the brute-force set, over every token; ``accept_token`` agrees on a sample.
    Returns the mask. Raises :class:`Failure`."""
    v = brute.v
    got = filled_mask(matcher, v.vocab_size)
    want = brute.mask(matcher.state)
    if not np.array_equal(got, want):
        extra = [v.token_bytes[t] for t in np.flatnonzero(got & ~want)[:6]]
        missing = [v.token_bytes[t] for t in np.flatnonzero(want & ~got)[:6]]
        raise Failure(f"mask on {v.name}", grammar, where,
                      f"the bitmask allows {extra} that accept_token refuses and refuses {missing} it accepts "
                      f"({int((got & ~want).sum())} extra, {int((want & ~got).sum())} missing)")
    sample = rng.sample(range(v.vocab_size), min(64, v.vocab_size))
    allowed = np.flatnonzero(want).tolist()
    sample += rng.sample(allowed, min(32, len(allowed)))
    for t in sample:
        if matcher.fork().accept_token(t) != bool(want[t]):
            raise Failure(f"accept_token on {v.name}", grammar, where,
                          f"token {t} {v.token_bytes[t]!r}: accept_token says {not want[t]}, the brute-force walk "
                          f"{bool(want[t])}")
    report.states += 1
    report.mask_tokens += v.vocab_size
    report.vocabularies.add(v.name)
    return got


def check_jump_forward(matcher: GrammarMatcher, mask: np.ndarray, v: Vocab, rests, grammar: str, where) -> None:
    """The forced bytes are a prefix of every continuation: each allowed token agrees with them as far as
    both go, every string ``rests`` (continuations known to be accepted) starts with them, and they are
    accepted; nothing is forced where the input may end."""
    forced = matcher.find_jump_forward_bytes()
    if not forced:
        return
    if matcher.is_completed():
        raise Failure("jump-forward", grammar, where, f"forces {forced!r} where the input may end")
    for t in np.flatnonzero(mask).tolist():
        tb = v.token_bytes[t]
        if t in v.stop_ids or tb[:len(forced)] != forced[:len(tb)]:
            raise Failure("jump-forward", grammar, where, f"forces {forced!r} but token {tb!r} is allowed")
    for rest in rests:
        if not rest.startswith(forced):
            raise Failure("jump-forward", grammar, where, f"forces {forced!r} but {rest!r} is accepted after it")
    fork = matcher.fork()
    if not fork.accept_string(forced):
        raise Failure("jump-forward", grammar, where, f"forces {forced!r}, which accept_string refuses")
    text = matcher.find_jump_forward_string().encode()
    if not forced.startswith(text):
        raise Failure("jump-forward", grammar, where, f"string {text!r} is not a prefix of the bytes {forced!r}")


def verdict(compiled, data: bytes) -> bool:
    """``accept_string`` and then ``is_completed`` on a fresh matcher."""
    m = GrammarMatcher(compiled)
    return m.accept_string(data) and m.is_completed()


def _live_bytes(compiled, state) -> list[int]:
    """The bytes some transition takes from ``state`` (a pushdown configuration's from its expansion)."""
    if compiled.is_regular:
        row = compiled.trans_flat[state * 256:(state + 1) * 256]
    else:
        row = compiled.pda.next_bytes(compiled.expansion(state))
    return np.flatnonzero(row if row.dtype == bool else row >= 0).tolist()


def _completion(compiled, state, limit: int = 120) -> bytes | None:
    """The shortest bytes from ``state`` to a state where the input may end (breadth first, bounded)."""
    seen = {state}
    todo = collections.deque([(state, b"")])
    while todo and len(seen) < limit:
        q, path = todo.popleft()
        if compiled.is_accepting(q):
            return path
        for b in _live_bytes(compiled, q):
            nxt = compiled.walk(q, bytes((b,)))
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                todo.append((nxt, path + bytes((b,))))
    return None


def leapgen_strings(compiled, rng: random.Random, n: int, max_bytes: int = 40) -> list[bytes]:
    """Up to ``n`` complete strings walked at random out of leapgen's automaton (byte by byte, each live
    byte equally likely; past ``max_bytes`` the shortest way to an end, if a bounded search finds one)."""
    out = []
    for _ in range(n):
        state, data = compiled.start_state, bytearray()
        while True:
            if compiled.is_accepting(state) and rng.random() < 0.2:
                break
            live = _live_bytes(compiled, state)
            if len(data) >= max_bytes or not live:
                tail = _completion(compiled, state)
                data = None if tail is None else data + tail
                break
            b = rng.choice(live)
            nxt = compiled.walk(state, bytes((b,)))
            if nxt is None:  # a push past max_stack_depth
                data = None
                break
            data.append(b)
            state = nxt
        if data is not None:
            out.append(bytes(data))
    return list(dict.fromkeys(out))


def leapgen_completion(compiled, state) -> bytes | None:
    """A shortest way from ``state`` to an end (None when none is found)."""
    return _completion(compiled, state)


def shrink(case, fails, smaller, budget: int = 150):
    """Greedy reduction: replace ``case`` by the first of ``smaller(case)`` for which ``fails`` still
    holds, until none does or ``budget`` calls of ``fails`` are spent."""
    calls = 0
    improved = True
    while improved and calls < budget:
        improved = False
        for c in smaller(case):
            calls += 1
            try:
                still = fails(c)
            except Exception:  # noqa: BLE001 - a candidate leapgen refuses or that breaks the check: not smaller
                still = False
            if still:
                case, improved = c, True
                break
            if calls >= budget:
                break
    return case


def shrink_failure(first: Failure, case, check, smaller, budget: int = 150) -> Failure:
    """``first`` again, on the smallest reduction of ``case`` (:func:`shrink` over ``smaller``) that
    ``check`` (which raises :class:`Failure`) still fails the same way; ``first`` itself when ``case``
    no longer does (its rewrite for shrinking may not)."""
    def fails(c):
        try:
            check(c)
        except Failure as f:
            return f.check == first.check
        return False

    if not fails(case):
        return first
    small = shrink(case, fails, smaller, budget)
    try:
        check(small)
    except Failure as f:
        return f
    return first


def shorter_texts(text):
    """Strings (or bytes) with one piece removed, longest cuts first."""
    n = len(text)
    for size in (n // 2, 8, 4, 2, 1):
        if size < 1:
            continue
        for i in range(0, n - size + 1, max(1, size // 2)):
            yield text[:i] + text[i + size:]


def chunks(seeds: range, size: int) -> list[range]:
    """``seeds`` cut into ranges of ``size`` (one test each)."""
    return [seeds[i:i + size] for i in range(0, len(seeds), size)]


def run_seeds(run_seed, seeds, report: Report) -> None:
    """``run_seed(seed, report)`` for each seed, up to the first failure (already shrunk), which fails the test."""
    import pytest

    for seed in seeds:
        try:
            run_seed(seed, report)
        except Failure as f:
            failure = f"seed {seed}: {f}"
            break
    else:
        return
    pytest.fail(failure, pytrace=False)  # the first disagreement of the chunk (shrinking the others costs)
