"""Garbage-collector pauses of leapgen's mask steps, in a process set up as the server's.

Usage (from the repository root)::

    python benchmarks/bench_gc.py --schemas 600 --half holdout

Each mode runs in a new process that imports what ``leapgen serve`` imports
(torch, transformers: ~300k objects the collector tracks), then compiles
JSONSchemaBench schemas (MaskBench's valid instances, as ``bench_masks.py``)
and the context-free grammars of ``workloads.py``, and walks every instance
(fill the bitmask, accept the token). Every collection is timed
(``gc.callbacks``) and tagged with what ran: a compile or the mask steps.
Modes: ``server`` freezes what start-up made (``gc.freeze()``, as ``leapgen
serve`` does); ``library`` does not (a caller's own process). Reported: mask
steps, collections, pauses over 10 ms (during the steps, and in all) and per
100,000 mask steps, the longest pause, and the total paused, each measured
twice: in wall time, and in the thread's CPU time (on a shared machine a
collection of 0.1 ms of work can span a 10 ms wait for the CPU).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests"), str(HERE)]


def measure(args) -> dict:
    """One mode, in this process: the pauses (ms, generation, phase) and the step count."""
    import leapgen.engine  # noqa: F401 - the server's imports: torch, transformers
    import torch  # noqa: F401
    import transformers  # noqa: F401
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    import runner
    import workloads
    from leapgen.backends import get_backend
    from leapgen.errors import GrammarError

    hf, info = load_hf_tokenizer(args.tokenizer), load_tokenizer_info(args.tokenizer)
    grammars = workloads.jsonschemabench_grammars(args.schemas, seed=args.seed,
                                                  half=None if args.half == "both" else args.half)
    grammars += workloads.cfg_grammars()
    tokens = [[hf.encode(t, add_special_tokens=False) for t in g.instances] for g in grammars]
    backend = get_backend("leapgen", info, max_compile_seconds=runner.COMPILE_LIMIT_S)
    stop = info.stop_token_ids[0]
    if args.mode == "server":
        gc.collect()
        gc.freeze()
    phase = ["compile"]
    pauses: list[tuple[float, int, str, float]] = []  # (wall ms, generation, phase, thread CPU ms)
    started = [0.0, 0.0]

    def on_gc(event, info_):
        if event == "start":
            started[:] = time.perf_counter(), time.thread_time()
        else:
            pauses.append(((time.perf_counter() - started[0]) * 1e3, info_["generation"], phase[0],
                           (time.thread_time() - started[1]) * 1e3))

    gc.callbacks.append(on_gc)
    steps = 0
    t = time.perf_counter()
    for g, ids in zip(grammars, tokens):
        phase[0] = "compile"
        try:
            compiled = runner.compile_grammar(backend, g)
        except GrammarError:
            continue
        phase[0] = "steps"
        result = runner.walk(backend, compiled, ids, stop, record_states=False)
        steps += sum(len(x) for x in result["tbm_ns"])
    gc.callbacks.remove(on_gc)
    return {"mode": args.mode, "steps": steps, "seconds": time.perf_counter() - t, "pauses": pauses,
            "tracked_at_end": len(gc.get_objects()), "frozen": gc.get_freeze_count()}


def row(res: dict, clock: int) -> str:
    """One table row; ``clock`` 0: pauses in wall time, 3: in the thread's CPU time."""
    pauses = [(p[clock], p[1], p[2]) for p in res["pauses"]]
    long_steps = [ms for ms, _, ph in pauses if ph == "steps" and ms > 10]
    long_all = [ms for ms, _, _ in pauses if ms > 10]
    per = lambda n: 1e5 * n / max(res["steps"], 1)  # noqa: E731
    return (f"| {res['mode']} | {'wall' if clock == 0 else 'CPU'} | {res['steps']:,} | {len(pauses):,} | "
            f"{sum(g == 2 for _, g, _ in pauses)} | {len(long_steps)} (**{per(len(long_steps)):.2f}**) | "
            f"{len(long_all)} ({per(len(long_all)):.2f}) | {max((ms for ms, _, _ in pauses), default=0):.1f} | "
            f"{sum(ms for ms, _, _ in pauses):,.0f} | {res['tracked_at_end']:,} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", default="llama3")
    p.add_argument("--schemas", type=int, default=600, help="JSONSchemaBench schemas to sample")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--half", default="holdout", choices=("both", "tune", "holdout"))
    p.add_argument("--mode", default="all", choices=("all", "server", "library"),
                   help="'all': each mode in a new process")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a child's answer
    args = p.parse_args(argv)
    if args.mode != "all":
        res = measure(args)
        print(json.dumps(res) if args.json else row(res, 0) + "\n" + row(res, 3))
        return 0
    print(f"{args.schemas} JSONSchemaBench schemas ({args.half}, seed {args.seed}) and the context-free grammars; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")
    print("| mode | pause clock | mask steps | collections | full collections | pauses > 10 ms in the steps "
          "(per 100k steps) | pauses > 10 ms in all (per 100k steps) | longest ms | total ms | tracked objects "
          "at the end |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode in ("server", "library"):
        out = subprocess.run([sys.executable, __file__, "--mode", mode, "--json", "--tokenizer", args.tokenizer,
                              "--schemas", str(args.schemas), "--seed", str(args.seed), "--half", args.half],
                             capture_output=True, text=True, check=True)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(row(res, 0) + "\n" + row(res, 3), flush=True)
        if os.environ.get("GC_DETAIL"):
            print("   pauses > 10 ms (wall ms, generation, phase, CPU ms):",
                  [(round(w), g, ph, round(c)) for w, g, ph, c in res["pauses"] if w > 10])
    return 0


if __name__ == "__main__":
    sys.exit(main())
