"""leapgen and the installed xgrammar accept the same strings for the same structural tags.

Hand-made tags (xgrammar's documented semantics: end detection, at_least_one, stop_after_first,
trigger/exclude overlaps, separators) and a seeded random generator of tags over a small alphabet
(so that triggers, excludes and ends overlap often), each with strings sampled from the tag, mutated,
and random. xgrammar compiles with ``Grammar.from_structural_tag`` and matches with an empty
vocabulary (strings only); leapgen with ``compile_structural_tag`` over a byte vocabulary. Verdicts
must be equal everywhere; the deliberate differences listed in
:meth:`leapgen.GrammarCompiler.compile_structural_tag` are left out of the generator (no unknown
fields, no token formats, short whitespace runs, regexes in the dialect both share).
"""

from __future__ import annotations

import json
import random

import pytest

from leapgen import GrammarCompiler, GrammarMatcher, TokenizerInfo

xgr = pytest.importorskip("xgrammar", reason="the cross-check needs xgrammar (pip install xgrammar)")

N_RANDOM_TAGS = 240
STRINGS_PER_TAG = 10
ALPHABET = "ab<>/=x日"


@pytest.fixture(scope="module")
def engines():
    leap = GrammarCompiler(TokenizerInfo([bytes([b]) for b in range(256)], "raw"), cache_entries=0)
    xc = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False)
    return leap, xc


def verdicts(engines, fmt: dict, strings: list[str]) -> tuple[list[bool], list[bool]]:
    leap, xc = engines
    tag = {"type": "structural_tag", "format": fmt}
    lg = leap.compile_structural_tag(tag)
    xg = xc.compile_grammar(xgr.Grammar.from_structural_tag(json.dumps(tag)))
    ours, theirs = [], []
    for s in strings:
        m = GrammarMatcher(lg)
        ours.append(m.accept_string(s) and m.is_completed())
        xm = xgr.GrammarMatcher(xg, terminate_without_stop_token=True)
        theirs.append(bool(xm.accept_string(s)) and xm.is_terminated())
    return ours, theirs


def tag(begin, content, end) -> dict:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def const(value) -> dict:
    return {"type": "const_string", "value": value}


ANY = {"type": "any_text"}
TRIGGERED = {"type": "triggered_tags", "triggers": ["<f"],
             "tags": [tag("<f=a>", const("A"), "</f>"), tag("<f=b>", const("B"), "</f>")]}
TT_TEXTS = ["", "hi", "<f=a>A</f>", "hi<f=a>A</f>", "<f=a>A</f>tail", "<f=a>A</f>x<f=b>B</f>", "x<f", "x<f=c", "<"]

HAND_MADE = [
    (tag("<think>", ANY, "</think>"), ["<think>a</think>", "<think>a</think>b</think>", "<think>a</think>b", "<think>"]),
    ({"type": "sequence", "elements": [ANY, const("END")]}, ["abcEND", "END", "abENDcEND", "abc"]),
    ({"type": "sequence", "elements": [{"type": "any_text", "excludes": ["ab"]}, const("b")]}, ["ab", "b", "aab"]),
    (TRIGGERED, TT_TEXTS),
    ({**TRIGGERED, "at_least_one": True}, TT_TEXTS),
    ({**TRIGGERED, "stop_after_first": True}, TT_TEXTS),
    ({**TRIGGERED, "at_least_one": True, "stop_after_first": True}, TT_TEXTS),
    ({**TRIGGERED, "excludes": ["a<f"]}, ["a<f=a>A</f>", "<f=a>A</f>", "a<", "a<f"]),
    ({**TRIGGERED, "excludes": ["f"]}, ["x<f=a>A</f>", "f", "<"]),
    ({"type": "triggered_tags", "triggers": ["<fun"], "excludes": ["<f"], "tags": [tag("<fun=a>", const("A"), "</f>")]},
     ["x<fun=a>A</f>", "<f", "x<", "<fu"]),
    ({"type": "triggered_tags", "triggers": ["aa"], "tags": [tag("aab", const("A"), "/")]}, ["aabA/", "aaabA/", "xaabA/"]),
    ({"type": "triggered_tags", "triggers": ["b", "xab"], "tags": [tag("xab1", const("A"), "/"), tag("b2", const("B"), "/")]},
     ["xab1A/", "b2B/", "xab2B/", "zb2B/", "xb2B/"]),
    ({"type": "sequence", "elements": [TRIGGERED, const("END")]}, ["END", "xEND", "<f=a>A</f>END", "ENDxEND", "<f=a>A</f>"]),
    (tag("<r>", TRIGGERED, "</r>"), ["<r>x<f=a>A</f>y</r>", "<r></r>", "<r>a</r>b</r>", "<r><f=a>A</f></r>"]),
    (tag("<r>", ANY, ["</r>", "</s>"]), ["<r>x</r>", "<r>x</s>", "<r>x</s></r>"]),
    (tag("<r>", {"type": "sequence", "elements": [tag("<t>", ANY, "</t>"), ANY]}, "</r>"),
     ["<r><t>a</r></t>b</r>", "<r><t>a</t>b</t></r>", "<r><t>a</t>b</r>x</r>"]),
    ({"type": "tags_with_separator", "separator": ",", "tags": [tag("<a>", const("A"), "</a>"), tag("<b>", ANY, "</b>")]},
     ["", "<a>A</a>", "<a>A</a>,<b>x</b>", "<a>A</a><b>B</b>", ",", "<b>x</b>y</b>"]),
    ({"type": "any_text", "max_chars": 3}, ["abc", "abcd", "日本語", "日本語x"]),
    ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}},
     ['{"a":1}', "{}", '{"b":1}', '{ "a" : 1 }', ' {"a":1}']),
    ({"type": "grammar", "grammar": 'start: "a" start | "b" | /[0-9]+/', "syntax": "lark"},
     ["b", "aab", "a", "a12", "12a", ""]),
    ({"type": "sequence", "elements": [{"type": "optional", "content": const("x")},
                                       {"type": "repeat", "min": 2, "max": -1, "content": const("a")}]},
     ["a", "aa", "xaaa", "x"]),
]


@pytest.mark.parametrize("fmt, strings", HAND_MADE, ids=[f"hand{i}" for i in range(len(HAND_MADE))])
def test_hand_made_tags(engines, fmt, strings):
    ours, theirs = verdicts(engines, fmt, strings)
    assert ours == theirs, [(s, a, b) for s, a, b in zip(strings, ours, theirs) if a != b]


# ------------------------------------------------------------------------------------------------ random


REGEXES = {"[0-9]+": ["7", "42", ""], "x|yz": ["x", "yz", "y"], "(ab)*c": ["c", "ababc", "abc", "ab"],
           "[a-c]{1,3}": ["a", "cab", "abca"]}
SCHEMAS = [({"type": "integer"}, ["0", "-12", "01", "1.5"]),
           ({"enum": ["a", "b<"]}, ['"a"', '"b<"', '"c"']),
           ({"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
            ['{"k":"v"}', '{"k": "a<b"}', "{}", '{"k":1}']),
           ({"type": "array", "items": {"type": "boolean"}, "maxItems": 2}, ["[]", "[true,false]", "[true, true, true]"])]
GRAMMARS = {'root ::= "a" root | "b"': ["b", "aab", "a"], 'root ::= [a-c]+ "!"': ["ab!", "!", "abc"]}


class TagGen:
    """A seeded random structural tag and strings to try on it."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def text(self, lo: int = 0, hi: int = 6) -> str:
        return "".join(self.rng.choice(ALPHABET) for _ in range(self.rng.randint(lo, hi)))

    def word(self) -> str:
        return self.text(1, 3)

    def leaf(self) -> tuple[dict, list]:
        kind = self.rng.choice(["const", "regex", "json", "any", "any", "grammar"])
        if kind == "const":
            v = self.text(0, 4)
            return const(v), [v]
        if kind == "regex":
            p = self.rng.choice(sorted(REGEXES))
            return {"type": "regex", "pattern": p}, REGEXES[p]
        if kind == "json":
            schema, samples = self.rng.choice(SCHEMAS)
            return {"type": "json_schema", "json_schema": schema}, samples
        if kind == "grammar":
            g = self.rng.choice(sorted(GRAMMARS))
            return {"type": "grammar", "grammar": g}, GRAMMARS[g]
        fmt = {"type": "any_text"}
        if self.rng.random() < 0.5:
            fmt["excludes"] = [self.word() for _ in range(self.rng.randint(1, 2))]
        return fmt, [self.text(), self.text(), ""]

    def fmt(self, depth: int) -> tuple[dict, list]:
        if depth <= 0 or self.rng.random() < 0.3:
            return self.leaf()
        kind = self.rng.choice(["sequence", "or", "repeat", "tag", "tag", "triggered", "triggered", "separated"])
        if kind in ("sequence", "or"):
            parts = [self.fmt(depth - 1) for _ in range(self.rng.randint(1, 3))]
            fmt = {"type": kind, "elements": [p[0] for p in parts]}
            if kind == "or":
                return fmt, [s for p in parts for s in p[1]]
            return fmt, ["".join(self.rng.choice(p[1]) for p in parts) for _ in range(4)]
        if kind == "repeat":
            inner, samples = self.fmt(depth - 1)
            lo = self.rng.randint(0, 2)
            hi = self.rng.choice([-1, lo, lo + 1, lo + 2])
            choice = self.rng.choice(["repeat", "optional", "star", "plus"])
            fmt = {"type": choice, "content": inner}
            if choice == "repeat":
                fmt.update(min=lo, max=hi)
            return fmt, ["".join(self.rng.choice(samples) for _ in range(k)) for k in (0, 1, 2, 3)]
        if kind == "tag":
            return self.tag(depth)
        if kind == "separated":
            tags = [self.tag(depth) for _ in range(self.rng.randint(1, 2))]
            sep = self.rng.choice([",", "", "<>", "/"])
            fmt = {"type": "tags_with_separator", "tags": [t[0] for t in tags], "separator": sep,
                   "at_least_one": self.rng.random() < 0.3, "stop_after_first": self.rng.random() < 0.3}
            return fmt, [sep.join(self.rng.choice(self.rng.choice(tags)[1]) for _ in range(k)) for k in (0, 1, 2)]
        return self.triggered(depth)

    def tag(self, depth: int, begin: str | None = None) -> tuple[dict, list]:
        begin = self.rng.choice(["<a>", "<b>", "[", "<a", "x"]) if begin is None else begin
        ends = [self.rng.choice(["</a>", "</b>", "]", "/", "a>", "<"]) for _ in range(self.rng.randint(1, 2))]
        inner, samples = self.fmt(depth - 1)
        fmt = tag(begin, inner, ends[0] if len(ends) == 1 else ends)
        return fmt, [begin + self.rng.choice(samples) + self.rng.choice(ends) for _ in range(3)]

    def triggered(self, depth: int) -> tuple[dict, list]:
        triggers = []
        for _ in range(self.rng.randint(1, 3)):
            t = self.word()
            if not any(t.startswith(u) or u.startswith(t) for u in triggers):
                triggers.append(t)
        tags = [self.tag(depth, t + self.text(0, 2)) for t in triggers for _ in range(self.rng.randint(1, 2))]
        fmt = {"type": "triggered_tags", "triggers": triggers, "tags": [t[0] for t in tags],
               "at_least_one": self.rng.random() < 0.3, "stop_after_first": self.rng.random() < 0.3}
        if self.rng.random() < 0.4:
            fmt["excludes"] = [self.word() for _ in range(self.rng.randint(1, 2))]
        samples = []
        for _ in range(4):
            pieces = [self.text(0, 3)]
            for _ in range(self.rng.randint(0, 2)):
                pieces += [self.rng.choice(self.rng.choice(tags)[1]), self.text(0, 3)]
            samples.append("".join(pieces))
        return fmt, samples

    def mutate(self, s: str) -> str:
        if not s or self.rng.random() < 0.3:
            return s + self.rng.choice(ALPHABET)
        i = self.rng.randrange(len(s))
        op = self.rng.random()
        if op < 0.4:
            return s[:i] + s[i + 1:]
        if op < 0.7:
            return s[:i] + self.rng.choice(ALPHABET) + s[i + 1:]
        return s[:i] + self.rng.choice(ALPHABET) + s[i:]


def random_cases(n: int, seed: int = 17):
    rng = random.Random(seed)
    gen = TagGen(rng)
    for _ in range(n):
        fmt, samples = gen.fmt(3)
        samples = list(dict.fromkeys(samples))[:4]
        strings = samples + [gen.mutate(rng.choice(samples)) for _ in range(4)] if samples else []
        strings += [gen.text(0, 8) for _ in range(STRINGS_PER_TAG - len(strings))]
        yield fmt, strings


def test_random_tags_and_strings(engines):
    disagree, compared, accepted = [], 0, 0
    for fmt, strings in random_cases(N_RANDOM_TAGS):
        ours, theirs = verdicts(engines, fmt, strings)
        compared += len(strings)
        accepted += sum(theirs)
        disagree += [(json.dumps(fmt), s, a, b) for s, a, b in zip(strings, ours, theirs) if a != b]
    assert not disagree, f"{len(disagree)} of {compared} verdicts differ, e.g. {disagree[:3]}"
    assert compared >= 200 * STRINGS_PER_TAG and 0.15 * compared < accepted < 0.85 * compared  # both kinds tried


@pytest.mark.parametrize("fmt", [
    {"type": "triggered_tags", "triggers": ["<a"], "tags": [tag("<b>", ANY, "</b>")]},
    {"type": "triggered_tags", "triggers": ["<", "<a"], "tags": [tag("<a>", ANY, "</a>")]},
    {"type": "triggered_tags", "triggers": [], "tags": [tag("<a>", ANY, "</a>")]},
    {"type": "sequence", "elements": []},
    {"type": "repeat", "min": 3, "max": 1, "content": ANY},
    tag("<a>", ANY, []),
    tag("<a>", ANY, ""),
    {"type": "const_string", "value": 1},
])
def test_both_refuse_the_same_malformed_tags(engines, fmt):
    leap, _ = engines
    tag_json = json.dumps({"type": "structural_tag", "format": fmt})
    with pytest.raises(Exception):
        xgr.Grammar.from_structural_tag(tag_json)
    with pytest.raises(ValueError):  # a GrammarError (StructuralTagError)
        leap.compile_structural_tag(tag_json)


@pytest.mark.parametrize("fmt", [
    {"type": "any_text", "excludes": [""]},  # xgrammar: then only the empty text
    {"type": "any_text", "exlcudes": ["a"]},  # a misspelt field: xgrammar ignores it
    {"type": "any_text", "max_tokens": 4},  # no token count in a byte-level grammar
])
def test_deliberate_differences_are_errors_in_leapgen(engines, fmt):
    """The tags the docstring of compile_structural_tag lists as refused: xgrammar compiles them."""
    leap, _ = engines
    tag_json = json.dumps({"type": "structural_tag", "format": fmt})
    xgr.Grammar.from_structural_tag(tag_json)
    with pytest.raises(ValueError):
        leap.compile_structural_tag(tag_json)
