"""Does a short jump-forward pay? End to end, per forced-length bucket.

Usage (from the repository root)::

    python benchmarks/bench_jump_min.py --concurrency 1 8 --requests 32 --c1-requests 12 --repeat 3

SGLang skips jumps of one character or less: there the extend did not pay.
Here each mode runs the workload of ``bench_e2e.py`` (Glaiveai2K function-call
schemas on the embedded model, compact JSON, greedy) with the engine's
``jump_forward_min_chars`` at one value: ``jf>=1`` jumps every forced text,
``jf>=N`` samples forced texts shorter than ``N`` characters, ``no-jf``
samples everything. Modes run in interleaved rounds (every mode once per
round, so a load drift hits them alike); each cell is the median round.
Reported per concurrency and mode: output tokens/s, TPOT p50, engine steps
and the jumped share; and, from the ``jf>=1`` runs, the jumps per forced
length bucket (1, 2-3, 4-8, 9+ characters) with the tokens they added. The
bucket ``[a, b)`` pays when ``jf>=a`` beats ``jf>=b``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import bench_e2e  # noqa: E402

BUCKETS = ((1, 2), (2, 4), (4, 9), (9, 1 << 30))


def bucket_of(chars: int) -> str:
    lo, hi = next(b for b in BUCKETS if b[0] <= chars < b[1])
    return f"{lo}" if hi == lo + 1 else f"{lo}+" if hi > 1 << 20 else f"{lo}-{hi - 1}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    p.add_argument("--requests", type=int, default=32, help="requests per cell above concurrency 1")
    p.add_argument("--c1-requests", type=int, default=12)
    p.add_argument("--min-chars", type=int, nargs="+", default=[1, 2, 4, 9], help="the jf>=N modes")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)

    from leapgen.engine import LLM, engine_core
    from leapgen.engine.model_loader import load_model
    from leapgen.errors import GrammarError

    jumps: list[tuple[int, int]] = []  # (forced characters, tokens added) of every jump taken
    real = engine_core.try_jump_forward

    def counted(matcher, output_ids, *a, **k):
        got = real(matcher, output_ids, *a, **k)
        if got is not None:
            jumps.append((len(got.forced_text), len(got.new_ids) - len(output_ids)))
        return got

    engine_core.try_jump_forward = counted
    loaded = load_model("default")
    llm = LLM(loaded=loaded, num_threads=args.threads, max_running=max(args.concurrency))
    size = {c: args.c1_requests if c == 1 else args.requests for c in args.concurrency}
    workload = []
    for prompt, schema in bench_e2e.load_workload(max(size.values()) * 2, args.seed):
        try:
            llm.grammar.compile_async(bench_e2e.params_of("leapgen", schema, args.max_tokens)).result()
        except GrammarError:
            continue
        workload.append((prompt, schema))
        if len(workload) == max(size.values()):
            break
    bench_e2e.run_mode(llm, workload[:2], "leapgen", 2, 16)  # warm-up
    modes = [f"jf>={n}" for n in args.min_chars] + ["no-jf"]
    print(f"{len(workload)} requests; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start",
          flush=True)
    rows, per_bucket = [], {}
    for c in args.concurrency:
        cell = workload[:size[c]]
        runs = {m: [] for m in modes}
        for _ in range(args.repeat):
            for mode in modes:
                llm.jump_forward_min_chars = int(mode[4:]) if mode != "no-jf" else 1
                before = len(jumps)
                t = time.perf_counter()
                res = bench_e2e.run_mode(llm, cell, "leapgen-no-jf" if mode == "no-jf" else "leapgen", c,
                                         args.max_tokens)
                runs[mode].append(res)
                if mode == "jf>=1":
                    for chars, added in jumps[before:]:
                        b = per_bucket.setdefault((c, bucket_of(chars)), [0, 0])
                        b[0] += 1
                        b[1] += added
                print(f"  c={c} {mode}: {res['tok_s']:.1f} tok/s in {time.perf_counter() - t:.0f} s", flush=True)
        base = statistics.median(r["tok_s"] for r in runs["jf>=1"])
        for mode in modes:
            tok_s = [r["tok_s"] for r in runs[mode]]
            med = statistics.median(tok_s)
            rows.append(f"| {c} | {mode} | **{med:.1f}** ({', '.join(f'{x:.1f}' for x in tok_s)}) | {med / base:.3f} | "
                        f"{statistics.median(r['tpot'][0] for r in runs[mode]):.0f} | "
                        f"{statistics.median(r['steps'] for r in runs[mode]):.0f} | "
                        f"{statistics.median(r['jf'] for r in runs[mode]):.0f} |")
    print("\n| concurrency | mode | out tok/s, median (rounds) | vs jf>=1 | TPOT p50 ms | engine steps | jumped % |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print("\nJumps of the jf>=1 runs by forced length (characters): jumps / tokens added, summed over the rounds\n")
    print("| concurrency | " + " | ".join(bucket_of(b[0]) for b in BUCKETS) + " |")
    print("|---:|" + "---:|" * len(BUCKETS))
    for c in args.concurrency:
        cells = [per_bucket.get((c, bucket_of(b[0])), [0, 0]) for b in BUCKETS]
        print(f"| {c} | " + " | ".join(f"{n} / {t}" for n, t in cells) + " |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
