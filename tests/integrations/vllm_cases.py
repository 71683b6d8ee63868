"""Structured-output requests for the end-to-end vLLM tests, each with an oracle that shares no
code with leapgen (``jsonschema``, ``re``, ``lark``), and the engine spy's reader.

Every kind vLLM's ``structured_outputs`` has: ``json`` (three schemas),
``json_object``, ``regex`` (two patterns), ``choice``, ``grammar`` (GBNF: a
regular one and a recursive one, whose masks come from leapgen's pushdown
matcher; and Lark, which vLLM tells from GBNF by its missing ``::=``). Strings are bounded so that a complete answer fits ``MAX_TOKENS``.
"""

from __future__ import annotations

import collections
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MAX_TOKENS = 256

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"]}
ORDER = {"type": "object", "properties": {
    "id": {"type": "integer", "minimum": 1, "maximum": 99999},
    "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
        "type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
                                         "qty": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["sku", "qty"]}}}, "required": ["id", "items"]}
STATUS = {"type": "object", "properties": {"status": {"enum": ["active", "inactive", "banned"]},
                                           "verified": {"type": "boolean"}},
          "required": ["status", "verified"]}
PHONE = r"\d{3}-\d{4}"
DATE = r"(19|20)\d{2}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
CHOICES = ["positive", "negative", "neutral"]
ANSWER_GBNF = 'root ::= "The answer is " answer "."\nanswer ::= "yes" | "no" | [0-9] [0-9]?\n'
ANSWER_LARK = 'start: "The answer is " ANSWER "."\nANSWER: "yes" | "no" | /[0-9][0-9]?/\n'
NESTED_GBNF = 'root ::= list\nlist ::= "[" (item ("," item){0,4})? "]"\nitem ::= [0-9] | list\n'
NESTED_LARK = 'start: list\nlist: "[" (item ("," item)~0..4)? "]"\nitem: DIGIT | list\nDIGIT: /[0-9]/\n'


@dataclass(frozen=True)
class Case:
    """One request: vLLM's ``StructuredOutputsParams`` fields, a prompt, and its oracle."""

    kind: str
    structured_outputs: dict
    prompt: str
    check: Callable[[str], None]
    temperature: float = 0.7


def _schema_check(schema):
    import jsonschema

    return lambda text: jsonschema.validate(json.loads(text), schema)


def _object_check(text):
    assert isinstance(json.loads(text), dict), text


def _regex_check(pattern):
    return lambda text: re.fullmatch(pattern, text) or _fail(text, pattern)


def _lark_check(grammar):
    import lark

    parser = lark.Lark(grammar, parser="earley")
    return parser.parse


def _fail(text, what):
    raise AssertionError(f"{text!r} does not match {what!r}")


def cases(per_kind: int = 10) -> list[Case]:
    """``per_kind`` requests of each of six kinds (prompts vary with the index)."""
    out = []
    for i in range(per_kind):
        schema, name = [(PERSON, "person"), (ORDER, "order"), (STATUS, "account status")][i % 3]
        out += [
            Case("json", {"json": schema}, f"Give a {name} record number {i} as JSON.", _schema_check(schema)),
            Case("json_object", {"json_object": True},
                 f'Reply with one short JSON object {{"name": ..., "color": ...}} for cat number {i}.', _object_check,
                 temperature=0.0),  # an object of any size: sampled, this small model may not close it
            Case("regex", {"regex": PHONE if i % 2 else DATE},
                 f"Write {'a phone number' if i % 2 else 'a date'} (example {i}).",
                 _regex_check(PHONE if i % 2 else DATE)),
            Case("choice", {"choice": CHOICES}, f"Review {i}: 'I loved it, truly great.' Sentiment?",
                 lambda text: text in CHOICES or _fail(text, CHOICES)),
            Case("grammar", {"grammar": [ANSWER_GBNF, NESTED_GBNF, ANSWER_LARK][i % 3]},  # the last one in Lark
                 f"Write a short nested list of digits ({i})." if i % 3 == 1 else f"Question {i}: is water wet?",
                 _lark_check(NESTED_LARK if i % 3 == 1 else ANSWER_LARK)),
        ]
    return out


def spy_environment(spy_dir: Path) -> dict:
    """Environment variables that load ``engine_spy/sitecustomize.py`` in the engine's processes."""
    here = str(Path(__file__).resolve().parent / "engine_spy")
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": here if not path else f"{here}{os.pathsep}{path}", "LEAPGEN_ENGINE_SPY_DIR": str(spy_dir)}


def spy_counts(spy_dir: Path) -> collections.Counter:
    """What the spy recorded, over every process."""
    counts = collections.Counter()
    for log in spy_dir.glob("*.log"):
        counts.update(line.strip() for line in log.read_text().splitlines() if line.strip())
    return counts


def assert_leapgen_made_the_masks(spy_dir: Path, min_fills: int) -> None:
    """Leapgen's backend was built, its grammars filled at least ``min_fills`` rows, no other backend was built."""
    counts = spy_counts(spy_dir)
    others = {line: n for line, n in counts.items() if line.startswith("built ") and line != "built LeapgenBackend"}
    assert counts["built LeapgenBackend"] >= 1, counts
    assert counts["fill leapgen"] >= min_fills, counts
    assert not others, others
