"""End-to-end generation benchmark on the embedded model (SmolLM2-135M).

Requests: JSONSchemaBench Glaiveai2K function-call schemas, each with a prompt
asking for a call's arguments as JSON. Modes: ``unconstrained``, ``leapgen``
(jump-forward on), ``leapgen-no-jf``, and each installed peer grammar backend
(``xgrammar``, ``llguidance``: jump-forward on; ``outlines-core``: it has
none), all with the compact JSON layout. For each concurrency ``c`` (a closed
loop keeping ``c`` requests in flight in one continuous batch) and mode, in
one run: output tokens/s, TTFT and TPOT p50/p99, schema-valid share (outputs
cut by ``max_tokens`` counted apart), jump-forward share, and the engine's
critical-path wait for the bitmask per step. Cells above concurrency 1 run at
least ``--min-waves`` (4) times their concurrency in requests, so the closed
loop's ramp-up and drain do not dominate. Prints a markdown table naming
the machine; ``--out`` keeps the figures (JSON), ``--plot`` draws them,
``--write-readme`` puts the table under "End to end" in benchmarks/README.md,
``--from-results`` re-renders a saved run without measuring.

    python benchmarks/bench_e2e.py --requests 64 --c1-requests 8 --concurrency 1 8 32 --max-tokens 64 \\
        --out benchmarks/results/e2e.json --plot benchmarks/e2e.png
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
PEERS = ("xgrammar", "llguidance", "outlines-core")
MODES = ("unconstrained", "leapgen", "leapgen-no-jf") + PEERS
COMPACT = (",", ":")


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


def backend_of(mode: str) -> str | None:
    """The grammar backend a mode runs on (None: unconstrained)."""
    return None if mode == "unconstrained" else "leapgen" if mode.startswith("leapgen") else mode


def params_of(mode: str, schema: dict, max_tokens: int):
    """The SamplingParams of one request in ``mode``."""
    from leapgen.engine import SamplingParams

    if mode == "unconstrained":
        return SamplingParams(max_tokens=max_tokens)
    return SamplingParams(max_tokens=max_tokens, json_schema=schema, json_separators=COMPACT,
                          jump_forward=mode != "leapgen-no-jf")


def run_mode(llm, workload, mode: str, concurrency: int, max_tokens: int) -> dict:
    """Closed-loop run of ``workload`` in ``mode``; returns the row's figures."""
    llm.scheduler.max_running = concurrency
    llm.prefix_cache.clear()  # every cell starts cold: no prompt KV left by the previous cell
    todo = list(workload)
    live, done = [], []
    stats0 = (llm.stats.mask_steps, llm.stats.mask_wait_ms, llm.stats.mask_fill_ms, llm.stats.steps)
    start = time.perf_counter()
    while todo or live:
        while todo and len(live) < concurrency:
            prompt, schema = todo.pop(0)
            live.append((llm.add_request(prompt, params_of(mode, schema, max_tokens)), schema))
        llm.step()
        done += [x for x in live if x[0].is_finished]
        live = [x for x in live if not x[0].is_finished]
    wall = time.perf_counter() - start
    return summarize(llm, done, wall, stats0)


def summarize(llm, done, wall: float, stats0) -> dict:
    """The figures of one cell (plain floats and ints: JSON-ready)."""
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

    def pct(xs):
        return [float(v) for v in np.percentile(xs, [50, 99])] if xs else [float("nan")] * 2

    return {
        "tok_s": tokens / wall, "wall_s": wall, "ttft": pct(ttft), "tpot": pct(tpot),
        "valid": 100.0 * valid / max(1, len(outs) - cut), "cut": cut, "n": len(outs),
        "jf": 100.0 * jf / max(1, tokens), "tokens": tokens, "steps": llm.stats.steps - stats0[3],
        "wait_us": 1e3 * (llm.stats.mask_wait_ms - stats0[1]) / mask_steps if mask_steps else 0.0,
        "fill_us": 1e3 * (llm.stats.mask_fill_ms - stats0[2]) / mask_steps if mask_steps else 0.0,
        "errors": sum(o.finish_reason == "error" for o, _ in outs),
    }


def median_run(runs: list[dict]) -> dict:
    """The run with the median output tokens/s (the lower middle one for an
    even count), with every run's tokens/s added as ``tok_s_runs``."""
    ordered = sorted(runs, key=lambda r: r["tok_s"])
    return {**ordered[(len(ordered) - 1) // 2], "tok_s_runs": [r["tok_s"] for r in runs]}


def table(result: dict) -> str:
    """The markdown table (with its heading line) of a run."""
    a = result["args"]
    waves = f", at least {a['min_waves']} x the concurrency" if "min_waves" in a else ""
    prefill = f", prompts in {a['prefill_dtype']}" if "prefill_dtype" in a else ""
    rounds = f" Median of {a['repeat']} interleaved rounds per cell." if a.get("repeat", 1) > 1 else ""
    head = (f"Machine: {result['machine']}. Model: SmolLM2-135M-Instruct (float32{prefill}, CPU, {a['threads']} "
            f"torch thread(s)). {a['requests']} requests per cell{waves} ({a['c1_requests']} at concurrency 1) "
            f"from Glaiveai2K "
            f"(seed {a['seed']}), max_tokens {a['max_tokens']}, greedy, compact JSON layout. Run took "
            f"{result['total_s'] / 60:.1f} min.{rounds}\n\n"
            "| mode | conc. | out tok/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms | schema-valid % (cut by max_tokens)"
            " | jump-fwd % | mask fill / wait µs per step | wait % of TPOT p50 | errors |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    lines = []
    for mode, c, r in result["rows"]:
        wait_share = 100.0 * r["wait_us"] / 1e3 / r["tpot"][0] if r["tpot"][0] == r["tpot"][0] else 0.0
        each = r.get("tok_s_runs", [])
        tok_s = f"{r['tok_s']:.1f}" + (" (" + ", ".join(f"{x:.1f}" for x in each) + ")" if len(each) > 1 else "")
        lines.append(f"| {mode} | {c} | {tok_s} | {r['ttft'][0]:.0f} / {r['ttft'][1]:.0f} | "
                     f"{r['tpot'][0]:.0f} / {r['tpot'][1]:.0f} | {r['valid']:.0f} ({r['cut']}/{r['n']} cut) | "
                     f"{r['jf']:.0f} | {r['fill_us']:.0f} / {r['wait_us']:.0f} | {wait_share:.2f} | "
                     f"{r['errors']} |")
    return head + "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> None:
    """Throughput and TPOT p50 against concurrency, one line per mode (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    modes = list(dict.fromkeys(m for m, _, _ in result["rows"]))
    for mode in modes:
        rows = [(c, r) for m, c, r in result["rows"] if m == mode]
        cs = [c for c, _ in rows]
        ax1.plot(cs, [r["tok_s"] for _, r in rows], marker="o", label=mode)
        ax2.plot(cs, [r["tpot"][0] for _, r in rows], marker="o", label=mode)
    for ax, label in ((ax1, "output tokens/s"), (ax2, "TPOT p50 (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    ax1.legend(fontsize=8)
    fig.suptitle(f"SmolLM2-135M on {result['machine']}: Glaiveai2K, max_tokens {result['args']['max_tokens']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_readme(text: str, plot_path: str | None) -> None:
    """Replace (or append) the "## End to end" section of benchmarks/README.md."""
    doc = README.read_text() if README.exists() else "# Benchmarks\n"
    figure = f"\n![throughput and TPOT]({Path(plot_path).name})\n" if plot_path else ""
    section = "## End to end\n\nMade by `benchmarks/bench_e2e.py`.\n\n" + text + figure + "\n"
    m = re.search(r"^## End to end\n.*?(?=^## |\Z)", doc, flags=re.S | re.M)
    doc = doc[: m.start()] + section + doc[m.end():] if m else doc.rstrip("\n") + "\n\n" + section
    README.write_text(doc)


def measure(args) -> dict:
    """Run every (concurrency, mode) cell; returns the run's result dict."""
    from leapgen.engine import LLM
    from leapgen.engine.model_loader import load_model
    from leapgen.errors import GrammarError

    t0 = time.perf_counter()
    loaded = load_model("default")
    llms = {}
    for mode in args.modes:
        backend = backend_of(mode) or "leapgen"
        if backend not in llms:
            llms[backend] = LLM(loaded=loaded, num_threads=args.threads, max_running=max(args.concurrency),
                                grammar_backend=backend, prefill_dtype=args.prefill_dtype)
    size = {c: args.c1_requests if c == 1 else max(args.requests, args.min_waves * c) for c in args.concurrency}
    wanted = max(size.values())
    workload = []
    for prompt, schema in load_workload(wanted * 2, args.seed):
        try:  # compile up front in every backend: the table times decoding, not compiles
            for mode in args.modes:
                if backend_of(mode):
                    llms[backend_of(mode)].grammar.compile_async(params_of(mode, schema, args.max_tokens)).result()
        except GrammarError:
            continue  # a schema some backend cannot compile is left out for all
        workload.append((prompt, schema))
        if len(workload) == wanted:
            break
    print(f"workload: {len(workload)} requests, set up in {time.perf_counter() - t0:.0f} s", flush=True)
    for llm in llms.values():
        run_mode(llm, workload[:2], "leapgen" if llm.grammar.backend_name == "leapgen" else llm.grammar.backend_name,
                 2, 16)  # warm-up
    rows = []
    for c in args.concurrency:
        cell = workload[: size[c]]
        runs: dict[str, list[dict]] = {mode: [] for mode in args.modes}
        for _ in range(args.repeat):  # rounds: every mode once per round, so load drifts hit all modes alike
            for mode in args.modes:
                t = time.perf_counter()
                runs[mode].append(run_mode(llms[backend_of(mode) or "leapgen"], cell, mode, c, args.max_tokens))
                print(f"done: {mode} c={c} in {time.perf_counter() - t:.0f} s", flush=True)
        rows += [(mode, c, median_run(runs[mode])) for mode in args.modes]
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, no GPU, shared"
    prefill = next(iter(llms.values())).model_runner.prefill_dtype
    return {"machine": machine, "rows": rows, "total_s": time.perf_counter() - t0,
            "args": {"requests": min(args.requests, len(workload)), "c1_requests": min(args.c1_requests, len(workload)),
                     "min_waves": args.min_waves, "repeat": args.repeat, "max_tokens": args.max_tokens, "threads": args.threads,
                     "seed": args.seed, "prefill_dtype": str(prefill or "float32").replace("torch.", "")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64, help="requests per (mode, concurrency) cell")
    parser.add_argument("--c1-requests", type=int, default=None,
                        help="requests in the concurrency-1 cells (default: --requests; they are the slowest)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--min-waves", type=int, default=4,
                        help="cells above concurrency 1 run at least this many times their concurrency in "
                             "requests (default 4): a closed loop of one or two waves measures mostly its "
                             "ramp-up and its drain")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds per concurrency, the modes interleaved; each row is its median run by "
                             "tokens/s, the rounds' tokens/s in brackets (default 1)")
    parser.add_argument("--prefill-dtype", default="auto", choices=("auto", "bfloat16", "float32"),
                        help="precision of prompt tokens (see leapgen.engine.LLM)")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--modes", nargs="+", default=None, choices=MODES,
                        help="default: unconstrained, leapgen, leapgen-no-jf and every installed peer")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the figures here (JSON)")
    parser.add_argument("--from-results", help="render a saved --out file instead of measuring")
    parser.add_argument("--plot", help="write the throughput / TPOT plot here (PNG, needs matplotlib)")
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args()
    if args.from_results:
        result = json.loads(Path(args.from_results).read_text())
    else:
        from leapgen.backends import available_backends

        if args.modes is None:
            args.modes = [m for m in MODES if m not in PEERS or m in available_backends()]
        args.c1_requests = args.requests if args.c1_requests is None else args.c1_requests
        result = measure(args)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(result, indent=1))
    text = table(result)
    print(text)
    if args.plot:
        plot(result, args.plot)
    if args.write_readme:
        write_readme(text, args.plot)


if __name__ == "__main__":
    main()
