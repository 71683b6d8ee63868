"""TTFM and TBM of leapgen, xgrammar, llguidance and outlines-core, side by side.

Usage (from the repository root)::

    python benchmarks/bench_masks.py --backend all --schemas 100 --out results.json --plot benchmarks/tbm.png

Method (MaskBench's): every grammar's valid instances are tokenized with the
Llama-3 tokenizer; per token the backend fills the bitmask, the token is
checked against it, and the backend accepts it. TTFM = compile + first mask
(ms); TBM = fill + accept per token (µs). JSON is compact
(``any_whitespace=False``) for every backend. Each backend runs in its own
forked worker, one backend after another (no two compete for the cores); a
compile over 10 s counts as a failure, and a worker stuck past the limit is
killed and restarted at the next grammar. TBM is split into first visits of
an automaton state and visits of states seen before, with leapgen's matcher
state as the reference (the same token prefix reaches the same grammar state
in every engine).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests"), str(HERE)]

import report  # noqa: E402
import report_corpus  # noqa: E402
import runner  # noqa: E402
import workloads  # noqa: E402

WARMUP = [  # outside the workload, so they warm code paths, not the measured grammars' caches
    workloads.Grammar("warmup/regex", "warmup", "regex", r"[a-z]{1,8}( [a-z]{1,8}){0,4}", ("hello big world",)),
    workloads.Grammar("warmup/schema", "warmup", "json_schema",
                      json.dumps({"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"],
                                  "additionalProperties": False}), ('{"k":"value"}',)),
    workloads.Grammar("warmup/choice", "warmup", "choice", json.dumps(["red", "green", "blue"]), ("green",)),
]
WALK_LIMIT_S = 180.0
AFTER_LIMIT_S = 900.0


def run_backend(job: runner.Job, record=None) -> dict:
    """Run one backend's workers until every grammar is done; returns its results.

    ``record(kind, g, data)``, when given, is called with each message as it
    arrives (``kind`` ``"grammar"`` with the grammar's index, or ``"init"``,
    ``"batch"``, ``"batch_new"``, ``"done"`` with ``g`` None): the progress log.
    Grammars already in ``job.done`` are not run (their results are the caller's).
    """
    ctx = mp.get_context("fork")
    out: dict = {"grammars": {}}
    n = len(job.grammars)
    record = record or (lambda kind, g, data: None)
    while True:
        receiver, sender = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=runner.worker_main, args=(job, sender), daemon=True)
        proc.start()
        sender.close()
        current, finished = None, False
        deadline, deadline_kind = time.monotonic() + AFTER_LIMIT_S, "other"
        while True:
            if not receiver.poll(max(0.0, deadline - time.monotonic())):
                proc.kill()
                failed = "timeout: killed (compile over 10 s)" if deadline_kind == "compile" else "timeout: killed"
                break
            try:
                msg = receiver.recv()
            except EOFError:
                failed = f"crash: worker died (exit code {proc.exitcode})"
                break
            kind = msg[0]
            if kind == "init":
                out["init"] = msg[1]
                record("init", None, msg[1])
                deadline, deadline_kind = time.monotonic() + AFTER_LIMIT_S, "other"
            elif kind == "begin":
                current = msg[1]
                deadline, deadline_kind = time.monotonic() + runner.COMPILE_LIMIT_S + 2, "compile"
            elif kind == "compiled":
                deadline, deadline_kind = time.monotonic() + WALK_LIMIT_S, "walk"
            elif kind == "grammar":
                out["grammars"][msg[1]] = msg[2]
                record("grammar", msg[1], msg[2])
                current = None
                deadline, deadline_kind = time.monotonic() + AFTER_LIMIT_S, "other"
                print(f"  [{job.backend}] {msg[1] + 1}/{n} {job.grammars[msg[1]].name}: "
                      f"{msg[2].get('error', '%.1f ms' % msg[2].get('ttfm_ms', 0))[:100]}", file=sys.stderr)
            elif kind in ("batch", "batch_new", "done"):
                out[kind] = msg[1]
                record(kind, None, msg[1])
                finished = kind == "done"
                if finished:
                    break
        proc.join(5)
        if finished:
            return out
        if current is None:  # died outside a grammar: give up on the rest
            out["fatal"] = failed
            return out
        out["grammars"][current] = {"error": failed}
        record("grammar", current, out["grammars"][current])
        job.done |= set(out["grammars"])
        job.failed |= {g for g, r in out["grammars"].items() if "error" in r}
        print(f"  [{job.backend}] {current + 1}/{n} {job.grammars[current].name}: {failed}", file=sys.stderr)
        if len(job.done) >= n:
            return out


class Progress:
    """The progress log of a run (``<out>.progress.jsonl``): one JSON line per
    message of every backend's workers, after a first line naming the
    workload. ``--resume`` reads it back and runs only what is missing."""

    def __init__(self, path: Path, workload: dict, resume: bool):
        self.path = path
        self.results: dict = {}
        if resume and path.is_file():
            lines = path.read_text("utf-8").splitlines()
            head = json.loads(lines[0]) if lines else {}
            if head.get("workload") != workload:
                raise SystemExit(f"--resume: {path} was written for another workload ({head.get('workload')}); "
                                 "remove it or change the options")
            for line in lines[1:]:
                try:
                    rec = json.loads(line)
                except ValueError:  # a line cut by a kill
                    continue
                res = self.results.setdefault(rec["backend"], {"grammars": {}})
                if rec["kind"] == "grammar":
                    res["grammars"][rec["g"]] = rec["data"]
                else:
                    res[rec["kind"]] = rec["data"]
            print(f"resuming from {path}: " + ", ".join(f"{b} {len(r['grammars'])} grammars"
                                                        + (" (done)" if "done" in r else "")
                                                        for b, r in self.results.items()), file=sys.stderr)
            self._file = path.open("a", encoding="utf-8")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("w", encoding="utf-8")
            self._write({"workload": workload})

    def _write(self, obj) -> None:
        self._file.write(json.dumps(obj) + "\n")
        self._file.flush()

    def recorder(self, backend: str):
        """The ``record`` callback of :func:`run_backend` for ``backend``."""
        return lambda kind, g, data: self._write({"backend": backend, "kind": kind, "g": g, "data": data})


def write_report(args, results: dict, grammars: list, title: str) -> None:
    """Print the tables; write them, the raw results and the plot where asked."""
    text = report.render(results, grammars, title) + "\n" + report_corpus.render(results, grammars) + \
        "\n### Most common compile errors\n\n" + report.failures(results, grammars) + "\n"
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text, "utf-8")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"title": title, "grammars": [(g.name, g.group, g.half) for g in grammars],
                                              "results": results}), "utf-8")
    if args.plot:
        try:
            report.plot(results, grammars, args.plot)
        except ImportError:
            print("no plot: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)


def load_saved(path: str) -> tuple[dict, list, str]:
    """A run written by ``--out``: (results, grammars, title)."""
    saved = json.loads(Path(path).read_text("utf-8"))
    grammars = [workloads.Grammar(e[0], e[1], "", "", (), e[2] if len(e) > 2 else "") for e in saved["grammars"]]
    results = {b: {**res, "grammars": {int(g): r for g, r in res["grammars"].items()}}
               for b, res in saved["results"].items()}
    return results, grammars, saved["title"]


def render_saved(args) -> int:
    """Re-render a saved run (``--from-results``)."""
    results, grammars, title = load_saved(args.from_results)
    args.out = None
    write_report(args, results, grammars, title)
    return 0


def render_median(paths: list[str], half: str | None) -> int:
    """Print the median over saved runs of the headline figures (``--median-of``), for the JSONSchemaBench
    schemas of ``half`` (all grammars when None), and the same per subset."""
    runs = [load_saved(p)[:2] for p in paths]
    print(report.median_table([report.headline(*report_corpus.select(r, g, half)) for r, g in runs]))
    print()
    print(report_corpus.median_subsets(runs, half))
    return 0


def workload_grammars(args) -> list:
    """The grammars the options ask for, in a fixed order."""
    groups = set(args.groups.split(","))
    grammars = [g for g in workloads.fixed_grammars() if g.group in groups]
    if "jsb" in groups:
        n = None if args.schemas == "all" else int(args.schemas)
        grammars += workloads.jsonschemabench_grammars(n, seed=args.seed, max_instances=args.max_instances,
                                                       subsets=args.subset.split(",") if args.subset else None,
                                                       half=None if args.half == "both" else args.half)
    if "cfg" in groups:
        grammars += workloads.cfg_grammars()
    if "gbnf" in groups:
        grammars += workloads.gbnf_grammars()
    if "choice" in groups:
        grammars += workloads.choice_grammars()
    return grammars


def main(argv=None) -> int:
    from leapgen.backends import available_backends, known_backends

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="all", help=f"one of {known_backends()} or 'all' (installed ones); "
                                                    "comma-separated for several")
    p.add_argument("--tokenizer", default="llama3", help="tokenizer family of tests/vocab_loaders.py")
    p.add_argument("--schemas", default="50", help="JSONSchemaBench schemas to sample (0: none), or 'all': every "
                                                   "schema of the corpus (9,557), those without a valid instance "
                                                   "compiled only")
    p.add_argument("--half", default="both", choices=("both",) + workloads.HALVES,
                   help="JSONSchemaBench schemas of one half of the fixed split only (workloads.split_half: by "
                        "the SHA-256 of the schema text; speed work is tuned on 'tune', 'holdout' is never "
                        "looked at)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--subset", default=None, help="comma-separated JSONSchemaBench subsets (default: all)")
    p.add_argument("--max-instances", type=int, default=3, help="valid instances per JSONSchemaBench schema")
    p.add_argument("--groups", default="regex,schema,jsb,cfg,gbnf", help="workload groups to run (also: choice, "
                                                                          "10,000 choices)")
    p.add_argument("--no-strict", action="store_true", help="JSON Schemas with strict_mode=False (the spec's "
                                                            "additionalProperties default)")
    p.add_argument("--any-order", action="store_true", help="JSON Schemas with any_order=True (properties in "
                                                            "any order, each once; instances fed in their own key "
                                                            "order; backends without the option refuse them)")
    p.add_argument("--no-freeze", action="store_true", help="leave the worker's start-up objects to the garbage "
                                                            "collector (by default frozen after the warm-up, as "
                                                            "leapgen serve freezes its start-up)")
    p.add_argument("--out", default=None, help="write the raw results as JSON here (benchmarks/results/ is "
                                               "git-ignored), and every result as it comes to OUT.progress.jsonl")
    p.add_argument("--resume", action="store_true", help="with --out: read OUT.progress.jsonl (same options) and "
                                                         "run only the grammars and backends it lacks")
    p.add_argument("--plot", default=None, help="write the TBM/TTFM distribution plot (PNG) here")
    p.add_argument("--markdown", default=None, help="also write the tables to this file")
    p.add_argument("--from-results", default=None, help="measure nothing: render the tables (and --plot) "
                                                          "from a JSON file written by --out")
    p.add_argument("--median-of", default=None, help="measure nothing: print the median of the headline figures "
                                                       "over comma-separated JSON files written by --out (the "
                                                       "JSONSchemaBench schemas of --half only, unless 'both')")
    args = p.parse_args(argv)
    if args.median_of:
        return render_median(args.median_of.split(","), None if args.half == "both" else args.half)
    if args.from_results:
        return render_saved(args)
    if args.resume and not args.out:
        p.error("--resume needs --out")

    names = available_backends() if args.backend == "all" else args.backend.split(",")
    missing = [b for b in names if b not in available_backends()]
    if missing:
        p.error(f"not installed or unknown: {missing}; installed: {available_backends()}")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # workers are forked after the tokenizer ran
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    hf_tokenizer = load_hf_tokenizer(args.tokenizer)
    info = load_tokenizer_info(args.tokenizer)
    grammars = workload_grammars(args)

    def encode(text: str) -> list[int]:
        return hf_tokenizer.encode(text, add_special_tokens=False)

    tokens = [[encode(text) for text in g.instances] for g in grammars]
    warmup = [(g, [encode(t) for t in g.instances]) for g in WARMUP]
    n_tokens = sum(len(ids) for per in tokens for ids in per)
    print(f"{len(grammars)} grammars, {sum(len(t) for t in tokens)} instances, {n_tokens} tokens; "
          f"backends {names}", file=sys.stderr)
    progress = None
    if args.out:
        workload = {"grammars": [g.name for g in grammars], "tokens": n_tokens, "tokenizer": args.tokenizer,
                    "strict": not args.no_strict, "freeze": not args.no_freeze, "backends": names,
                    **({"any_order": True} if args.any_order else {})}
        progress = Progress(Path(args.out + ".progress.jsonl"), workload, args.resume)
    results = {}
    for name in names:
        t = time.perf_counter()
        before = progress.results.get(name, {"grammars": {}}) if progress else {"grammars": {}}
        if "done" in before:
            results[name] = before
            continue
        job = runner.Job(name, grammars, tokens, warmup, info, hf_tokenizer, strict=not args.no_strict,
                         any_order=args.any_order, freeze=not args.no_freeze, done=set(before["grammars"]),
                         failed={g for g, r in before["grammars"].items() if "error" in r})
        got = run_backend(job, progress.recorder(name) if progress else None)
        results[name] = {**before, **got, "grammars": {**before["grammars"], **got["grammars"]}}
        print(f"[{name}] done in {time.perf_counter() - t:.0f} s", file=sys.stderr)

    title = (f"Mask benchmark: {args.tokenizer} tokenizer, {len(grammars)} grammars "
             f"({args.schemas} JSONSchemaBench, {args.half}, seed {args.seed}), {n_tokens} tokens")
    write_report(args, results, grammars, title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
