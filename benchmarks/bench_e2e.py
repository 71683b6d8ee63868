"""End-to-end generation benchmark on the embedded model (SmolLM2-135M).

Requests: JSONSchemaBench Glaiveai2K function-call schemas, each with a prompt
asking for a call's arguments as JSON. For each mode (unconstrained, leapgen
with jump-forward, leapgen without) and each concurrency ``c`` (a closed loop
keeping ``c`` requests in flight in one continuous batch), in one run:
output tokens/s, TTFT and TPOT p50/p99, schema-valid share (outputs cut by
``max_tokens`` counted apart), jump-forward share, and the engine's
critical-path wait for the bitmask per step. Prints a markdown table naming
the machine; ``--write-readme`` puts it under "End to end" in
benchmarks/README.md.

    python benchmarks/bench_e2e.py --requests 8 --concurrency 1 8 --max-tokens 96
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import time
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).resolve().parents[2] / "shared/corpora/jsonschemabench/schemas/Glaiveai2K"
README = Path(__file__).resolve().parent / "README.md"
MODES = ("unconstrained", "leapgen", "leapgen-no-jf")


def load_workload(n: int, seed: int) -> list[tuple[str, dict]]:
    """``n`` (prompt, schema) pairs from Glaiveai2K, sampled with ``seed``."""
    paths = sorted(CORPUS.glob("*.json"))
    random.Random(seed).shuffle(paths)
    out = []
    for path in paths[:n]:
        name = re.sub(r"_[0-9a-f]{8}$", "", path.stem)
        schema = json.loads(path.read_text())
        prompt = (f"Call the function `{name}` with plausible arguments. Its parameters follow this JSON Schema:\n"
                  f"{json.dumps(schema)}\nReply with only the JSON object of the arguments.")
        out.append((prompt, schema))
    return out


def run_mode(llm, workload, mode: str, concurrency: int, max_tokens: int) -> dict:
    """Closed-loop run of ``workload`` in ``mode``; returns the row's figures."""
    from leapgen.engine import SamplingParams

    llm.scheduler.max_running = concurrency
    todo = list(workload)
    live, done = [], []
    stats0 = (llm.stats.mask_steps, llm.stats.mask_wait_ms, llm.stats.mask_fill_ms, llm.stats.steps)
    start = time.perf_counter()
    while todo or live:
        while todo and len(live) < concurrency:
            prompt, schema = todo.pop(0)
            params = SamplingParams(max_tokens=max_tokens, json_schema=None if mode == "unconstrained" else schema,
                                    jump_forward=mode == "leapgen")
            live.append((llm.add_request(prompt, params), schema))
        llm.step()
        done += [x for x in live if x[0].is_finished]
        live = [x for x in live if not x[0].is_finished]
    wall = time.perf_counter() - start
    return summarize(llm, done, wall, stats0)


def summarize(llm, done, wall: float, stats0) -> dict:
    import jsonschema

    outs = [(llm.get_output(r), schema) for r, schema in done]
    ttft = [o.ttft_s * 1e3 for o, _ in outs if o.ttft_s is not None]
    tpot = [(o.elapsed_s - o.ttft_s) * 1e3 / (o.completion_tokens - 1) for o, _ in outs
            if o.ttft_s is not None and o.completion_tokens > 1]
    valid = cut = 0
    for o, schema in outs:
        if o.finish_reason == "length":
            cut += 1
            continue
        try:
            jsonschema.validate(json.loads(o.text), schema)
            valid += 1
        except (ValueError, jsonschema.ValidationError, jsonschema.SchemaError):
            pass
    tokens = sum(o.completion_tokens for o, _ in outs)
    jf = sum(o.jump_forward_tokens for o, _ in outs)
    mask_steps = llm.stats.mask_steps - stats0[0]
    return {
        "tok_s": tokens / wall, "ttft": np.percentile(ttft, [50, 99]) if ttft else (np.nan, np.nan),
        "tpot": np.percentile(tpot, [50, 99]) if tpot else (np.nan, np.nan),
        "valid": 100.0 * valid / max(1, len(outs) - cut), "cut": cut, "n": len(outs),
        "jf": 100.0 * jf / max(1, tokens), "tokens": tokens,
        "wait_ms": (llm.stats.mask_wait_ms - stats0[1]) / mask_steps if mask_steps else 0.0,
        "fill_ms": (llm.stats.mask_fill_ms - stats0[2]) / mask_steps if mask_steps else 0.0,
        "errors": sum(o.finish_reason == "error" for o, _ in outs),
    }


def table(rows: list[tuple[str, int, dict]], machine: str, args) -> str:
    head = (f"Machine: {machine}. Model: SmolLM2-135M-Instruct (float32, CPU, {args.threads} torch thread(s)). "
            f"{args.requests} requests per cell from Glaiveai2K, max_tokens {args.max_tokens}, greedy.\n\n"
            "| mode | conc. | out tok/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms | schema-valid % (cut by max_tokens)"
            " | jump-fwd % | mask fill / wait ms per step | errors |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    lines = []
    for mode, c, r in rows:
        lines.append(f"| {mode} | {c} | {r['tok_s']:.1f} | {r['ttft'][0]:.0f} / {r['ttft'][1]:.0f} | "
                     f"{r['tpot'][0]:.0f} / {r['tpot'][1]:.0f} | {r['valid']:.0f} ({r['cut']}/{r['n']} cut) | "
                     f"{r['jf']:.0f} | {r['fill_ms']:.2f} / {r['wait_ms']:.2f} | {r['errors']} |")
    return head + "\n".join(lines) + "\n"


def write_readme(text: str) -> None:
    """Replace (or append) the "## End to end" section of benchmarks/README.md."""
    doc = README.read_text() if README.exists() else "# Benchmarks\n"
    section = "## End to end\n\nMade by `benchmarks/bench_e2e.py`.\n\n" + text + "\n"
    m = re.search(r"^## End to end\n.*?(?=^## |\Z)", doc, flags=re.S | re.M)
    doc = doc[: m.start()] + section + doc[m.end():] if m else doc.rstrip("\n") + "\n\n" + section
    README.write_text(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8, help="requests per (mode, concurrency) cell")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args()

    from leapgen.engine import LLM, SamplingParams
    from leapgen.errors import GrammarError

    llm = LLM(num_threads=args.threads, max_running=max(args.concurrency))
    workload = []
    for prompt, schema in load_workload(args.requests * 2, args.seed):
        try:  # compile up front: the table times decoding, not compiles (and skips unsupported schemas)
            llm.grammar.compile(SamplingParams(json_schema=schema))
        except GrammarError:
            continue
        workload.append((prompt, schema))
    workload = workload[: args.requests]
    run_mode(llm, workload[:2], "leapgen", 2, 16)  # warm-up
    rows = []
    for c in args.concurrency:
        for mode in args.modes:
            rows.append((mode, c, run_mode(llm, workload, mode, c, args.max_tokens)))
            print(f"done: {mode} c={c}", flush=True)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, no GPU, shared"
    text = table(rows, machine, args)
    print(text)
    if args.write_readme:
        write_readme(text)


if __name__ == "__main__":
    main()
