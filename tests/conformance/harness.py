"""JSON Schema conformance: the JSON-Schema-Test-Suite and JSONSchemaBench.

Method: a schema is compiled with ``strict_mode=False`` (the specification's
semantics) in the compact layout; an instance counts as accepted when one of
its serializations in that layout (``json.dumps`` with ``(",", ":")``
separators, keys in instance order or in the schema's property order) is a
complete match. A schema that admits no value at all (``false``, ``not: {}``)
counts as compiled, to the empty language, and rejects every instance (leapgen
refuses to compile it with a SchemaError saying so). A compile that exceeds
the limit (:data:`COMPILE_LIMIT_S`, :data:`RATCHET_LIMIT_S` for the ratchet)
fails. A MaskBench *pass* is a schema that compiled
without warnings and got every valid instance accepted and every invalid one
rejected. *Unsound* counts invalid instances accepted by a schema that
compiled without warnings: it must stay 0.

Suite files: every keyword file of draft 2020-12 plus ``optional/format/*``
(keyed by their path without ``.json``).

Run ``python -m tests.conformance.harness --update`` to regenerate the ratchet
baseline (``baseline.json`` beside this file) after an improvement.

``any_order`` mode (``--any-order``; issue 15): schemas compiled with
``any_order=True`` and every instance fed in its own key order only (no
reordering): the share of valid instances accepted and the unsound count.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import leapgen
from leapgen.errors import LeapgenError
from tests.conformance.key_order import schema_order

SHARED = Path(__file__).resolve().parents[3] / "shared"
SUITE_DIR = SHARED / "corpora" / "json-schema-test-suite" / "tests" / "draft2020-12"
BENCH_DIR = SHARED / "corpora" / "jsonschemabench"
BASELINE = Path(__file__).with_name("baseline.json")
SUBSETS = ("Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Github_ultra", "Glaiveai2K",
           "JsonSchemaStore", "Kubernetes", "Snowplow", "WashingtonPost")
CI_SAMPLE_PER_SUBSET = 25
COMPILE_LIMIT_S = 10.0
RATCHET_LIMIT_S = 30.0
"""Compile limit of the ratchet (``--update`` and ``test_conformance.py``): generous, so that a
slower machine does not turn a slow compile into a regression."""
SEPARATORS = (",", ":")
UNSATISFIABLE = "the schema admits no JSON value"


class _EmptyLanguage:
    """Stands for a schema compiled to the empty language (rejects everything)."""

    warnings = ()


EMPTY = _EmptyLanguage()


def byte_compiler(limit_s: float | None = COMPILE_LIMIT_S) -> leapgen.GrammarCompiler:
    """A compiler over a vocabulary of the 256 single bytes (exact and fast for acceptance)."""
    info = leapgen.TokenizerInfo([bytes([i]) for i in range(256)] + [b""], "raw", stop_token_ids=[256])
    return leapgen.GrammarCompiler(info, cache_entries=0, max_compile_seconds=limit_s)


def suite_files() -> list[Path]:
    """The 2020-12 keyword files and ``optional/format`` files, sorted."""
    return sorted(SUITE_DIR.glob("*.json")) + sorted((SUITE_DIR / "optional" / "format").glob("*.json"))


def suite_key(path: Path) -> str:
    return path.relative_to(SUITE_DIR).with_suffix("").as_posix()


def accepts(compiled, schema, data, any_order: bool = False) -> bool:
    """Whether some compact serialization of ``data`` is a complete match (``any_order``: the one in the
    instance's own key order)."""
    if compiled is EMPTY:
        return False
    texts = [json.dumps(data, separators=SEPARATORS, ensure_ascii=False)] if any_order else serializations(schema, data)
    for text in texts:
        m = leapgen.GrammarMatcher(compiled)
        if m.accept_string(text) and m.is_completed():
            return True
    return False


def serializations(schema, data) -> list[str]:
    """The compact JSON texts of ``data`` tried: keys in instance order, and in
    the schema's property order (:func:`.key_order.schema_order`)."""
    texts = [json.dumps(data, separators=SEPARATORS, ensure_ascii=False)]
    try:
        other = json.dumps(schema_order(schema, data), separators=SEPARATORS, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        other = texts[0]
    if other != texts[0]:
        texts.append(other)
    return texts


def compile_schema(compiler, schema, any_order: bool = False):
    """(compiled, :data:`EMPTY` or None; error text or None; compile seconds)."""
    t0 = time.perf_counter()
    try:
        compiled = compiler.compile_json_schema(schema, any_whitespace=False, separators=SEPARATORS, strict_mode=False,
                                                any_order=any_order)
        return compiled, None, time.perf_counter() - t0
    except (LeapgenError, RecursionError) as e:
        if UNSATISFIABLE in str(e):
            return EMPTY, None, time.perf_counter() - t0
        return None, f"{type(e).__name__}: {e}"[:300], time.perf_counter() - t0


def run_test_suite(compiler=None, any_order: bool = False) -> dict:
    """Per keyword file of the 2020-12 suite: tests, passed, unsound, groups not compiled."""
    compiler = compiler or byte_compiler()
    results = {}
    for path in suite_files():
        r = {"tests": 0, "passed": 0, "unsound": 0, "groups_not_compiled": 0}
        for group in json.loads(path.read_text()):
            compiled, err, _ = compile_schema(compiler, group["schema"], any_order)
            r["tests"] += len(group["tests"])
            if compiled is None:
                r["groups_not_compiled"] += 1
                continue
            for t in group["tests"]:
                got = accepts(compiled, group["schema"], t["data"], any_order)
                r["passed"] += got == t["valid"]
                r["unsound"] += got and not t["valid"] and not compiled.warnings
        results[suite_key(path)] = r
    return results


def bench_sample(subset: str, per_subset: int | None, seed: int = 0) -> list[dict]:
    """The schemas of a JSONSchemaBench subset that have instances (a seeded sample, or all)."""
    rows = [json.loads(line) for line in (BENCH_DIR / "tests" / f"{subset}.jsonl").read_text(encoding="utf-8").split("\n")
            if line.strip()]  # not splitlines(): data holds U+2028
    rows = [r for r in rows if r["tests"]]
    if per_subset is not None and per_subset < len(rows):
        rows = random.Random(f"{seed}-{subset}").sample(rows, per_subset)
    return rows


def run_jsonschemabench(per_subset: int | None = CI_SAMPLE_PER_SUBSET, seed: int = 0, compiler=None,
                        any_order: bool = False) -> dict:
    """Per subset: schemas, compiled, compiled without warnings, MaskBench passes, instance counts."""
    compiler = compiler or byte_compiler()
    results = {}
    for subset in SUBSETS:
        r = {"schemas": 0, "compiled": 0, "no_warnings": 0, "passed": 0, "valid": 0, "valid_accepted": 0,
             "invalid": 0, "invalid_rejected": 0, "unsound": 0, "compile_ms": [], "errors": []}
        for row in bench_sample(subset, per_subset, seed):
            schema = json.loads((BENCH_DIR / row["schema_file"]).read_text())
            r["schemas"] += 1
            compiled, err, secs = compile_schema(compiler, schema, any_order)
            if compiled is None:
                r["errors"].append(err)
                continue
            r["compiled"] += 1
            r["compile_ms"].append(round(secs * 1e3, 2))
            clean = not compiled.warnings
            r["no_warnings"] += clean
            ok = True
            for t in row["tests"]:
                got = accepts(compiled, schema, t["data"], any_order)
                if t["valid"]:
                    r["valid"] += 1
                    r["valid_accepted"] += got
                else:
                    r["invalid"] += 1
                    r["invalid_rejected"] += not got
                    r["unsound"] += got and clean
                ok &= got == t["valid"]
            r["passed"] += ok and clean
        results[subset] = r
    return results


def ratchet_view(suite: dict, bench: dict) -> dict:
    """The numbers the baseline pins (no timings)."""
    return {
        "json_schema_test_suite": {k: {"passed": v["passed"], "unsound": v["unsound"]} for k, v in suite.items()},
        "jsonschemabench_sample": {k: {"passed": v["passed"], "compiled": v["compiled"], "unsound": v["unsound"]}
                                   for k, v in bench.items()},
    }


def any_order_view(suite: dict, bench: dict) -> dict:
    """The ``any_order`` figures: valid instances accepted (share), unsound, per corpus."""
    def totals(rows, valid_key, accepted_key):
        valid = sum(r[valid_key] for r in rows)
        return valid, sum(r[accepted_key] for r in rows)
    out = {}
    if bench:
        valid, accepted = totals(bench.values(), "valid", "valid_accepted")
        out["jsonschemabench"] = {"schemas": sum(r["schemas"] for r in bench.values()),
                                  "compiled": sum(r["compiled"] for r in bench.values()),
                                  "valid": valid, "valid_accepted": accepted,
                                  "valid_accepted_pct": round(100 * accepted / max(valid, 1), 2),
                                  "unsound": sum(r["unsound"] for r in bench.values())}
    if suite:
        out["json_schema_test_suite"] = {"tests": sum(r["tests"] for r in suite.values()),
                                         "passed": sum(r["passed"] for r in suite.values()),
                                         "unsound": sum(r["unsound"] for r in suite.values())}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="write the ratchet baseline")
    ap.add_argument("--any-order", action="store_true", help="any_order mode: print its figures (no baseline)")
    ap.add_argument("--per-subset", type=int, default=CI_SAMPLE_PER_SUBSET, help="--any-order: schemas per subset "
                    "(0: all)")
    args = ap.parse_args(argv)
    compiler = byte_compiler(RATCHET_LIMIT_S)
    if args.any_order:
        bench = run_jsonschemabench(args.per_subset or None, compiler=compiler, any_order=True)
        print(json.dumps(any_order_view(run_test_suite(compiler, any_order=True), bench), indent=1))
        return 0
    view = ratchet_view(run_test_suite(compiler), run_jsonschemabench(compiler=compiler))
    text = json.dumps(view, indent=1, sort_keys=True)
    if args.update:
        BASELINE.write_text(text + "\n")
        print(f"wrote {BASELINE}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
