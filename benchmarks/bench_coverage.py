"""JSON Schema coverage of leapgen, xgrammar, llguidance and outlines-core on JSONSchemaBench.

Per subset and backend: compile success %, compile time p50/p99, valid instances accepted %,
invalid instances rejected %, schemas with warnings, MaskBench passes and unsound schemas.

Method (the conformance harness's, ``tests/conformance/harness.py``, applied to every backend):

- the same seeded sample of each subset (schemas that have MaskBench instances);
- the specification's semantics and the compact layout for all: leapgen
  ``compile_json_schema(s, any_whitespace=False, separators=(",", ":"), strict_mode=False)``;
  xgrammar the same arguments; llguidance ``grammar_from_json_schema(s, defaults={
  "whitespace_flexible": False, "item_separator": ",", "key_separator": ":"})`` then
  ``LLMatcher``; outlines-core ``build_regex_from_schema(s, whitespace_pattern="")`` then
  ``Index``. Every backend compiles for a vocabulary of the 256 single bytes (plus an
  end-of-sequence token), so compile time is the grammar's, not a tokenizer's;
- an instance is accepted when one of its compact serializations (keys in instance order, or
  in the schema's property order) is fed byte by byte through the backend's matcher and the
  matcher ends in an accepting state;
- a compile over 10 s is a failure (the worker is killed; a fresh one goes on);
- a **pass** is a schema that compiled without warnings (leapgen's ``CompiledGrammar.warnings``,
  llguidance's ``get_grammar_warnings()``; xgrammar and outlines-core report none) whose valid
  instances were all accepted and invalid ones all rejected; **unsound** counts schemas that
  compiled without warnings and accepted an invalid instance;
- one backend runs at a time, in its own process.

Usage::

    python benchmarks/bench_coverage.py --per-subset 20 --seed 0 --out benchmarks/results/coverage.json \\
        --readme benchmarks/README.md
    python benchmarks/bench_coverage.py --from-results benchmarks/results/coverage.json --readme benchmarks/README.md
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conformance import harness  # noqa: E402

BACKENDS = ("leapgen", "xgrammar", "llguidance", "outlines-core")
COMPILE_LIMIT_S = 10.0
VALIDATE_LIMIT_S = 60.0
BYTE_TOKENS = [bytes([i]) for i in range(256)]
EOS = 256


# ---------------------------------------------------------------------------
# Backends (inside the worker process)


class _Leapgen:
    def __init__(self):
        self.compiler = harness.byte_compiler(limit_s=COMPILE_LIMIT_S)

    def compile(self, schema):
        compiled, err, _ = harness.compile_schema(self.compiler, schema)
        if compiled is None:
            raise RuntimeError(err)
        return compiled, list(compiled.warnings)

    def accepts(self, compiled, schema, data) -> bool:
        return harness.accepts(compiled, schema, data)


class _Xgrammar:
    def __init__(self):
        import xgrammar

        self.xgr = xgrammar
        info = xgrammar.TokenizerInfo(BYTE_TOKENS + [b"</s>"], stop_token_ids=[EOS])
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, schema):
        cg = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"),
                                               strict_mode=False)
        return cg, []

    def accepts(self, compiled, schema, data) -> bool:
        for text in harness.serializations(schema, data):
            m = self.xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
            if m.accept_string(text) and m.is_completed():
                return True
        return False


class _ByteTokenizer:
    eos_token_id = EOS
    bos_token_id = None
    tokens = BYTE_TOKENS + [b"</s>"]
    special_token_ids = [EOS]

    def __call__(self, data):
        return list(data.encode("utf-8") if isinstance(data, str) else data)


class _Llguidance:
    def __init__(self):
        import llguidance

        self.llg = llguidance
        self.tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokenizer()))

    def compile(self, schema):
        grammar = self.llg.LLMatcher.grammar_from_json_schema(
            json.dumps(schema), defaults={"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"})
        m = self.llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(" ".join(m.get_error().split())[:300])
        return m, list(m.get_grammar_warnings())

    def accepts(self, compiled, schema, data) -> bool:
        for text in harness.serializations(schema, data):
            m = compiled.deep_copy()
            ids = list(text.encode("utf-8"))
            if m.try_consume_tokens(ids) == len(ids) and m.is_accepting():
                return True
        return False


class _OutlinesCore:
    def __init__(self):
        import outlines_core

        self.oc = outlines_core
        self.vocab = outlines_core.Vocabulary(EOS, {t: [i] for i, t in enumerate(BYTE_TOKENS)})

    def compile(self, schema):
        regex = self.oc.json_schema.build_regex_from_schema(json.dumps(schema), whitespace_pattern="")
        return self.oc.Index(regex, self.vocab), []

    def accepts(self, compiled, schema, data) -> bool:
        for text in harness.serializations(schema, data):
            guide = self.oc.Guide(compiled)
            try:
                for b in text.encode("utf-8"):
                    guide.advance(b, return_tokens=False)
            except ValueError:
                continue
            if guide.is_finished():
                return True
        return False


FACTORIES = {"leapgen": _Leapgen, "xgrammar": _Xgrammar, "llguidance": _Llguidance, "outlines-core": _OutlinesCore}


def _worker(backend: str, conn) -> None:
    """Say ("ready",) once the backend is built, then serve (schema, instances) jobs: send
    ("compiled", ms, warnings) or ("error", text), then ("results", [accepted, ...])."""
    if backend == "xgrammar":  # its C++ log writes each approximation to stderr (not through the API)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
    try:
        engine = FACTORIES[backend]()
    except Exception as e:  # the backend cannot even start
        conn.send(("fail", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready",))
    while True:
        job = conn.recv()
        if job is None:
            return
        schema, instances = job
        t0 = time.perf_counter()
        try:
            compiled, warnings = engine.compile(schema)
        except Exception as e:  # any failure of a peer's compile counts as a failure
            conn.send(("error", f"{type(e).__name__}: {e}"[:300]))
            continue
        conn.send(("compiled", (time.perf_counter() - t0) * 1e3, warnings[:5]))
        out = []
        for data in instances:
            try:
                out.append(bool(engine.accepts(compiled, schema, data)))
            except Exception:  # a crash while matching: not accepted
                out.append(False)
        conn.send(("results", out))


class _Pool:
    """One worker process for one backend, restarted after a timeout."""

    def __init__(self, backend: str):
        self.backend = backend
        self.ctx = mp.get_context("fork")
        self.proc = None
        self.conn = None

    def _start(self):
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(self.backend, child), daemon=True)
        self.proc.start()
        self.conn = parent

    def _kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
        self.proc = self.conn = None

    def run(self, schema, instances):
        if self.proc is None:
            self._start()
            if not self.conn.poll(120) or self.conn.recv()[0] != "ready":  # imports, JIT
                self._kill()
                return ("error", "the backend's worker did not start"), None
        self.conn.send((schema, instances))
        if not self.conn.poll(COMPILE_LIMIT_S + 2):
            self._kill()
            return ("error", f"timeout: compile over {COMPILE_LIMIT_S:g} s"), None
        first = self.conn.recv()
        if first[0] == "error":
            return first, None
        if first[1] > COMPILE_LIMIT_S * 1e3:
            first = ("error", f"timeout: compile over {COMPILE_LIMIT_S:g} s")
        if not self.conn.poll(VALIDATE_LIMIT_S):
            self._kill()
            return first, [False] * len(instances)
        return first, self.conn.recv()[1]

    def close(self):
        if self.conn is not None:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self._kill()


# ---------------------------------------------------------------------------
# Measuring


def _outcome(ok: bool, warnings: list, tests: list, got: list) -> str:
    """One schema's outcome: ``pass`` or ``wrong`` (with the instances got wrong, by index in
    the MaskBench row: ``valid #i rejected``, ``invalid #j accepted``), then its first warning."""
    text = "pass" if ok else "wrong: " + ", ".join(
        f"{'valid' if t['valid'] else 'invalid'} #{i} {'rejected' if t['valid'] else 'accepted'}"
        for i, (t, g) in enumerate(zip(tests, got)) if g != t["valid"])
    return text + (f" (warned: {warnings[0][:100]})" if warnings else "")


def _installed(name: str) -> bool:
    import importlib.util

    module = {"leapgen": "leapgen", "xgrammar": "xgrammar", "llguidance": "llguidance",
              "outlines-core": "outlines_core"}[name]
    return importlib.util.find_spec(module) is not None


def measure(backends, subsets, per_subset, seed) -> dict:
    rows = {s: harness.bench_sample(s, per_subset, seed) for s in subsets}
    schemas = {s: [json.loads((harness.BENCH_DIR / r["schema_file"]).read_text()) for r in rows[s]] for s in subsets}
    out = {}
    for backend in backends:
        pool = _Pool(backend)
        res = {}
        t_backend = time.perf_counter()
        for subset in subsets:
            r = {"schemas": 0, "compiled": 0, "compile_ms": [], "warned": 0, "valid": 0, "valid_accepted": 0,
                 "invalid": 0, "invalid_rejected": 0, "passed": 0, "passed_warned": 0, "unsound": 0, "errors": [],
                 "outcomes": {}}
            for row, schema in zip(rows[subset], schemas[subset]):
                r["schemas"] += 1
                tests = row["tests"]
                first, got = pool.run(schema, [t["data"] for t in tests])
                if first[0] == "error":
                    r["errors"].append(first[1])
                    r["outcomes"][row["schema_file"]] = "error: " + first[1][:120]
                    continue
                _, ms, warnings = first
                r["compiled"] += 1
                r["compile_ms"].append(round(ms, 3))
                r["warned"] += bool(warnings)
                ok = True
                for t, g in zip(tests, got):
                    if t["valid"]:
                        r["valid"] += 1
                        r["valid_accepted"] += g
                    else:
                        r["invalid"] += 1
                        r["invalid_rejected"] += not g
                    ok &= g == t["valid"]
                r["passed"] += ok and not warnings
                r["passed_warned"] += ok and bool(warnings)
                r.setdefault("warnings", []).extend(warnings[:1])
                r["unsound"] += (not warnings) and any(g and not t["valid"] for t, g in zip(tests, got))
                r["outcomes"][row["schema_file"]] = _outcome(ok, warnings, tests, got)
            res[subset] = r
            print(f"{backend:14s} {subset:16s} compiled {r['compiled']}/{r['schemas']} passed {r['passed']}"
                  f" unsound {r['unsound']}", flush=True)
        pool.close()
        print(f"{backend}: {time.perf_counter() - t_backend:.0f} s", flush=True)
        out[backend] = res
    return out


# ---------------------------------------------------------------------------
# Report


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}" if b else "-"


def _quantile(xs, q: float) -> str:
    if not xs:
        return "-"
    xs = sorted(xs)
    return f"{xs[min(len(xs) - 1, int(q * len(xs)))]:.1f}"


def _reason(err: str) -> str:
    err = re.sub(r"^RuntimeError: ", "", err)
    err = re.sub(r"\(at JSON pointer .*?\)", "", err)
    err = re.sub(r"'[^']*'", "'…'", err)
    err = re.sub(r"\d+", "N", err)
    return err.strip()[:110]


LLG_SUITE = harness.SHARED / "corpora" / "llguidance" / "json_schema_test_suite" / "expected_json_schema_test_suite.json"


def measure_suite() -> dict:
    """Per JSON-Schema-Test-Suite file: tests, leapgen's passes (the harness's) and llguidance's ``pass``
    count from its expected-results file."""
    ours = harness.run_test_suite(harness.byte_compiler(COMPILE_LIMIT_S))
    expected = json.loads(LLG_SUITE.read_text())["draft2020-12"] if LLG_SUITE.exists() else {}
    return {f: {"tests": r["tests"], "leapgen": r["passed"], "unsound": r["unsound"],
                "llguidance": sum(v == "pass" for g in expected.get(f, {}).values() for v in g.values())}
            for f, r in ours.items()}


def render_suite(suite: dict) -> list:
    total = collections.Counter()
    rows = []
    for f, r in suite.items():
        for k in ("tests", "leapgen", "llguidance", "unsound"):
            total[k] += r[k]
        mark = " (fewer)" if r["leapgen"] < r["llguidance"] else ""
        rows.append(f"| {f} | {r['tests']} | {r['leapgen']}{mark} | {r['llguidance']} |")
    return ["", "JSON-Schema-Test-Suite 2020-12 (keyword files and `optional/format`), tests agreeing with the "
            "suite: leapgen (this run, the harness's method) vs llguidance's expected results "
            "(`../shared/corpora/llguidance/json_schema_test_suite`, its `pass` entries). leapgen unsound: "
            f"{total['unsound']}.", "", "| file | tests | leapgen | llguidance |", "|---|---|---|---|", *rows,
            f"| **all** | {total['tests']} | **{total['leapgen']}** | **{total['llguidance']}** |"]


def render(results: dict, meta: dict) -> str:
    suite = results.get("suite")
    results = {k: v for k, v in results.items() if k != "suite"}
    backends = [b for b in BACKENDS if b in results]
    subsets = list(next(iter(results.values())).keys())
    lines = [
        "## Coverage",
        "",
        f"`benchmarks/bench_coverage.py --per-subset {meta['per_subset']} --seed {meta['seed']}` "
        f"({meta['machine']}; {meta['date']}). Method: the conformance harness's, for every backend (see the "
        "script's docstring): spec semantics (`strict_mode=False`), compact layout, byte vocabulary, "
        "10 s compile limit, instances fed byte by byte; **pass** = compiled without warnings and every "
        "MaskBench instance right (the harness's count); **+ warned passes** = every instance right but the "
        "compile warned (looser than the schema somewhere); **unsound** = schemas compiled without warnings "
        "that accepted an invalid instance. Warnings: leapgen's `CompiledGrammar.warnings`, llguidance's "
        "`get_grammar_warnings()`; xgrammar writes its approximations (overlapping `oneOf` as `anyOf`, "
        "`minLength` ignored next to `pattern`, ...) only to its log, and outlines-core has none, so their "
        "schemas all count as compiled without warnings.",
        "",
        "| subset | backend | schemas | compiled % | compile p50 ms | p99 ms | valid accepted % | "
        "invalid rejected % | warned | passes | + warned passes | unsound |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    totals = {b: collections.Counter() for b in backends}
    ms_all = {b: [] for b in backends}
    for subset in subsets + ["**all**"]:
        for b in backends:
            if subset == "**all**":
                r = totals[b]
                ms = ms_all[b]
            else:
                r = results[b][subset]
                ms = r["compile_ms"]
                ms_all[b].extend(ms)
                for k in ("schemas", "compiled", "warned", "valid", "valid_accepted", "invalid", "invalid_rejected",
                          "passed", "passed_warned", "unsound"):
                    totals[b][k] += r.get(k, 0)
            lines.append(f"| {subset} | {b} | {r['schemas']} | {_pct(r['compiled'], r['schemas'])} | "
                         f"{_quantile(ms, 0.5)} | {_quantile(ms, 0.99)} | "
                         f"{_pct(r['valid_accepted'], r['valid'])} | {_pct(r['invalid_rejected'], r['invalid'])} | "
                         f"{r['warned']} | {r['passed']} | {r.get('passed_warned', 0)} | {r['unsound']} |")
    lines += ["", "Passes per subset, leapgen vs the best peer:", "",
              "| subset | " + " | ".join(backends) + " |", "|---|" + "---|" * len(backends)]
    for subset in subsets:
        lines.append(f"| {subset} | " + " | ".join(str(results[b][subset]["passed"]) for b in backends) + " |")
    lines.append("| **all** | " + " | ".join(f"**{totals[b]['passed']}**" for b in backends) + " |")
    if "leapgen" in results:
        for key, title in (("errors", "compile failures"), ("warnings", "warnings (first one per schema)")):
            reasons = collections.Counter()
            for subset in subsets:
                for err in results["leapgen"][subset].get(key, []):
                    reasons[_reason(re.sub(r"^/\S*: ", "", err))] += 1
            if reasons:
                lines += ["", f"leapgen's {title} in this sample, by reason:", "", "| schemas | reason |", "|---|---|"]
                lines += [f"| {n} | {reason} |" for reason, n in reasons.most_common(10)]
    lines += ["", "Reading: a schema leapgen compiles with a warning never counts as a pass, even when every instance "
              "is right (the \"+ warned passes\" column). String lengths above 256 characters are counted in blocks "
              "of 128, each a call of one pushdown rule (`leapgen/grammar/json/lengths.py`): exact, and `maxLength` "
              "65535 compiles in about 0.3 s, but each new block position costs a context-automaton classification "
              "on its first visit (Llama-3, masks while writing a 1,000-character string: 11 ms mean, 22 ms p90 on "
              "the first request, 5 µs once warm; a 250-character bound counted by the DFA: 1.3 ms mean cold). A long "
              "length next to `pattern`/`format` stays in the DFA, where it is not enforced (a warning); the G-Cloud "
              "schemas' word-count patterns (`^(?:\\S+\\s+){0,19}\\S+$`) with `maxLength` 100-500 need more than "
              "100k DFA states even below 256. xgrammar's unsound schemas are its logged approximations (overlapping "
              "`oneOf` as `anyOf`, `minLength` ignored next to `pattern`, `multipleOf` on numbers ignored)."]
    if suite:
        lines += render_suite(suite)
    return "\n".join(lines) + "\n"


def write_readme(path: Path, section: str) -> None:
    """Replace (or append) the ``## Coverage`` section of ``path``, leaving other sections alone."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(r"^## Coverage\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="all", help="comma list of " + ", ".join(BACKENDS) + ", or all")
    ap.add_argument("--subset", default=",".join(harness.SUBSETS), help="comma list of JSONSchemaBench subsets")
    ap.add_argument("--per-subset", type=int, default=20, help="schemas per subset (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="write the raw results (JSON)")
    ap.add_argument("--from-results", type=Path, help="render a saved run instead of measuring")
    ap.add_argument("--readme", type=Path, help="write the table into this README's Coverage section")
    ap.add_argument("--no-suite", action="store_true", help="skip the JSON-Schema-Test-Suite comparison")
    args = ap.parse_args(argv)
    if args.from_results:
        saved = json.loads(args.from_results.read_text())
        results, meta = saved["results"], saved["meta"]
    else:
        names = BACKENDS if args.backend == "all" else tuple(args.backend.split(","))
        backends = [b for b in names if _installed(b)]
        subsets = [s for s in args.subset.split(",") if s]
        per_subset = args.per_subset or None
        t0 = time.perf_counter()
        results = measure(backends, subsets, per_subset, args.seed)
        if "leapgen" in backends and not args.no_suite:
            results["suite"] = measure_suite()
        meta = {"per_subset": args.per_subset, "seed": args.seed, "seconds": round(time.perf_counter() - t0),
                "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
                "date": time.strftime("%Y-%m-%d")}
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    section = render(results, meta)
    print(section)
    if args.readme:
        write_readme(args.readme, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
