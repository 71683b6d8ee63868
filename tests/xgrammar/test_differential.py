"""leapgen.xgrammar against the installed xgrammar on three real vocabularies.

Llama-3 and Qwen3 (byte-level BPE, through ``from_huggingface``) and Mistral
7B (SentencePiece byte fallback, through the constructor as vLLM builds it).
For generated grammars (:mod:`gen_grammars`: regexes, GBNF, JSON Schemas, each
with an instance) and hand-made ones (Lark and structural tags too), both matchers walk the instance's tokens:
masks, ``accept_token`` verdicts (of the path and of tokens drawn from both
masks), ``is_completed``, ``is_terminated`` and ``find_jump_forward_string``
must agree at every step (:meth:`xgr_pair.Pair.compare_walk`; leapgen's
special ids aside, the "special" row of the differences table). Invalid
grammars must raise a RuntimeError in both. What differs on purpose is in the
differences table and ``test_differences.py``, not here.

The default run samples a few seeds per family and kind; ``--run-slow`` runs
many more.
"""

from __future__ import annotations

import json

import pytest
from gen_grammars import ebnf_case, regex_case, schema_case

pytest.importorskip("xgrammar", reason="xgrammar (the oracle) is not installed")

FAMILIES = ["llama3", "qwen", "mistral"]
SEEDS = range(6)
SLOW_SEEDS = range(6, 60)


@pytest.fixture(scope="module", params=FAMILIES)
def vocab(request):
    from xgr_pair import pair

    return pair(request.param)


def _tokens(p, text: str) -> list[int]:
    """The family's own tokenization; for Mistral a greedy longest match over its pieces
    (SentencePiece would prefix a space the grammar does not allow)."""
    if p.family != "mistral":
        return p.encode(text)
    if not hasattr(p, "_greedy"):
        table = {}
        for i, b in enumerate(p.l_info.native.token_bytes):
            if b:
                table.setdefault(b, i)
        p._greedy = (table, max(map(len, table)))
    table, longest = p._greedy
    data, out, i = text.encode("utf-8"), [], 0
    while i < len(data):
        for size in range(min(longest, len(data) - i), 0, -1):
            if data[i:i + size] in table:
                out.append(table[data[i:i + size]])
                i += size
                break
        else:
            raise AssertionError(f"no Mistral piece covers {data[i:i + 4]!r}")
    return out


def _check(p, kind: str, source, text: str, **options):
    compiled = p.compile(kind, source, **options)
    p.whitespace_bound = 20 if kind == "structural_tag" else None  # the "tag-json-space" row
    diffs = p.compare_walk(compiled, _tokens(p, text))
    assert not diffs, f"{kind} {source!r} on {text!r}:\n" + "\n".join(diffs)


def _case(kind: str, seed: int):
    if kind == "regex":
        return regex_case(seed)
    if kind == "ebnf":
        return ebnf_case(seed)
    schema, instance = schema_case(seed)
    return schema, instance


def _run(p, kind: str, seed: int):
    source, instance = _case(kind, seed)
    if kind == "json_schema":
        for any_whitespace in (True, False):
            _check(p, kind, json.dumps(source), json.dumps(instance, ensure_ascii=False), any_whitespace=any_whitespace)
    else:
        _check(p, kind, source, instance)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["regex", "ebnf", "json_schema"])
def test_generated(vocab, kind, seed):
    _run(vocab, kind, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
@pytest.mark.parametrize("kind", ["regex", "ebnf", "json_schema"])
def test_generated_many(vocab, kind, seed):
    _run(vocab, kind, seed)


HAND_MADE = [
    ("builtin_json", None, '{"name": "Ada", "tags": ["x", 1.5e3, {"k": null}], "ok": true}', {}),
    ("builtin_json", None, '[1, [2, [3, {"a": [ ]}]], "\\u00e9\\n"]', {}),
    ("regex", r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", "2024-05-17T08:30", {}),
    ("regex", r"(\+|-)?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", "-12.75e+3", {}),
    ("regex", r"[A-Z][a-z]+ (?:[A-Z]\. )?[A-Z][a-z]+", "Ada L. Lovelace", {}),
    ("regex", r"(?:[a-z0-9]+\.)+[a-z]{2,6}", "docs.example.org", {}),
    ("ebnf", 'root ::= "The answer is " ("yes" | "no") "." [a-z ]*', "The answer is yes. ok then", {}),
    ("ebnf", 'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= factor (("*" | "/") factor)*\n'
             'factor ::= [0-9]+ | "(" expr ")"', "(1+2)*34-(5/(6+7))", {}),
    ("ebnf", 'root ::= "<list>" item* "</list>"\nitem ::= "<li>" [^<]* "</li>"', "<list><li>a b</li><li>c</li></list>",
     {}),
    ("lark", 'start: NAME "=" NUMBER (";" NAME "=" NUMBER)*\nNAME: /[a-z_]+/\nNUMBER: /[0-9]+(\\.[0-9]+)?/',
     "x=1;long_name=22.5", {}),
    ("lark", 'start: item+\nitem: "(" start? ")" | WORD\n%import common.WORD', "(ab(cd))(x)", {}),
    ("structural_tag", {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
        {"type": "tag", "begin": "<tool_call>", "content": {"type": "json_schema", "json_schema": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
         "end": "</tool_call>"}]}}, 'Let me look. <tool_call>{"city": "Paris"}</tool_call> Done.', {}),
    ("structural_tag", {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<answer>", "content": {"type": "regex", "pattern": "[0-9]+"}, "end": "</answer>"},
        {"type": "const_string", "value": "."}]}}, "<answer>42</answer>.", {}),
    ("json_schema", {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "number"},
                                                      "tags": {"type": "array", "items": {"type": "string"}}},
                     "required": ["name", "age"]}, '{"name": "Ada", "age": 36, "tags": ["a", "b"]}', {}),
    ("json_schema", {"type": "object", "properties": {"c": {"enum": ["red", "green"]}, "n": {"type": "number"}},
                     "required": ["c", "n"]}, '{"c": "green", "n": 1.5}', {"any_whitespace": False}),
    ("json_schema", {"type": "object", "properties": {"p": {"type": "object", "properties": {"x": {"type": "number"},
                                                                                               "y": {"type": "number"}},
                                                            "required": ["x"]}}, "required": ["p"]},
     '{\n  "p": {\n    "x": 1,\n    "y": 2\n  }\n}', {"any_whitespace": False, "indent": 2}),
    ("json_schema", {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
     '[{"k":"v"},{}]', {"any_whitespace": False, "separators": (",", ":")}),
    ("json_schema", {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "number"}, "kids": {
        "type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}, "$ref": "#/$defs/node"},
     '{"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3}]}', {}),
    ("json_schema", {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
     '{"a": "\\"quoted\\" \\u00e9"}', {"max_whitespace_cnt": 2}),
]


@pytest.mark.parametrize("kind, source, text, options", HAND_MADE)
def test_hand_made(vocab, kind, source, text, options):
    _check(vocab, kind, json.dumps(source) if kind == "json_schema" else source, text, **options)


INVALID = [
    ("regex", "(ab"), ("regex", "[z-a]"), ("regex", "a{3,1}"), ("regex", "(?<=a)b"), ("regex", r"\p{L}"),
    ("regex", r"(a)\1"), ("regex", "(?i)abc"), ("regex", "a**"),
    ("ebnf", 'root ::= "a'), ("ebnf", "root ::= b"), ("ebnf", 'x ::= "a"'), ("ebnf", 'root ::= "\\q"'),
    ("ebnf", 'root ::= "a"\nroot ::= "b"'), ("ebnf", 'root ::= [a-z]{3,1}'),
    ("json_schema", '{"type": "foo"}'), ("json_schema", "{bad"), ("json_schema", '{"enum": []}'),
    ("json_schema", '{"type":"string","minLength":5,"maxLength":2}'), ("json_schema", '{"$ref": "#/nope"}'),
    ("json_schema", '{"type":"array","minItems":3,"maxItems":1}'), ("json_schema", "false"),
]


@pytest.mark.parametrize("kind, source", INVALID)
def test_invalid_grammars_raise_runtime_error_in_both(kind, source):
    import xgrammar as X

    import leapgen.xgrammar as L

    build = {"regex": "from_regex", "ebnf": "from_ebnf", "json_schema": "from_json_schema"}[kind]
    for mod in (X, L):
        with pytest.raises(RuntimeError):
            getattr(mod.Grammar, build)(source)
