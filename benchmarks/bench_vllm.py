"""vLLM with leapgen against vLLM with xgrammar and with guidance, in one run.

The same JSONSchemaBench Glaiveai2K requests as ``bench_e2e.py`` (a prompt
asking for a function call's arguments under its schema), on vLLM's CPU
build serving the embedded SmolLM2 folder, compact JSON
(``disable_any_whitespace``), greedy. Backends: ``xgrammar``, ``guidance``,
``leapgen``, and ``leapgen-jf`` (leapgen with its jump-forward proposer).
Each backend gets a fresh ``LLM``, one warm-up request, then every request
submitted at once (one continuous batch). Per backend: requests vLLM refused
(its check of the schema), schema-valid share of the others (outputs cut by
``max_tokens`` counted apart), output tokens/s over the batch, TPOT and TTFT
p50/p99 (vLLM's request metrics), compile stalls (time a request waited in
vLLM's queue, grammar compile included, before first scheduled: p50/max, and
how many waited > 100 ms), and for ``leapgen-jf`` the share of output tokens
that came as accepted drafts (forced). Prints a markdown table naming the
machine; ``--out`` keeps the figures (JSON); ``--write-readme`` puts the table
under "vLLM" in benchmarks/README.md.

    $LEAPGEN_VLLM_VENV/bin/python benchmarks/bench_vllm.py --requests 24 --max-tokens 160 --out benchmarks/results/vllm.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_e2e import load_workload  # noqa: E402  (the same prompts)
from report import _table, machine  # noqa: E402

BACKENDS = ("xgrammar", "guidance", "leapgen", "leapgen-jf")
STALL_MS = 100.0


def _pct(values, q) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def _spec_counts(llm) -> dict:
    return {m.name: m.value for m in llm.get_metrics() if m.name.startswith("vllm:spec_decode") and hasattr(m, "value")}


def make_llm(model: str, backend: str, args):
    from vllm import LLM

    from leapgen.integrations.vllm_backend import JUMP_FORWARD_PROPOSER

    extra = {}
    if backend == "leapgen-jf":
        extra["speculative_config"] = {"method": "custom_class", "model": JUMP_FORWARD_PROPOSER,
                                       "num_speculative_tokens": args.num_speculative_tokens}
    return LLM(model=model, dtype="float32", enforce_eager=True, max_model_len=args.max_model_len,
               max_num_seqs=args.requests, seed=0, disable_log_stats=False,
               structured_outputs_config={"backend": backend.removesuffix("-jf"), "disable_any_whitespace": True},
               **extra)


def run_batch(llm, prompts: list[list[int]], schemas: list[dict], max_tokens: int) -> tuple[list, int, float]:
    """Submit every request at once, step the engine to the end; (outputs by index, refused, wall s)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    engine, refused, pending = llm.llm_engine, 0, {}
    start = time.perf_counter()
    for i, (ids, schema) in enumerate(zip(prompts, schemas)):
        params = SamplingParams(max_tokens=max_tokens, temperature=0.0,
                                structured_outputs=StructuredOutputsParams(json=schema))
        try:
            engine.add_request(f"r{i}-{time.monotonic_ns()}", {"prompt_token_ids": ids}, params)
            pending[i] = None
        except Exception:  # vLLM's check refused this schema for this backend
            refused += 1
    names = {}
    outputs = [None] * len(prompts)
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                names[out.request_id] = out
    wall = time.perf_counter() - start
    for request_id, out in names.items():
        outputs[int(request_id[1:].split("-")[0])] = out
    return outputs, refused, wall


def measure_backend(model: str, backend: str, workload, tokenizer, args) -> dict:
    import jsonschema

    llm = make_llm(model, backend, args)
    try:
        prompts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                                 return_dict=False)
                   for p, _ in workload]
        run_batch(llm, prompts[:1], [{"type": "object", "properties": {"a": {"type": "integer"}}}], 8)  # warm-up
        spec0 = _spec_counts(llm)
        outputs, refused, wall = run_batch(llm, prompts, [s for _, s in workload], args.max_tokens)
        spec1 = _spec_counts(llm)
    finally:
        llm.llm_engine.engine_core.shutdown()
    valid = cut = invalid = tokens = 0
    ttft, tpot, stall = [], [], []
    for out, (_, schema) in zip(outputs, workload):
        if out is None:
            continue
        completion = out.outputs[0]
        tokens += len(completion.token_ids)
        m = out.metrics
        ttft.append(1000 * m.first_token_latency)
        stall.append(1000 * max(0.0, m.scheduled_ts - m.queued_ts))
        if len(completion.token_ids) > 1:
            tpot.append(1000 * (m.last_token_ts - m.first_token_ts) / (len(completion.token_ids) - 1))
        if completion.finish_reason == "length":
            cut += 1
            continue
        try:
            jsonschema.validate(json.loads(completion.text), schema)
            valid += 1
        except (ValueError, jsonschema.ValidationError, jsonschema.SchemaError):
            invalid += 1
    accepted = spec1.get("vllm:spec_decode_num_accepted_tokens", 0) - spec0.get("vllm:spec_decode_num_accepted_tokens", 0)
    drafted = spec1.get("vllm:spec_decode_num_draft_tokens", 0) - spec0.get("vllm:spec_decode_num_draft_tokens", 0)
    served = len(workload) - refused
    return {"backend": backend, "requests": len(workload), "refused": refused, "valid": valid, "cut": cut,
            "invalid": invalid, "served": served, "tokens": tokens, "wall_s": wall,
            "tokens_per_s": tokens / wall if wall else float("nan"),
            "tpot_ms": [_pct(tpot, 50), _pct(tpot, 99)], "ttft_ms": [_pct(ttft, 50), _pct(ttft, 99)],
            "stall_ms": [_pct(stall, 50), max(stall, default=float("nan"))],
            "stalls_over_100ms": sum(s > STALL_MS for s in stall),
            "drafted": drafted, "accepted": accepted, "forced_share": accepted / tokens if tokens else 0.0}


def table(results: list[dict], meta: dict) -> str:
    rows = []
    for r in results:
        done = r["served"] - r["cut"]
        rows.append([r["backend"], f"{r['refused']}/{r['requests']}",
                     f"{100 * r['valid'] / done:.0f} % ({r['valid']}/{done})" if done else "-", str(r["cut"]),
                     f"{r['tokens_per_s']:.1f}", "{:.1f} / {:.1f}".format(*r["tpot_ms"]),
                     "{:.0f} / {:.0f}".format(*r["ttft_ms"]), "{:.0f} / {:.0f}".format(*r["stall_ms"]),
                     str(r["stalls_over_100ms"]),
                     f"{100 * r['forced_share']:.0f} % ({r['accepted']}/{r['drafted']})" if r["drafted"] else "-"])
    header = ["backend", "refused", "schema-valid", "cut", "tok/s", "TPOT p50/p99 ms", "TTFT p50/p99 ms",
              "stall p50/max ms", f"stalls >{STALL_MS:.0f} ms", "forced (accepted/drafted)"]
    leap = {r["backend"]: r for r in results}
    ratios = []
    for other in ("xgrammar", "guidance", "leapgen"):
        for mine in ("leapgen", "leapgen-jf"):
            if other in leap and mine in leap and other != mine and leap[other]["tokens_per_s"]:
                ratios.append(f"{mine} / {other} tok/s = {leap[mine]['tokens_per_s'] / leap[other]['tokens_per_s']:.2f}")
    return (f"vLLM {meta['vllm']} (CPU build), SmolLM2-135M float32, {meta['requests']} Glaiveai2K requests in one "
            f"batch, greedy, compact JSON, max_tokens {meta['max_tokens']}, {meta['num_speculative_tokens']} "
            f"speculative tokens for leapgen-jf. {meta['machine']}.\n\n" + _table(header, rows) + "\n\n"
            + "; ".join(ratios) + "\n")


def write_readme(text: str) -> None:
    readme = HERE / "README.md"
    body = readme.read_text()
    start = body.find("\n## vLLM\n")
    section = "\n## vLLM\n\n`benchmarks/bench_vllm.py` (see its docstring for the method):\n\n" + text
    if start < 0:
        body = body.rstrip("\n") + "\n" + section
    else:
        end = body.find("\n## ", start + 1)
        body = body[:start] + section + (body[end:] if end >= 0 else "")
    readme.write_text(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--num-speculative-tokens", type=int, default=8)
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--seed", type=int, default=0, help="workload sample")
    parser.add_argument("--out", help="write the figures (JSON) here")
    parser.add_argument("--write-readme", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # measure one backend, in a process of its own
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.worker:
        import leapgen.integrations.vllm as lv

        lv.register()
        from transformers import AutoTokenizer

        from leapgen.engine.model_loader import default_model_folder

        model = str(default_model_folder())
        result = measure_backend(model, args.worker, load_workload(args.requests, args.seed),
                                 AutoTokenizer.from_pretrained(model), args)
        Path(args.out).write_text(json.dumps(result))
        return
    import subprocess
    import tempfile

    import vllm

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends:  # one process each: a second LLM in one process is not reliable
            out = Path(tmp) / f"{backend}.json"
            command = [sys.executable, __file__, "--worker", backend, "--out", str(out),
                       "--requests", str(args.requests), "--max-tokens", str(args.max_tokens),
                       "--max-model-len", str(args.max_model_len), "--seed", str(args.seed),
                       "--num-speculative-tokens", str(args.num_speculative_tokens)]
            subprocess.run(command, check=True)
            results.append(json.loads(out.read_text()))
    meta = {"vllm": vllm.__version__, "requests": args.requests, "max_tokens": args.max_tokens,
            "num_speculative_tokens": args.num_speculative_tokens, "machine": machine()}
    text = table(results, meta)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    if args.write_readme:
        write_readme(text)


if __name__ == "__main__":
    main()
