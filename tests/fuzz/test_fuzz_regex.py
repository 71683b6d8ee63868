r"""Differential fuzzing of the regex front-end against the ``regex`` module (issue 15).

Per seed: a random ECMAScript pattern (:mod:`.regex_gen`: lookaheads with
anchors inside, classes and escapes, Unicode of every UTF-8 length, counted
repeats), compiled by leapgen (``compile_regex``, full match) and written for
the ``regex`` module with ECMAScript's meaning. Checked:

- verdicts: ``accept_string`` + ``is_completed`` against ``fullmatch`` on
  strings walked out of leapgen's automaton, strings of the oracle-side
  generator, and mutations of both;
- per-token verdicts at prefixes of accepted strings, every token of the toy
  vocabulary that decodes as text: ``accept_token`` against
  ``regex.fullmatch(p, prefix + token, partial=True)``. The ``regex``
  module's partial matching is not exact where a construct can fail after
  the text so far: a lookahead reaching its end (``(?=(?=z\u2028))`` on
  ``"z"``: a partial match, though no string matches; ``(?!a$)\w+`` on
  ``"a"``: none, though ``"ab"`` matches), an anchor or ``[]`` (``^|a*[]``
  on ``"a"``: a partial match; see ``regex_gen.partial_inexact``), so with
  those a disagreement is settled by a witness:
  leapgen's shortest completion, which the oracle must match in full, or an
  extension the oracle finds (a bounded search over the pattern's own
  characters), which leapgen must accept; one neither finds is counted
  (``partial verdicts the oracle could not witness``), not failed;
- masks: the bitmask equals the brute-force set of tokens ``accept_token``
  takes, every token, on the toy vocabulary and on a real one (Llama-3,
  Mistral, cl100k in turn), and the jump-forward bytes are a prefix of every
  continuation;
- refusals: a pattern leapgen refuses raises ``RegexError`` with an offset in
  the pattern, and only for a construct outside its dialect.

A failure is shrunk (the tree, then the string) and reported with the
smallest grammar and input found.
"""

from __future__ import annotations

import random

import pytest

from leapgen import CompileLimitError, GrammarError, GrammarMatcher, RegexError, StackDepthError

from . import regex_gen as rg
from .harness import (REAL_FAMILIES, REPORTS, Brute, Failure, check_jump_forward, check_mask, chunks,
                      leapgen_completion, leapgen_strings, run_seeds, shrink_failure, verdict, vocab)

CI_SEEDS = range(0, 600)
SLOW_SEEDS = range(100_000, 110_000)  # ~0.09 s a seed on one core: ~16 min (see test_fuzz_gbnf.py)
CHUNK = 100
REFUSALS = ("lookahead", "anchor")  # what leapgen may refuse in the generated trees (see regex_gen)


def _oracle_full(compiled_oracle, text: str) -> bool:
    return compiled_oracle.fullmatch(text) is not None


def _oracle_extension(compiled_oracle, text: str, pool: list[str], budget: int = 3000) -> str | None:
    """A string starting with ``text`` that the oracle matches in full: breadth first over the characters
    of ``pool``, at most 6 more, pruned where the oracle sees no partial match; ``budget`` strings at most."""
    todo = [text]
    while todo and budget > 0:
        nxt = []
        for t in todo:
            budget -= 1
            if compiled_oracle.fullmatch(t):
                return t
            if budget <= len(nxt) or len(t) >= len(text) + 6:
                continue
            if compiled_oracle.fullmatch(t, partial=True) is not None:
                nxt += [t + ch for ch in pool]
        todo = nxt
    return None


def check_pattern(tree, pattern: str, rng: random.Random, seed: int, report) -> None:
    """Every check of the module docstring on one pattern; raises :class:`Failure` (not shrunk)."""
    toy = vocab("toy")
    ora = rg.compile_oracle(tree)
    samples = list(dict.fromkeys(rg.sample(tree, rng) for _ in range(8)))
    try:
        compiled = toy.compiler.compile_regex(pattern)
    except RegexError as e:
        if not (0 <= e.offset <= len(pattern)) or not any(w in str(e) for w in REFUSALS):
            raise Failure("refusal", pattern, "", f"unexpected RegexError: {e}") from None
        report.refused += 1
        return
    except CompileLimitError:  # a resource bound, named (lookaheads complement their DFA: seed 109653)
        report.notes["compile limits"] += 1
        return
    except GrammarError as e:
        if "matches no string" not in str(e):
            raise Failure("compile", pattern, "", f"{type(e).__name__}: {e}") from None
        for s in samples + [""]:
            if _oracle_full(ora, s):
                raise Failure("verdict", pattern, s, "leapgen says the regex matches nothing; the oracle matches it")
        report.notes["empty languages"] += 1
        return
    walked = []
    for data in leapgen_strings(compiled, rng, 6):
        try:
            walked.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise Failure("utf-8", pattern, data, "leapgen accepts bytes that are not UTF-8") from None
    strings = walked + samples
    strings += [rg.mutate(rng.choice(strings), rng) for _ in range(10)] if strings else []
    strings = list(dict.fromkeys(strings))
    accepted = []
    for s in strings:
        got, want = verdict(compiled, s.encode()), _oracle_full(ora, s)
        if got != want:
            raise Failure("verdict", pattern, s, f"leapgen says {got}, the oracle {want}")
        if got:
            accepted.append(s)
    report.strings += len(strings)
    if not accepted:
        return
    inexact = rg.partial_inexact(tree)
    pool = rg.char_pool(tree)
    prefixes = [""] + [s[:rng.randint(0, len(s))] for s in rng.sample(accepted, min(2, len(accepted)))]
    toy_brute = Brute(compiled, toy)
    for prefix in dict.fromkeys(prefixes):
        matcher = GrammarMatcher(compiled)
        assert matcher.accept_string(prefix)
        for t, text in toy.texts.items():
            try:
                got = matcher.fork().accept_token(t)
            except StackDepthError:
                got = False
            want = ora.fullmatch(prefix + text, partial=True) is not None
            report.token_verdicts += 1
            if got == want:
                continue
            if inexact and got:  # settle the oracle's inexact partial match with leapgen's completion
                fork = matcher.fork()
                fork.accept_token(t)
                tail = leapgen_completion(compiled, fork.state)
                if tail is not None and _oracle_full(ora, prefix + text + tail.decode("utf-8")):
                    report.notes["partial verdicts settled by a witness"] += 1
                    continue
            if inexact and not got:
                witness = _oracle_extension(ora, prefix + text, pool)
                if witness is None:
                    report.notes["partial verdicts the oracle could not witness"] += 1
                    continue
                raise Failure("token verdict", pattern, prefix, f"token {text!r}: leapgen refuses it, the oracle "
                              f"matches {witness!r}")
            raise Failure("token verdict", pattern, prefix,
                          f"token {text!r}: accept_token says {got}, regex partial match {want}")
        rests = [s.encode()[len(prefix.encode()):] for s in accepted if s.startswith(prefix)]
        mask = check_mask(matcher, toy_brute, rng, pattern, prefix, report)
        check_jump_forward(matcher, mask, toy, rests, pattern, prefix)
    real = vocab(REAL_FAMILIES[seed % len(REAL_FAMILIES)])
    compiled_real = real.compiler.compile_regex(pattern)
    brute = Brute(compiled_real, real)
    for s in rng.sample(accepted, min(2, len(accepted))):
        data = s.encode()
        cut = data[:rng.randint(0, len(data))]  # bytes: may stop inside a character
        matcher = GrammarMatcher(compiled_real)
        assert matcher.accept_string(cut)
        rests = [a.encode()[len(cut):] for a in accepted if a.encode().startswith(cut)]
        mask = check_mask(matcher, brute, rng, pattern, cut, report)
        check_jump_forward(matcher, mask, real, rests, pattern, cut)


def run_seed(seed: int, report) -> None:
    """Generate and check one pattern; a failure is shrunk, then raised."""
    rng = random.Random(f"regex:{seed}")
    tree = rg.RegexGen(rng, misplaced=rng.random() < 0.05).pattern()
    pattern = rg.ecma(tree, rng)
    state = rng.getstate()
    report.grammars += 1
    try:
        check_pattern(tree, pattern, rng, seed, report)
    except Failure as first:
        raise _shrunk(first, tree, state, seed) from None


def _shrunk(first: Failure, tree, state, seed: int) -> Failure:
    """The failure again, on the smallest tree (written without escapes) and input that still fail."""
    def run(t):
        rng = random.Random()
        rng.setstate(state)
        check_pattern(t, rg.ecma(t), rng, seed, REPORTS["(shrinking)"])

    return shrink_failure(first, tree, run, rg.children)


@pytest.mark.parametrize("seeds", chunks(CI_SEEDS, CHUNK), ids=lambda s: f"seeds{s.start}-{s.stop - 1}")
def test_regex_fuzz(seeds):
    run_seeds(run_seed, seeds, REPORTS["regex (CI tier)"])


@pytest.mark.slow
@pytest.mark.parametrize("seeds", chunks(SLOW_SEEDS, CHUNK), ids=lambda s: f"seeds{s.start}-{s.stop - 1}")
def test_regex_fuzz_slow(seeds):
    run_seeds(run_seed, seeds, REPORTS["regex (slow tier)"])
