"""Grammars and valid instances for the mask benchmarks.

Three groups (``Grammar.group``):

- ``regex`` / ``schema``: a fixed set of regexes and JSON Schemas with
  instances, written in the dialect every engine shares (no lookaround, no
  ``\\d``/``\\w``/``.``, whose meaning differs between ECMAScript and Rust).
- ``jsb``: JSONSchemaBench (the MaskBench valid instances), read from
  ``../shared/corpora/jsonschemabench``: a deterministic sample, or every
  schema (``n=None``), each in one half of a fixed split (:func:`split_half`).
- ``cfg``: the builtin JSON grammar, a recursive JSON Schema and a recursive
  EBNF grammar.
- ``choice``: vLLM's ``choice`` with 10,000 strings (not in the default
  groups: ``--groups choice``).
- ``gbnf``: the GBNF corpora of ``../shared/corpora``: outlines' Lark
  grammars as GBNF (``tests/grammars``) with outlines' sample documents, and
  the nine llama.cpp grammars of llguidance's corpus with the strings the
  tests wrote for them (``tests/cfg/test_ebnf_corpus.py``).

Instances are texts; JSON ones are compact (``separators=(",", ":")``), the
layout every backend compiles schemas to here.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
JSB_ROOT = CORPORA / "jsonschemabench"
GRAMMARS_DIR = Path(__file__).resolve().parents[1] / "tests" / "grammars"


@dataclass(frozen=True)
class Grammar:
    """One benchmark grammar.

    Attributes
    ----------
    name : str
    group : str
        ``regex``, ``schema``, ``jsb``, ``cfg``, ``gbnf`` or ``choice``.
    kind : str
        ``regex``, ``json_schema``, ``ebnf``, ``builtin_json`` or ``choice``.
    source : str
        The pattern, the schema's JSON text, the EBNF text ("" for builtin_json),
        the JSON list of choices.
    instances : tuple of str
        Valid texts to walk.
    half : str
        JSONSchemaBench schemas: ``"tune"`` or ``"holdout"`` (:func:`split_half`); ``""`` for the others.
    """

    name: str
    group: str
    kind: str
    source: str
    instances: tuple[str, ...]
    half: str = ""


#: The two halves of the JSONSchemaBench split (:func:`split_half`).
HALVES = ("tune", "holdout")


def split_half(schema_text: str) -> str:
    """The half of the fixed JSONSchemaBench split a schema belongs to.

    ``"tune"`` when the first byte of the SHA-256 of the schema file's text
    (UTF-8) is even, else ``"holdout"``: deterministic, independent of the
    sample, the subset and the file name (a schema that occurs twice lands in
    one half). Speed work is tuned on ``tune`` only; ``holdout`` stands in for
    schemas nobody looked at, and every table reports the halves separately.
    """
    return HALVES[hashlib.sha256(schema_text.encode("utf-8")).digest()[0] & 1]


def compact(value) -> str:
    """The compact JSON text of a value (UTF-8 kept, not escaped)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_JSON_STR = (r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')

REGEXES: list[tuple[str, str, list[str]]] = [
    ("email", r"[a-z0-9._%+-]{1,20}@[a-z0-9-]{1,20}\.(com|org|net)", ["john.doe@example.com", "a_b+c@x-y.org"]),
    ("date", r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", ["2024-02-29", "1999-12-31"]),
    ("time", r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?", ["23:59:01", "07:30"]),
    ("uuid", r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
     ["123e4567-e89b-12d3-a456-426614174000"]),
    ("ipv4", r"((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])",
     ["192.168.0.1", "10.0.255.7"]),
    ("phone", r"\(?[0-9]{3}\)?[ -]?[0-9]{3}-[0-9]{4}", ["(555) 123-4567", "555-123-4567"]),
    ("number", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", ["-12.5e+3", "0", "3.14159265"]),
    ("json_string", _JSON_STR, ['"hello \\"world\\" \\u00e9 caf\u00e9"', '"tab\\there"']),
    ("url", r"https?://[a-z0-9.-]{1,30}\.(com|org|net)(/[a-zA-Z0-9_./-]{0,40})?",
     ["https://www.example.com/path/to/page.html", "http://docs.python.org"]),
    ("identifier", r"[A-Za-z_][A-Za-z0-9_]{0,30}", ["my_variable_name2", "_private"]),
    ("sentence", r"[A-Z][a-z]{0,12}( [a-z]{1,12}){2,15}\.", ["The quick brown fox jumps over the lazy dog."]),
    ("choice", r"(red|green|blue|yellow|purple|orange)", ["purple", "red"]),
    ("hex_color", r"#[0-9a-fA-F]{6}", ["#1a2B3c"]),
    ("money", r"\$[0-9]{1,3}(,[0-9]{3})*\.[0-9]{2}", ["$1,234,567.89", "$5.00"]),
    ("csv_row", r"[a-z]{1,10}(,[0-9]{1,5}){3}", ["apples,1,20,300"]),
    ("greek", r"[α-ω]{1,10}( [α-ω]{1,10}){0,5}", ["αβγ δεζ ηθ"]),
    ("cjk", r"[\u4e00-\u9fff]{2,10}", ["你好世界", "日本語"]),
    ("multiline", r"[A-Za-z ]{1,30}(\n[A-Za-z ]{1,30}){0,5}", ["Line one\nLine two here\nThird"]),
    ("semver", r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?",
     ["1.20.3-beta.1", "0.1.0"]),
    ("json_like", r'\{"name": "[A-Za-z ]{1,20}", "age": [0-9]{1,3}\}', ['{"name": "Ada Lovelace", "age": 36}']),
    ("free_text", r"[^\n]{0,200}",
     ["Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore."]),
]

_PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
           "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0},
                          "email": {"type": "string"}}}
_ADDRESS = {"type": "object", "additionalProperties": False, "required": ["street", "city", "zip"],
            "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                           "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}

SCHEMAS: list[tuple[str, dict, list]] = [
    ("person", _PERSON, [{"name": "Alice", "age": 30}, {"name": "Bob", "age": 4, "email": "bob@example.com"}]),
    ("address", {"type": "object", "additionalProperties": False, "required": ["person", "address"],
                 "properties": {"person": _PERSON, "address": _ADDRESS}},
     [{"person": {"name": "Carol", "age": 52}, "address": {"street": "1 Main St", "city": "Springfield",
                                                           "zip": "12345"}}]),
    ("enum_status", {"type": "object", "additionalProperties": False, "required": ["status", "code"],
                     "properties": {"status": {"enum": ["active", "inactive", "pending"]},
                                    "code": {"type": "integer", "minimum": 100, "maximum": 599}}},
     [{"status": "pending", "code": 404}, {"status": "active", "code": 200}]),
    ("tags", {"type": "object", "additionalProperties": False, "required": ["id", "tags"],
              "properties": {"id": {"type": "integer"},
                             "tags": {"type": "array", "items": {"type": "string", "maxLength": 20},
                                      "minItems": 1, "maxItems": 8}}},
     [{"id": 7, "tags": ["red", "green", "blue"]}, {"id": 123456, "tags": ["x"]}]),
    ("matrix", {"type": "array", "items": {"type": "array", "items": {"type": "number"}, "maxItems": 4},
                "maxItems": 4},
     [[[1, 2.5, -3], [4e3, 0]], [[0.125]]]),
    ("union", {"type": "object", "additionalProperties": False, "required": ["value"],
               "properties": {"value": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 12},
                                                  {"type": "null"}]}}},
     [{"value": 42}, {"value": "forty-two"}, {"value": None}]),
    ("product", {"type": "object", "additionalProperties": False, "required": ["sku", "price", "in_stock"],
                 "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                                "price": {"type": "number", "minimum": 0}, "in_stock": {"type": "boolean"},
                                "dimensions": {"type": "object", "additionalProperties": False,
                                               "properties": {"w": {"type": "number"}, "h": {"type": "number"}}}}},
     [{"sku": "ABC-1234", "price": 19.99, "in_stock": True, "dimensions": {"w": 10, "h": 2.5}},
      {"sku": "XYZ-0001", "price": 0, "in_stock": False}]),
    ("event", {"type": "object", "additionalProperties": False, "required": ["title", "attendees"],
               "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 60},
                              "attendees": {"type": "array", "items": _PERSON, "maxItems": 5},
                              "priority": {"const": "high"}}},
     [{"title": "Team sync", "attendees": [{"name": "Dan", "age": 41}, {"name": "Eve", "age": 29}],
       "priority": "high"}]),
    ("unicode_text", {"type": "object", "additionalProperties": False, "required": ["text", "lang"],
                      "properties": {"text": {"type": "string"}, "lang": {"enum": ["en", "fr", "ja", "el"]}}},
     [{"text": "Ceci n'est pas une pipe. \u00c7a va?", "lang": "fr"}, {"text": "日本語のテキスト", "lang": "ja"}]),
    ("config", {"type": "object", "additionalProperties": False,
                "required": ["version", "debug", "retries", "servers"],
                "properties": {"version": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+$"},
                               "debug": {"type": "boolean"},
                               "retries": {"type": "integer", "minimum": 0, "maximum": 10},
                               "servers": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                                                      "required": ["host", "port"],
                                                                      "properties": {"host": {"type": "string"},
                                                                                     "port": {"type": "integer"}}}}}},
     [{"version": "1.2", "debug": False, "retries": 3,
       "servers": [{"host": "a.example.com", "port": 8080}, {"host": "10.0.0.2", "port": 443}]}]),
]

#: An object of 30 optional properties (issue 15's ``any_order`` size: its seen keys are matcher state, so
#: the compile stays small); its instances are in schema order, so both modes walk them.
_OPTIONAL30 = {"type": "object", "additionalProperties": False,
               "properties": {f"p{i:02d}": [{"type": "integer"}, {"type": "string", "maxLength": 16},
                                            {"type": "boolean"}][i % 3] for i in range(30)}}
SCHEMAS.append(("optional30", _OPTIONAL30,
                [{"p00": 1, "p01": "one", "p02": True, "p10": "ten", "p17": False, "p29": False},
                 {"p00": 0, "p03": 3, "p05": False, "p13": "mid", "p21": 21, "p28": "late", "p29": True}]))

TREE_SCHEMA = {"$ref": "#/$defs/node", "$defs": {"node": {
    "type": "object", "additionalProperties": False, "required": ["value", "children"],
    "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}}
TREE_INSTANCES = [{"value": 1, "children": [{"value": 2, "children": []},
                                            {"value": 3, "children": [{"value": 4, "children": []}]}]}]

ARITH_EBNF = r"""
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"
number ::= [0-9]+
"""
ARITH_INSTANCES = ["(1+2)*3-4/(5+6*(7-8))", "((((42))))+1", "12*(3+(4-(5*(6+7))))/8"]

JSON_INSTANCES = [
    {"a": [1, 2, {"b": None, "c": [True, False]}], "d": "text"},
    [{"id": 1, "name": "x", "nested": {"deep": {"deeper": [1, [2, [3, [4]]]]}}}],
    {"message": "Hello, world!", "values": [1.5, -2e10, 0], "ok": True},
]


def fixed_grammars() -> list[Grammar]:
    """The fixed regexes and JSON Schemas (groups ``regex`` and ``schema``)."""
    out = [Grammar(f"regex/{n}", "regex", "regex", p, tuple(i)) for n, p, i in REGEXES]
    out += [Grammar(f"schema/{n}", "schema", "json_schema", json.dumps(s), tuple(compact(v) for v in i))
            for n, s, i in SCHEMAS]
    return out


#: Real JSON documents added to the builtin JSON grammar's walk: one valid instance of each of this many
#: JSONSchemaBench schemas (sampled with seed 0, when the corpus is there), so that its TBM p99 is a
#: percentile of ~1,000 tokens, not the second largest of ~120.
BUILTIN_JSON_DOCUMENTS = 40


def cfg_grammars(root: Path = JSB_ROOT) -> list[Grammar]:
    """The builtin JSON grammar, a recursive schema and a recursive EBNF grammar (group ``cfg``)."""
    json_texts = [compact(v) for v in JSON_INSTANCES] + [compact(i[0]) for _, _, i in SCHEMAS[:3]]
    json_texts += [g.instances[0] for g in jsonschemabench_grammars(BUILTIN_JSON_DOCUMENTS, seed=0, root=root)
                   if len(g.instances[0]) <= 2000]
    return [
        Grammar("cfg/builtin_json", "cfg", "builtin_json", "", tuple(json_texts)),
        Grammar("cfg/tree_schema", "cfg", "json_schema", json.dumps(TREE_SCHEMA),
                tuple(compact(v) for v in TREE_INSTANCES)),
        Grammar("cfg/arith_ebnf", "cfg", "ebnf", ARITH_EBNF, tuple(ARITH_INSTANCES)),
    ]


def choice_phrases(n: int, *, seed: int = 0) -> list[str]:
    """``n`` distinct two-word phrases of pseudo-words (2-4 consonant-vowel
    syllables each; deterministic), in random order: a choice list with real
    prefix and suffix sharing, independent of any tokenizer."""
    rng = random.Random(seed)
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(2 * n)})
    phrases: set[str] = set()
    while len(phrases) < n:
        phrases.add(f"{rng.choice(words)} {rng.choice(words)}")
    out = sorted(phrases)
    rng.shuffle(out)
    return out


def choice_grammars(n: int = 10_000) -> list[Grammar]:
    """vLLM's ``choice`` of ``n`` phrases (group ``choice``); 20 of them walked."""
    phrases = choice_phrases(n)
    return [Grammar(f"choice/{n}_phrases", "choice", "choice", json.dumps(phrases),
                    tuple(random.Random(1).sample(phrases, 20)))]


#: outlines' sample folders per grammar of ``tests/grammars`` (``cfg_samples/<folder>``).
_OUTLINES_SAMPLES = {"arithmetic": "arithmetic", "csv": "csv", "json": "json", "lark": "lark",
                     "sql_select": "sql_select"}


def gbnf_grammars(root: Path = CORPORA) -> list[Grammar]:
    """The GBNF corpora (group ``gbnf``); empty where ``../shared/corpora`` is missing."""
    samples = root / "outlines" / "pr587" / "tests" / "benchmark" / "cfg_samples"
    llama = root / "llguidance" / "sample_parser" / "data" / "from-llama.cpp"
    out = []
    if samples.is_dir():
        for name, folder in _OUTLINES_SAMPLES.items():
            texts = tuple(p.read_text("utf-8") for p in sorted((samples / folder).glob("*.test")))
            out.append(Grammar(f"gbnf/outlines/{name}", "gbnf", "ebnf", (GRAMMARS_DIR / f"{name}.gbnf").read_text("utf-8"),
                               texts))
    if llama.is_dir():
        from cfg.test_ebnf_corpus import LLAMA_CPP_CASES  # the strings written for these grammars

        for name, (good, _) in sorted(LLAMA_CPP_CASES.items()):
            texts = tuple(good)
            if name == "json":
                texts += ((root / "llguidance" / "sample_parser" / "data" / "blog.sample.json").read_text("utf-8"),)
            out.append(Grammar(f"gbnf/llama.cpp/{name}", "gbnf", "ebnf", (llama / f"{name}.gbnf").read_text("utf-8"),
                               texts))
    return out


def jsonschemabench_grammars(n: int | None, *, seed: int = 0, subsets: list[str] | None = None,
                             max_instances: int = 3, root: Path = JSB_ROOT, half: str | None = None) -> list[Grammar]:
    """JSONSchemaBench schemas with valid instances: a deterministic sample, or all of them.

    Parameters
    ----------
    n : int or None
        Schemas wanted, sampled among those with a valid instance (fewer if
        the chosen subsets hold fewer); None: every schema of the chosen
        subsets and half, those without a valid instance too (compiled, not
        walked).
    seed : int, default 0
        Sampling seed: the same (n, seed, subsets, half) gives the same sample.
    subsets : list of str, optional
        Subset names (``Github_easy``, ``Kubernetes``...); default all ten.
    max_instances : int, default 3
        Valid instances kept per schema (the first ones listed).
    root : Path
        The corpus folder.
    half : str, optional
        ``"tune"`` or ``"holdout"`` (:func:`split_half`): only that half; default both.

    Returns
    -------
    list of Grammar
        Group ``jsb``, named ``jsb/<Subset>/<file>``, in name order; empty when the corpus is missing.
    """
    tests_dir = root / "tests"
    if not tests_dir.is_dir() or (n is not None and n <= 0):
        return []
    if half is not None and half not in HALVES:
        raise ValueError(f"half must be one of {HALVES}, got {half!r}")
    names = subsets or sorted(p.stem for p in tests_dir.glob("*.jsonl"))
    candidates = []
    for subset in sorted(names):
        path = tests_dir / f"{subset}.jsonl"
        if not path.is_file():
            raise ValueError(f"no JSONSchemaBench subset {subset!r} under {tests_dir}")
        listed = set()
        for line in filter(None, path.read_text("utf-8").split("\n")):  # not splitlines: U+2028 in strings
            record = json.loads(line)
            valid = [t["data"] for t in record["tests"] if t["valid"]]
            listed.add(record["schema_file"])
            if valid or n is None:
                candidates.append((subset, record["schema_file"], valid[:max_instances]))
        if n is None:  # schemas without a tests record: compiled only
            candidates += [(subset, f"schemas/{subset}/{p.name}", []) for p in sorted((root / "schemas" / subset).glob("*.json"))
                           if f"schemas/{subset}/{p.name}" not in listed]
    texts = {c[1]: (root / c[1]).read_text("utf-8") for c in candidates}
    if half is not None:
        candidates = [c for c in candidates if split_half(texts[c[1]]) == half]
    chosen = candidates if n is None else random.Random(seed).sample(candidates, min(n, len(candidates)))
    out = []
    for subset, schema_file, valid in sorted(chosen, key=lambda c: c[1]):
        text = texts[schema_file]
        out.append(Grammar(f"jsb/{subset}/{Path(schema_file).stem}", "jsb", "json_schema", text,
                           tuple(compact(v) for v in valid), split_half(text)))
    return out
