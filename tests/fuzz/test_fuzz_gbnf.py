"""Differential fuzzing of the GBNF front-end and the pushdown runtime against Lark's Earley parser (issue 15).

Per seed: a random grammar (:mod:`.gbnf_gen`: right-recursive, mutually
recursive, nested and nullable rules over character classes the token slices
cover and others), compiled by leapgen (``compile_grammar``) and translated to
Lark inside the test. Checked:

- verdicts: ``accept_string`` + ``is_completed`` against Lark's Earley parse,
  on strings walked out of leapgen's automaton, random derivations of the
  grammar (written by the test from the rules) and mutations of both;
- masks: the bitmask equals the brute-force set of tokens ``accept_token``
  takes, every token, at states inside accepted strings (cut at any byte), on
  the toy vocabulary and a real one (Llama-3, Mistral, cl100k in turn);
  the jump-forward bytes are a prefix of every continuation;
- refusals: leapgen refuses left recursion (the test's own analysis must
  agree) and a grammar whose root derives nothing, with a ``GrammarError``;
  a grammar whose parses multiply past ``MAX_CONFIG_STACKS`` on some input
  raises ``AmbiguityLimitError`` there, counted in the notes (see
  :func:`check_grammar`).

A failure is shrunk (rules dropped or reduced) and reported with the smallest
grammar and input found.
"""

from __future__ import annotations

import random

import lark
import pytest

from leapgen import AmbiguityLimitError, CompileLimitError, GrammarError, GrammarMatcher

from . import gbnf_gen as gg
from .harness import (REAL_FAMILIES, REPORTS, Brute, Failure, check_jump_forward, check_mask, chunks,
                      leapgen_strings, run_seeds, shrink_failure, verdict, vocab)

CI_SEEDS = range(0, 120)  # seed 88 (an exponentially ambiguous grammar) refused with AmbiguityLimitError
SLOW_SEEDS = range(200_000, 208_000)  # ~0.4 s a seed (the slowest 18 s): ~50 min of one core
# The slow tiers: 10,000 regexes, 8,000 GBNF grammars, 12,000 schemas, about 75 minutes of one core measured
# on a sample of each (a shared machine), so about 1.5 hours with the slowest seeds.
CHUNK = 40
MAX_LARK_CHARS = 64  # Earley in Python is cubic: longer strings are not compared


def earley(rules: dict):
    """Lark's Earley parser of the grammar (characters as terminals, a forest: no tree is resolved)."""
    return lark.Lark(gg.lark(rules), parser="earley", lexer="dynamic", ambiguity="forest")


def lark_accepts(parser, text: str) -> bool:
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


#: The note of a check skipped where leapgen refused the input as too ambiguous (see :func:`check_grammar`).
AMBIGUOUS = "AmbiguityLimitError (parses past MAX_CONFIG_STACKS): {} skipped"


def check_grammar(rules: dict, rng: random.Random, seed: int, report) -> None:
    """Every check of the module docstring on one grammar; raises :class:`Failure` (not shrunk).

    Where the parses multiply past leapgen's ``MAX_CONFIG_STACKS`` on some input (``AmbiguityLimitError``,
    a documented refusal: seed 88, ``root ::= ... ([ A-Za-z]{1,3} root r1 | [^\\x0A]){1,3} ...`` with
    ``r1 ::= ... | "" root``, had 5,847 stacks after 8 bytes and filled the 1,048,576-stack store after
    12), that one walk, string or mask state is skipped and counted in the report's notes; the others
    are checked."""
    text = gg.gbnf(rules)
    heights = gg.min_heights(rules)
    toy = vocab("toy")
    try:
        compiled = toy.compiler.compile_grammar(text)
    except CompileLimitError:
        report.notes["compile limits"] += 1
        return
    except GrammarError as e:
        message = str(e)
        if "left-recursive" in message and gg.left_recursive(rules):
            report.refused += 1
            return
        if ("matches nothing" in message or "never finish" in message) and heights["root"] is None:
            report.refused += 1
            return
        raise Failure("compile", text, "", f"{type(e).__name__}: {e}") from None
    parser = earley(rules)
    derived = [gg.derive(rules, rng, heights) for _ in range(6)] if heights["root"] is not None else []
    walked = []
    try:
        walks = leapgen_strings(compiled, rng, 6)
    except AmbiguityLimitError:
        walks = []
        report.notes[AMBIGUOUS.format("walks")] += 1
    for data in walks:
        try:
            walked.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise Failure("utf-8", text, data, "leapgen accepts bytes that are not UTF-8") from None
    strings = [s for s in walked + derived if s is not None]
    strings += [gg.mutate(rng.choice(strings), rng) for _ in range(8)] if strings else []
    strings = [s for s in dict.fromkeys(strings) if len(s) <= MAX_LARK_CHARS]
    accepted = []
    for s in strings:
        try:
            got = verdict(compiled, s.encode())
        except AmbiguityLimitError:
            report.notes[AMBIGUOUS.format("strings")] += 1
            continue
        want = lark_accepts(parser, s)
        if got != want:
            raise Failure("verdict", text, s, f"leapgen says {got}, Lark's Earley parser {want}")
        if got:
            accepted.append(s.encode())
    report.strings += len(strings)
    if not accepted:
        return
    real = vocab(REAL_FAMILIES[seed % len(REAL_FAMILIES)])
    for v, compiled_v, n in ((toy, compiled, 2), (real, real.compiler.compile_grammar(text), 3)):
        brute = Brute(compiled_v, v)
        for data in rng.sample(accepted, min(n, len(accepted))):
            cut = data[:rng.randint(0, len(data))]
            matcher = GrammarMatcher(compiled_v)
            rests = [a[len(cut):] for a in accepted if a.startswith(cut)]
            try:
                assert matcher.accept_string(cut)
                mask = check_mask(matcher, brute, rng, text, cut, report)
                check_jump_forward(matcher, mask, v, rests, text, cut)
            except AmbiguityLimitError:
                report.notes[AMBIGUOUS.format("mask states")] += 1


def run_seed(seed: int, report) -> None:
    """Generate and check one grammar; a failure is shrunk, then raised."""
    rng = random.Random(f"gbnf:{seed}")
    rules, _ = gg.GbnfGen(rng).grammar()
    state = rng.getstate()
    report.grammars += 1
    try:
        check_grammar(rules, rng, seed, report)
    except Failure as first:
        raise _shrunk(first, rules, state, seed) from None


def _shrunk(first: Failure, rules: dict, state, seed: int) -> Failure:
    def run(r):
        rng = random.Random()
        rng.setstate(state)
        check_grammar(r, rng, seed, REPORTS["(shrinking)"])

    return shrink_failure(first, rules, run, gg.children)


@pytest.mark.parametrize("seeds", chunks(CI_SEEDS, CHUNK), ids=lambda s: f"seeds{s.start}-{s.stop - 1}")
def test_gbnf_fuzz(seeds):
    run_seeds(run_seed, seeds, REPORTS["GBNF (CI tier)"])


@pytest.mark.slow
@pytest.mark.parametrize("seeds", chunks(SLOW_SEEDS, CHUNK), ids=lambda s: f"seeds{s.start}-{s.stop - 1}")
def test_gbnf_fuzz_slow(seeds):
    run_seeds(run_seed, seeds, REPORTS["GBNF (slow tier)"])
