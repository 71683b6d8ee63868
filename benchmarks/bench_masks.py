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


def run_backend(job: runner.Job) -> dict:
    """Run one backend's workers until every grammar is done; returns its results."""
    ctx = mp.get_context("fork")
    out: dict = {"grammars": {}}
    start, n = 0, len(job.grammars)
    while True:
        receiver, sender = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=runner.worker_main, args=(job, start, sender), daemon=True)
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
                deadline, deadline_kind = time.monotonic() + AFTER_LIMIT_S, "other"
            elif kind == "begin":
                current = msg[1]
                deadline, deadline_kind = time.monotonic() + runner.COMPILE_LIMIT_S + 2, "compile"
            elif kind == "compiled":
                deadline, deadline_kind = time.monotonic() + WALK_LIMIT_S, "walk"
            elif kind == "grammar":
                out["grammars"][msg[1]] = msg[2]
                current = None
                deadline, deadline_kind = time.monotonic() + AFTER_LIMIT_S, "other"
                print(f"  [{job.backend}] {msg[1] + 1}/{n} {job.grammars[msg[1]].name}: "
                      f"{msg[2].get('error', '%.1f ms' % msg[2].get('ttfm_ms', 0))[:100]}", file=sys.stderr)
            elif kind in ("batch", "batch_new", "done"):
                out[kind] = msg[1]
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
        job.failed = {g for g, r in out["grammars"].items() if "error" in r}
        print(f"  [{job.backend}] {current + 1}/{n} {job.grammars[current].name}: {failed}", file=sys.stderr)
        start = current + 1
        if start >= n:
            return out



def write_report(args, results: dict, grammars: list, title: str) -> None:
    """Print the tables; write them, the raw results and the plot where asked."""
    text = report.render(results, grammars, title) + "\n### Most common compile errors\n\n" + \
        report.failures(results, grammars) + "\n"
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text, "utf-8")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"title": title, "grammars": [(g.name, g.group) for g in grammars],
                                              "results": results}), "utf-8")
    if args.plot:
        try:
            report.plot(results, grammars, args.plot)
        except ImportError:
            print("no plot: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)


def load_saved(path: str) -> tuple[dict, list, str]:
    """A run written by ``--out``: (results, grammars, title)."""
    saved = json.loads(Path(path).read_text("utf-8"))
    grammars = [workloads.Grammar(name, group, "", "", ()) for name, group in saved["grammars"]]
    results = {b: {**res, "grammars": {int(g): r for g, r in res["grammars"].items()}}
               for b, res in saved["results"].items()}
    return results, grammars, saved["title"]


def render_saved(args) -> int:
    """Re-render a saved run (``--from-results``)."""
    results, grammars, title = load_saved(args.from_results)
    args.out = None
    write_report(args, results, grammars, title)
    return 0


def render_median(paths: list[str]) -> int:
    """Print the median over saved runs of the headline figures (``--median-of``)."""
    print(report.median_table([report.headline(*load_saved(p)[:2]) for p in paths]))
    return 0


def main(argv=None) -> int:
    from leapgen.backends import available_backends, known_backends

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="all", help=f"one of {known_backends()} or 'all' (installed ones); "
                                                    "comma-separated for several")
    p.add_argument("--tokenizer", default="llama3", help="tokenizer family of tests/vocab_loaders.py")
    p.add_argument("--schemas", type=int, default=50, help="JSONSchemaBench schemas to sample (0: none)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--subset", default=None, help="comma-separated JSONSchemaBench subsets (default: all)")
    p.add_argument("--max-instances", type=int, default=3, help="valid instances per JSONSchemaBench schema")
    p.add_argument("--groups", default="regex,schema,jsb,cfg", help="workload groups to run (also: choice, "
                                                                     "10,000 choices)")
    p.add_argument("--no-strict", action="store_true", help="JSON Schemas with strict_mode=False (the spec's "
                                                            "additionalProperties default)")
    p.add_argument("--out", default=None, help="write the raw results as JSON here (benchmarks/results/ is "
                                               "git-ignored)")
    p.add_argument("--plot", default=None, help="write the TBM/TTFM distribution plot (PNG) here")
    p.add_argument("--markdown", default=None, help="also write the tables to this file")
    p.add_argument("--from-results", default=None, help="measure nothing: render the tables (and --plot) "
                                                          "from a JSON file written by --out")
    p.add_argument("--median-of", default=None, help="measure nothing: print the median of the headline figures "
                                                       "over comma-separated JSON files written by --out")
    args = p.parse_args(argv)
    if args.median_of:
        return render_median(args.median_of.split(","))
    if args.from_results:
        return render_saved(args)

    names = available_backends() if args.backend == "all" else args.backend.split(",")
    missing = [b for b in names if b not in available_backends()]
    if missing:
        p.error(f"not installed or unknown: {missing}; installed: {available_backends()}")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # workers are forked after the tokenizer ran
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    hf_tokenizer = load_hf_tokenizer(args.tokenizer)
    info = load_tokenizer_info(args.tokenizer)
    groups = set(args.groups.split(","))
    grammars = [g for g in workloads.fixed_grammars() if g.group in groups]
    if "jsb" in groups:
        grammars += workloads.jsonschemabench_grammars(args.schemas, seed=args.seed, max_instances=args.max_instances,
                                                       subsets=args.subset.split(",") if args.subset else None)
    if "cfg" in groups:
        grammars += workloads.cfg_grammars()
    if "choice" in groups:
        grammars += workloads.choice_grammars()

    def encode(text: str) -> list[int]:
        return hf_tokenizer.encode(text, add_special_tokens=False)

    tokens = [[encode(text) for text in g.instances] for g in grammars]
    warmup = [(g, [encode(t) for t in g.instances]) for g in WARMUP]
    n_tokens = sum(len(ids) for per in tokens for ids in per)
    print(f"{len(grammars)} grammars, {sum(len(t) for t in tokens)} instances, {n_tokens} tokens; "
          f"backends {names}", file=sys.stderr)
    results = {}
    for name in names:
        t = time.perf_counter()
        job = runner.Job(name, grammars, tokens, warmup, info, hf_tokenizer, strict=not args.no_strict)
        results[name] = run_backend(job)
        print(f"[{name}] done in {time.perf_counter() - t:.0f} s", file=sys.stderr)

    title = (f"Mask benchmark: {args.tokenizer} tokenizer, {len(grammars)} grammars "
             f"({args.schemas} JSONSchemaBench, seed {args.seed}), {n_tokens} tokens")
    write_report(args, results, grammars, title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
