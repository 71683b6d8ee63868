"""Structural tags: reading (both forms, errors at JSON pointers) and the language each format lowers to.

Languages are checked on a byte vocabulary (every byte a token) by accepting whole strings;
token-level behaviour (markers as one added token, masks) is in tests/test_structural_tag_matcher.py.
"""

from __future__ import annotations

import json

import pytest

from leapgen import GrammarCompiler, GrammarMatcher, TokenizerInfo
from leapgen.errors import GrammarError, StructuralTagError
from leapgen.grammar import ir
from leapgen.grammar.structural import StructuralTag, parse_structural_tag, structural_tag_to_ir


@pytest.fixture(scope="module")
def compiler():
    return GrammarCompiler(TokenizerInfo([bytes([b]) for b in range(256)], "raw"))


def st(fmt: dict) -> dict:
    return {"type": "structural_tag", "format": fmt}


def tag(begin, content, end) -> dict:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def const(value: str) -> dict:
    return {"type": "const_string", "value": value}


ANY = {"type": "any_text"}
CALL_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def accepts(compiled, text: str) -> bool:
    m = GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


def check(compiler, fmt: dict, passing: list[str], failing: list[str]) -> None:
    compiled = compiler.compile_structural_tag(st(fmt))
    assert [s for s in passing if not accepts(compiled, s)] == []
    assert [s for s in failing if accepts(compiled, s)] == []


# ------------------------------------------------------------------------------------------------ reading


def test_both_forms_read_to_the_same_tag_and_grammar(compiler):
    legacy = {"type": "structural_tag", "triggers": ["<function="],
              "structures": [{"begin": "<function=get>", "schema": CALL_SCHEMA, "end": "</function>"},
                             {"begin": "<function=put>", "schema": json.dumps(CALL_SCHEMA), "end": "</function>"}]}
    new = st({"type": "triggered_tags", "triggers": ["<function="], "tags": [
        {"begin": "<function=get>", "content": {"type": "json_schema", "json_schema": CALL_SCHEMA},
         "end": "</function>"},
        {"type": "tag", "begin": "<function=put>", "content": {"type": "json_schema", "json_schema": CALL_SCHEMA},
         "end": "</function>"}]})
    a, b = parse_structural_tag(legacy), parse_structural_tag(json.dumps(new))
    assert a == b and a.to_dict() == b.to_dict()
    assert parse_structural_tag(a) is a and parse_structural_tag(a.to_json()) == a
    ga, gb = compiler.compile_structural_tag(legacy), compiler.compile_structural_tag(new)
    assert ga is gb  # one cache entry: the key is the canonical tree
    text = 'I will check. <function=put>{"city": "Paris"}</function> Done.'
    assert accepts(ga, text) and not accepts(ga, text.replace('"Paris"', "1"))


def test_to_dict_writes_defaults_and_keeps_property_order():
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}}
    got = parse_structural_tag(st({"type": "sequence", "elements": [
        {"type": "json_schema", "json_schema": schema},
        {"type": "triggered_tags", "triggers": ["<"], "tags": [tag("<a>", ANY, ["</a>", "</b>"])]},
        {"type": "repeat", "min": 1, "max": -1, "content": const("x")}, {"type": "star", "content": const("y")}]}))
    out = got.to_dict()["format"]["elements"]
    assert list(out[0]["json_schema"]["properties"]) == ["b", "a"]
    assert out[1] == {"type": "triggered_tags", "triggers": ["<"], "at_least_one": False, "stop_after_first": False,
                      "excludes": [], "tags": [{"type": "tag", "begin": "<a>", "end": ["</a>", "</b>"],
                                                "content": {"type": "any_text", "excludes": []}}]}
    assert out[2] == {"type": "repeat", "min": 1, "max": -1, "content": {"type": "const_string", "value": "x"}}
    assert out[3] == {"type": "star", "content": {"type": "const_string", "value": "y"}}
    assert isinstance(got, StructuralTag)


@pytest.mark.parametrize("tag_value, pointer, words", [
    ("{not json", "", "not valid JSON"),
    ([], "", "JSON object"),
    ({"type": "json_object"}, "/type", "structural_tag"),
    ({"type": "structural_tag"}, "", "needs \"format\""),
    (st({"type": "nope"}), "/format/type", "unknown format type"),
    (st({"type": "dispatch", "rules": []}), "/format/type", "not supported"),
    (st({"type": "any_text", "max_tokens": 5}), "/format/max_tokens", "max_chars"),
    (st({"type": "any_text", "excludes": ["a", ""]}), "/format/excludes/1", "must not be empty"),
    (st({"type": "any_text", "exclude": ["a"]}), "/format/exclude", "has no field 'exclude'"),
    (st({"type": "const_string", "value": 1}), "/format/value", "expected a string"),
    (st({"type": "const_string", "value": "\ud800"}), "/format/value", "lone surrogate"),
    (st({"type": "sequence", "elements": []}), "/format/elements", "must not be empty"),
    (st({"type": "sequence", "elements": [ANY, {"type": "or", "elements": [7]}]}), "/format/elements/1/elements/0",
     "a format is a JSON object"),
    (st({"type": "repeat", "min": 3, "max": 1, "content": ANY}), "/format/max", ">= min"),
    (st({"type": "repeat", "min": -1, "max": 1, "content": ANY}), "/format/min", ">= 0"),
    (st(tag("<a>", ANY, [])), "/format/end", "cannot be empty"),
    (st(tag("<a>", ANY, {"type": "const_string", "value": "x"})), "/format/end/type", "token format"),
    (st({"type": "triggered_tags", "triggers": [], "tags": [tag("<a>", ANY, "</a>")]}), "/format/triggers",
     "must not be empty"),
    (st({"type": "triggered_tags", "triggers": ["<b"], "tags": [tag("<a>", ANY, "</a>")]}), "/format/tags/0/begin",
     "no trigger starts"),
    (st({"type": "triggered_tags", "triggers": ["<", "<a"], "tags": [tag("<a>", ANY, "</a>")]}),
     "/format/tags/0/begin", "several triggers"),
    (st({"type": "triggered_tags", "triggers": ["<"], "tags": [const("x")]}), "/format/tags/0/type", "tag formats"),
    (st({"type": "triggered_tags", "triggers": ["<"], "tags": [tag("<a>", ANY, "</a>")], "at_least_one": "yes"}),
     "/format/at_least_one", "boolean"),
    (st({"type": "json_schema", "json_schema": {}, "style": "qwen_xml"}), "/format/style", "not supported"),
    (st({"type": "json_schema", "json_schema": 3}), "/format/json_schema", "object or a boolean"),
    (st({"type": "grammar", "grammar": "root ::= x", "syntax": "peg"}), "/format/syntax", "lark"),
    ({"type": "structural_tag", "structures": [{"begin": "<a>", "schema": "{bad", "end": "</a>"}],
      "triggers": ["<a"]}, "/structures/0/schema", "not valid JSON"),
    ({"type": "structural_tag", "structures": [{"begin": "<a>", "end": "</a>"}], "triggers": ["<a"]},
     "/structures/0/schema", "missing field"),
])
def test_malformed_tags_name_the_place(tag_value, pointer, words):
    with pytest.raises(StructuralTagError) as info:
        parse_structural_tag(tag_value)
    assert info.value.pointer == pointer and words in str(info.value), str(info.value)
    assert isinstance(info.value, GrammarError)


@pytest.mark.parametrize("fmt, pointer, inner, words", [
    ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "strin"}}}},
     "/format/json_schema/properties/a/type", None, "strin"),
    ({"type": "regex", "pattern": "[a-"}, "/format/pattern", "offset", "regex"),
    ({"type": "grammar", "grammar": 'root ::= "a" ('}, "/format/grammar", "line 1:", ""),
    (tag("<a>", {"type": "sequence", "elements": [const("x"), ANY]}, ""), "/format/content/elements/1", None,
     "non-empty end"),
    ({"type": "triggered_tags", "triggers": ["<a", "<b"], "tags": [tag("<a>", ANY, "</a>")]}, "/format/triggers/1",
     None, "starts no tag"),
    ({"type": "token", "token": 5}, "/format", None, "needs the vocabulary"),
])
def test_contents_refused_by_their_front_end_name_the_place(fmt, pointer, inner, words):
    with pytest.raises(StructuralTagError) as info:
        structural_tag_to_ir(st(fmt))
    err = info.value
    assert err.pointer == pointer and words in str(err), str(err)
    assert inner is None or inner in err.where


def test_legacy_schema_errors_point_into_the_structure():
    legacy = {"type": "structural_tag", "triggers": ["<a"],
              "structures": [{"begin": "<a>", "schema": {"type": "object", "minProperties": "x"}, "end": "</a>"}]}
    with pytest.raises(StructuralTagError) as info:
        structural_tag_to_ir(legacy)
    assert info.value.pointer.startswith("/structures/0/schema/")


# ------------------------------------------------------------------------------------------------ languages


def test_any_text_and_its_excludes_and_max_chars(compiler):
    check(compiler, ANY, ["", "abc", "日本語 ✓", "<tool_call>"], [])
    check(compiler, {"type": "any_text", "excludes": ["ab", "日"]}, ["", "a b", "ba", "本"], ["ab", "xaby", "日本"])
    check(compiler, {"type": "any_text", "max_chars": 3}, ["", "abc", "日本語"], ["abcd", "日本語x"])


def test_a_tag_stops_the_free_text_inside_it_at_its_end(compiler):
    check(compiler, tag("<think>", ANY, "</think>"), ["<think></think>", "<think>a < b</think>"],
          ["<think>a</think>b</think>", "<think>a", "<think>a</think>b"])
    check(compiler, tag("<r>", ANY, ["</r>", "</s>"]), ["<r>x</r>", "<r>x</s>"], ["<r>x</s></r>"])
    # the nearest tag's end only, through sequences; an inner tag has its own
    nested = tag("<r>", {"type": "sequence", "elements": [tag("<t>", ANY, "</t>"), ANY]}, "</r>")
    check(compiler, nested, ["<r><t>a</r></t>b</r>", "<r><t>a</t>b</t></r>"], ["<r><t>a</t>b</r>x</r>"])
    check(compiler, tag("<r>", {"type": "sequence", "elements": [ANY, const("!")]}, "</r>"), ["<r>a!</r>"],
          ["<r>a</r>!</r>"])


TRIGGERED = {"type": "triggered_tags", "triggers": ["<f"],
             "tags": [tag("<f=a>", const("A"), "</f>"), tag("<f=b>", const("B"), "</f>")]}
TEXTS = ["", "hi", "<f=a>A</f>", "hi<f=a>A</f>", "<f=a>A</f>tail", "<f=a>A</f>x<f=b>B</f>", "<f=a>A</f><f=b>B</f>",
         "x<f", "x<f=c", "<", "hi<f=a>A</f><f=b>B</f>", "x<f=a>B</f>"]


@pytest.mark.parametrize("flags, accepted", [
    ({}, {"", "hi", "<f=a>A</f>", "hi<f=a>A</f>", "<f=a>A</f>tail", "<f=a>A</f>x<f=b>B</f>", "<f=a>A</f><f=b>B</f>",
          "<", "hi<f=a>A</f><f=b>B</f>"}),
    ({"at_least_one": True}, {"<f=a>A</f>", "<f=a>A</f>tail", "<f=a>A</f>x<f=b>B</f>", "<f=a>A</f><f=b>B</f>"}),
    ({"stop_after_first": True}, {"", "hi", "<f=a>A</f>", "hi<f=a>A</f>", "<"}),
    ({"at_least_one": True, "stop_after_first": True}, {"<f=a>A</f>"}),
])
def test_triggered_tags_flags(compiler, flags, accepted):
    """xgrammar's semantics: at_least_one starts with a tag, stop_after_first ends after one."""
    compiled = compiler.compile_structural_tag(st({**TRIGGERED, **flags}))
    assert {s for s in TEXTS if accepts(compiled, s)} == accepted


@pytest.mark.parametrize("fmt, passing, failing", [
    # a trigger dispatches where it completes the first pattern occurrence
    ({"type": "triggered_tags", "triggers": ["aa"], "tags": [tag("aab", const("A"), "/")]}, ["aabA/", "xaabA/"],
     ["aaabA/"]),
    # the longest trigger wins where two end together
    ({"type": "triggered_tags", "triggers": ["b", "xab"], "tags": [tag("xab1", const("A"), "/"),
                                                                    tag("b2", const("B"), "/")]},
     ["xab1A/", "b2B/", "zb2B/", "xb2B/"], ["xab2B/"]),
    # an excluded string ending with the trigger, or inside it, stops the dispatch
    ({**TRIGGERED, "excludes": ["a<f"]}, ["<f=a>A</f>", "a<"], ["a<f=a>A</f>", "a<f"]),
    ({**TRIGGERED, "excludes": ["f"]}, ["<"], ["x<f=a>A</f>", "f"]),
    ({"type": "sequence", "elements": [TRIGGERED, const("END")]}, ["END", "xEND", "<f=a>A</f>END", "ENDxEND"],
     ["<f=a>A</f>"]),
    (tag("<r>", TRIGGERED, "</r>"), ["<r>x<f=a>A</f>y</r>", "<r></r>"], ["<r>a</r>b</r>"]),
])
def test_triggers_and_excludes(compiler, fmt, passing, failing):
    check(compiler, fmt, passing, failing)


def test_tags_with_separator(compiler):
    two = {"type": "tags_with_separator", "separator": ",",
           "tags": [tag("<a>", const("A"), "</a>"), tag("<b>", const("B"), "</b>")]}
    check(compiler, two, ["", "<a>A</a>", "<a>A</a>,<b>B</b>,<a>A</a>"], ["<a>A</a><b>B</b>", ",", "<a>A</a>,"])
    check(compiler, {**two, "at_least_one": True}, ["<a>A</a>"], [""])
    check(compiler, {**two, "stop_after_first": True}, ["", "<b>B</b>"], ["<a>A</a>,<b>B</b>"])


def test_composition_and_contents(compiler):
    check(compiler, {"type": "sequence", "elements": [
        {"type": "optional", "content": const("Answer: ")},
        {"type": "or", "elements": [{"type": "regex", "pattern": "[0-9]+"}, {"type": "grammar",
                                                                             "grammar": 'root ::= "no" | "n" root'}]},
        {"type": "repeat", "min": 1, "max": 2, "content": const("!")},
        {"type": "optional", "content": {"type": "grammar", "grammar": 'start: "<" WORD ">"\nWORD: /[a-z]+/',
                                         "syntax": "lark"}},
        {"type": "json_schema", "json_schema": CALL_SCHEMA}]},
        ["42!" + '{"city":"x"}', 'Answer: nnno!!<ok>{ "city" : "x" }'],
        ["Answer: 4!!!{}", "x!{}", '42{"city":"x"}', '1!<>{"city":"x"}'])


def test_a_recursive_content_makes_a_grammar_of_rules():
    node, _ = structural_tag_to_ir(st(tag("<j>", {"type": "json_schema", "json_schema": {
        "$defs": {"t": {"type": "object", "properties": {"c": {"$ref": "#/$defs/t"}}}}, "$ref": "#/$defs/t"}},
        "</j>")))
    assert isinstance(node, ir.Grammar) and node.root == "root"
    assert all(name == "root" or name.startswith("s1.") for name in node.rules)


def test_many_contents_are_built_apart_and_overlapping_ones_become_rules(compiler):
    tags = [tag(f"<f{i}>", {"type": "json_schema", "json_schema": {"type": "object", "properties": {
        f"k{i}": {"type": "integer"}}, "required": [f"k{i}"]}}, "</f>") for i in range(20)]
    fmt = {"type": "triggered_tags", "triggers": ["<f"], "tags": tags}
    node, _ = structural_tag_to_ir(st(fmt))
    assert not isinstance(node, ir.Grammar)
    assert sum(isinstance(n, ir.Embed) for n in ir.iter_nodes(node)) == 20  # each schema its own DFA
    as_rules, _ = structural_tag_to_ir(st(fmt), rules="all")
    assert isinstance(as_rules, ir.Grammar) and len(as_rules.keep) == 20
    texts = ['a <f7>{"k7": 1}</f> b <f19>{"k19":2}</f>', 'a <f7>{"k8": 1}</f>', "<f3>{}</f>", "x"]
    for compiled in (compiler.compile_structural_tag(st(fmt)), compiler.compile_ir(as_rules, kind="structural_tag")):
        assert [accepts(compiled, t) for t in texts] == [True, False, False, True]
    assert not compiler.compile_ir(as_rules).is_regular
    # two tags with one begin and free text in both: one DFA would pass the state limit; rules carry them
    overlapping = {"type": "triggered_tags", "triggers": ["<a"], "tags": [
        tag("<a>", {"type": "triggered_tags", "triggers": ["<b"], "tags": [tag("<b>", ANY, "</b>")]}, "</a>"),
        tag("<a>", {"type": "repeat", "min": 0, "max": 30, "content": {"type": "any_text", "excludes": ["ab"]}},
            "</a>")]}
    small = GrammarCompiler(compiler.tokenizer_info, max_states=5_000)
    compiled = small.compile_structural_tag(st(overlapping))
    assert not compiled.is_regular
    assert accepts(compiled, "x <a>y <b>z</b> w</a> v") and accepts(compiled, "<a>ab</a>")
