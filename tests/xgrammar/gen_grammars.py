"""Random grammars with a matching instance each, for the differential suites.

Seeded (``random.Random``), so every case is reproducible from its seed; no
code is shared with leapgen. Each generator returns ``(source, instance)``:

- :func:`regex_case`: an ECMAScript regex (literals, classes, groups,
  alternation, ``? * + {m} {m,n}``) and a string it matches in full;
- :func:`ebnf_case`: a GBNF grammar of a few rules (recursive ones guarded by
  a literal, so never left-recursive) and a string it derives;
- :func:`schema_case`: a JSON Schema (objects, arrays, strings, numbers,
  booleans, null, enums) and an instance (a Python value).

The generators avoid what the differences table of :mod:`leapgen.xgrammar`
lists (integers, bounded numbers and strings, ``pattern``, formats), which
its own tests show; everything generated must give the same masks.
"""

from __future__ import annotations

import random

ALPHABET = "abcxyz019 _-.:,/" + "\u00e9\u4e2d"
REGEX_SPECIAL = set("\\^$.|?*+()[]{}")


def _regex_char(c: str) -> str:
    return "\\" + c if c in REGEX_SPECIAL else c


def _regex(rng: random.Random, depth: int) -> tuple[str, object]:
    """(pattern, sampler) of a random regex term."""
    kind = rng.random()
    if depth > 2 or kind < 0.35:
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3)))
        return "".join(_regex_char(c) for c in text), lambda r: text
    if kind < 0.55:
        chars = sorted(set(rng.sample(ALPHABET, rng.randint(2, 5))))
        body = "".join("\\" + c if c in "\\]^-" else c for c in chars)
        return f"[{body}]", lambda r: r.choice(chars)
    if kind < 0.7:
        parts = [_regex(rng, depth + 1) for _ in range(rng.randint(2, 3))]
        return "(" + "|".join(p for p, _ in parts) + ")", lambda r: r.choice(parts)[1](r)
    if kind < 0.85:
        parts = [_regex(rng, depth + 1) for _ in range(rng.randint(2, 3))]
        return "".join(p for p, _ in parts), lambda r: "".join(s(r) for _, s in parts)
    item, sample = _regex(rng, depth + 1)
    lo, hi = rng.choice([(0, 1), (0, None), (1, None), (2, 2), (1, 3)])
    op = {(0, 1): "?", (0, None): "*", (1, None): "+"}.get((lo, hi), f"{{{lo},{hi}}}" if hi != lo else f"{{{lo}}}")
    return f"(?:{item}){op}", lambda r: "".join(sample(r) for _ in range(r.randint(lo, lo + 2 if hi is None else hi)))


def regex_case(seed: int) -> tuple[str, str]:
    """A random regex and a string it matches in full."""
    rng = random.Random(seed)
    pattern, sample = _regex(rng, 0)
    return pattern, sample(random.Random(seed + 1))


def _ebnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ebnf_case(seed: int) -> tuple[str, str]:
    """A random GBNF grammar and a string it derives."""
    rng = random.Random(seed)
    n = rng.randint(2, 4)
    rules: list[list[list[tuple]]] = []  # rule -> alternatives -> elements
    for i in range(n):
        alts = [[("lit", "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3))))]]  # a terminal way out
        for _ in range(rng.randint(1, 2)):
            seq = [("lit", rng.choice("abc<[{(\"'"))]  # a literal first: no left recursion
            for _ in range(rng.randint(1, 3)):
                r = rng.random()
                if r < 0.4:
                    seq.append(("ref", rng.randrange(n)))
                elif r < 0.7:
                    seq.append(("class", sorted(set(rng.sample(ALPHABET, rng.randint(2, 4))))))
                else:
                    seq.append(("lit", "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 2)))))
            if rng.random() < 0.3:
                seq.append(("star", rng.choice("xyz")))
            alts.append(seq)
        rules.append(alts)

    def name(i: int) -> str:
        return "root" if i == 0 else f"r{i}"

    def render(e) -> str:
        if e[0] == "lit":
            return _ebnf_literal(e[1])
        if e[0] == "class":
            return "[" + "".join("\\" + c if c in "\\]^-" else c for c in e[1]) + "]"
        if e[0] == "star":
            return f'"{e[1]}"*'
        return name(e[1])

    text = "\n".join(f"{name(i)} ::= " + " | ".join(" ".join(map(render, seq)) for seq in alts)
                     for i, alts in enumerate(rules))
    sampler = random.Random(seed + 1)

    def derive(rule: int, depth: int) -> str:
        alts = rules[rule]
        seq = alts[0] if depth > 3 else sampler.choice(alts[1:] if depth < 2 else alts)
        out = []
        for e in seq:
            if e[0] == "lit":
                out.append(e[1])
            elif e[0] == "class":
                out.append(sampler.choice(e[1]))
            elif e[0] == "star":
                out.append(e[1] * sampler.randint(0, 2))
            else:
                out.append(derive(e[1], depth + 1))
        return "".join(out)

    return text, derive(0, 0)


def _schema(rng: random.Random, depth: int) -> tuple[dict, object]:
    """(schema, sampler) of a random schema."""
    kinds = ["string", "number", "boolean", "null", "enum"] + (["object", "array"] * 2 if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "string":
        return {"type": "string"}, lambda r: "".join(r.choice(ALPHABET + '"\\\n') for _ in range(r.randint(0, 6)))
    if kind == "number":
        return {"type": "number"}, lambda r: r.choice([0, 7, 12.5, 3e5, 1.25e-3, 42])
    if kind == "boolean":
        return {"type": "boolean"}, lambda r: r.choice([True, False])
    if kind == "null":
        return {"type": "null"}, lambda r: None
    if kind == "enum":
        values = rng.sample(["red", "green", "blue", "x y", "\u00e9t\u00e9", 3, True, None], rng.randint(1, 4))
        return {"enum": values}, lambda r: r.choice(values)
    if kind == "array":
        item, sample = _schema(rng, depth + 1)
        return {"type": "array", "items": item}, lambda r: [sample(r) for _ in range(r.randint(0, 3))]
    names = rng.sample(["id", "name", "tags", "a", "b_c", "value", "\u00e9"], rng.randint(1, 4))
    props = {k: _schema(rng, depth + 1) for k in names}
    required = [k for k in names if rng.random() < 0.6]

    def sample_object(r):
        return {k: s(r) for k, (_, s) in props.items() if k in required or r.random() < 0.5}

    return ({"type": "object", "properties": {k: s for k, (s, _) in props.items()}, "required": required},
            sample_object)


def schema_case(seed: int) -> tuple[dict, object]:
    """A random JSON Schema and an instance of it."""
    rng = random.Random(seed)
    schema, sample = _schema(rng, 0)
    return schema, sample(random.Random(seed + 1))
