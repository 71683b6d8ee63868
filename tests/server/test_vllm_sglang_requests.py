"""Requests written for vLLM (``structured_outputs``, ``guided_*``,
``response_format``) and for SGLang (``POST /generate``), mixed and
concurrent on the embedded model: every finished output satisfies its
constraint, checked with ``jsonschema`` and the ``regex`` module (no leapgen
code in the oracle).

The default run sends one request of each of the 19 kinds below (some with
``n=2`` or a batch); ``--run-slow`` sends each kind three times with other
seeds (57 HTTP requests, 80-odd outputs)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import jsonschema
import pytest
import regex

pytestmark = pytest.mark.model

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
WEATHER = {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome", "Oslo"]},
                                            "temp": {"type": "integer", "minimum": -50, "maximum": 50}},
           "required": ["city", "temp"], "additionalProperties": False}
DIGITS = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 1, "maxItems": 3}
PHONE, DATE = r"[0-9]{3}-[0-9]{4}", r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9])"
YESNO_GBNF, YESNO = 'root ::= "The answer is " ("yes" | "no") "."', r"The answer is (yes|no)\."
MOODS = ["positive", "negative", "neutral"]


def _schema(s):
    return ("schema", s)


def _regex(p):
    return ("regex", p)


def _choice(c):
    return ("choice", c)


def _chat(content, **extra):
    return ("/v1/chat/completions", {"messages": [{"role": "user", "content": content}], "max_tokens": 48, **extra})


def _completion(prompt, **extra):
    return ("/v1/completions", {"prompt": prompt, "max_tokens": 48, **extra})


def _generate(text, **sampling):
    return ("/generate", {"text": text, "sampling_params": {"max_new_tokens": 48, **sampling}})


# (request, constraint) pairs: vLLM-style chat and completions, SGLang-style /generate
KINDS = [
    (_chat("Ada is 36. JSON.", structured_outputs={"json": PERSON}), _schema(PERSON)),
    (_chat("Weather in Rome as JSON.", structured_outputs={"json": WEATHER}, n=2), _schema(WEATHER)),
    (_chat("Call me at", structured_outputs={"regex": PHONE}), _regex(PHONE)),
    (_chat("How do you feel?", structured_outputs={"choice": MOODS}, n=2), _choice(MOODS)),
    (_chat("Is water wet?", structured_outputs={"grammar": YESNO_GBNF}), _regex(YESNO)),
    (_chat("Three digits as a JSON list.", structured_outputs={"json": DIGITS, "disable_any_whitespace": True}),
     _schema(DIGITS)),
    (_chat("Ada is 36. JSON.", guided_json=PERSON), _schema(PERSON)),
    (_chat("A date:", guided_regex=DATE), _regex(DATE)),
    (_chat("Mood?", guided_choice=MOODS), _choice(MOODS)),
    (_chat("Is fire hot?", guided_grammar=YESNO_GBNF), _regex(YESNO)),
    (_chat("Weather in Oslo.",
           response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}}), _schema(WEATHER)),
    (_completion("Person: ", guided_json=json.dumps(PERSON)), _schema(PERSON)),
    (_completion("Phone: ", structured_outputs={"regex": PHONE}, n=2), _regex(PHONE)),
    (_completion(["Mood: ", "Feeling: "], guided_choice=MOODS), _choice(MOODS)),
    (_generate("Ada is 36. As JSON: ", json_schema=json.dumps(PERSON)), _schema(PERSON)),
    (_generate("Weather: ", json_schema=json.dumps(WEATHER), n=2), _schema(WEATHER)),
    (_generate("Call ", regex=PHONE), _regex(PHONE)),
    (("/generate", {"text": ["Is ice cold? ", "Is the sun hot? "],
                    "sampling_params": {"max_new_tokens": 48, "ebnf": YESNO_GBNF}}), _regex(YESNO)),
    (_generate("Digits: ", json_schema=json.dumps(DIGITS)), _schema(DIGITS)),
]


def _with_seed(path: str, body: dict, seed: int) -> dict:
    body = json.loads(json.dumps(body))
    if path == "/generate":
        body["sampling_params"].update(temperature=0.8, sampling_seed=seed)
    else:
        body.update(temperature=0.8, seed=seed)
    return body


def _outputs(path: str, answer) -> list[tuple[str, str]]:
    """(text, finish) of every choice of an answer."""
    if path == "/generate":
        items = answer if isinstance(answer, list) else [answer]
        return [(i["text"], i["meta_info"]["finish_reason"]["type"]) for i in items]
    key = "message" if path == "/v1/chat/completions" else None
    return [(c[key]["content"] if key else c["text"], c["finish_reason"]) for c in answer["choices"]]


def _satisfies(constraint, text: str) -> bool:
    kind, value = constraint
    if kind == "schema":
        try:
            jsonschema.validate(json.loads(text), value)
        except (ValueError, jsonschema.ValidationError):
            return False
        return True
    if kind == "regex":
        return regex.fullmatch(value, text) is not None
    return text in value


def test_mixed_vllm_and_sglang_requests_satisfy_their_constraints(server, run_slow):
    base = server[0]
    jobs = [(path, _with_seed(path, body, seed), constraint)
            for seed in ((1, 2, 3) if run_slow else (1,)) for (path, body), constraint in KINDS]

    def run(job):
        path, body, constraint = job
        r = httpx.post(base + path, json=body, timeout=300)
        assert r.status_code == 200, (path, body, r.text)
        return [(path, text, finish, constraint) for text, finish in _outputs(path, r.json())]

    with ThreadPoolExecutor(16) as pool:
        results = [out for outs in pool.map(run, jobs) for out in outs]
    finished = [(p, t, c) for p, t, f, c in results if f == "stop"]
    wrong = [(p, t, c) for p, t, c in finished if not _satisfies(c, t)]
    assert not wrong, wrong
    # Cut by max_tokens is rare with these small grammars; most outputs must be finished ones.
    assert len(finished) >= 0.9 * len(results), [(p, t) for p, t, f, _ in results if f != "stop"]
    assert len(jobs) == len(KINDS) * (3 if run_slow else 1) and len(results) > len(jobs)
    print(f"{len(jobs)} requests, {len(results)} outputs, {len(finished)} finished: all satisfy their constraint")
