"""Tool calling end to end on the embedded model (SmolLM2-135M), with and without jump-forward.

Usage (from the repository root)::

    python benchmarks/bench_tools.py --requests 16 --runs 3

Each run sends ``--requests`` conversations through :meth:`leapgen.LLM.chat` in one continuous
batch (temperature 0.8, seed ``i``), half ``tool_choice: "required"`` over two tools, half naming
one, with ``jump_forward`` on, then the same requests with it off, in the same process. Per mode:
output tokens/s (completion tokens over the batch's wall time), the forced share (tokens a
jump-forward appended, never sampled, over completion tokens), forward passes per request, and
the calls: how many, how many whose arguments validate against their schema (``jsonschema``), and
the share of requests that finished with ``tool_calls``. Medians over runs, and the ratio
with / without jump-forward, are printed as a markdown table naming the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import report  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather of a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 24},
                                         "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "book_flight", "description": "Book a flight", "parameters": {
        "type": "object", "properties": {"origin": {"type": "string", "maxLength": 24},
                                         "destination": {"type": "string", "maxLength": 24},
                                         "passengers": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["origin", "destination", "passengers"], "additionalProperties": False}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
QUESTIONS = ("What is the weather in Paris?", "Book a flight from Oslo to Rome for two people.",
             "Is it raining in Tokyo? And book me a flight there from Seoul.", "How warm is Lisbon today?")


def run_mode(llm, requests: int, *, jump_forward: bool, max_tokens: int) -> dict:
    """One batch of ``requests`` chats; its figures."""
    import jsonschema

    from leapgen.engine.chat.plan import chat_output
    from leapgen.engine.sampling_params import SamplingParams

    start = time.perf_counter()
    plans = []
    for i in range(requests):
        choice = "required" if i % 2 == 0 else {"type": "function", "function": {"name": TOOLS[i // 2 % 2][
            "function"]["name"]}}
        plan = llm.chat_settings.plan([{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                                      SamplingParams(temperature=0.8, seed=i, max_tokens=max_tokens,
                                                     jump_forward=jump_forward), tools=TOOLS, tool_choice=choice)
        plans.append(plan)
    raw = llm.generate([p.prompt_ids for p in plans], [p.params for p in plans])
    wall = time.perf_counter() - start
    outs = [chat_output(out, plan.parser) for out, plan in zip(raw, plans)]
    calls = valid = 0
    for out in outs:
        for call in out.tool_calls:
            calls += 1
            try:
                jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[call["function"]["name"]])
                valid += 1
            except (jsonschema.ValidationError, ValueError, KeyError):
                pass
    tokens = sum(o.output.completion_tokens for o in outs)
    forced = sum(o.output.jump_forward_tokens for o in outs)
    return {"tokens_per_s": tokens / wall, "forced_share": forced / max(tokens, 1), "tokens": tokens,
            "forward_passes": sum(o.output.forward_passes for o in outs) / requests, "calls": calls, "valid": valid,
            "tool_calls_share": sum(o.finish_reason == "tool_calls" for o in outs) / requests, "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)

    from leapgen.engine import LLM

    llm = LLM(num_threads=args.threads, max_running=args.requests)
    run_mode(llm, 2, jump_forward=True, max_tokens=args.max_tokens)  # compile the grammars, warm the caches
    runs: dict[str, list[dict]] = {"jump-forward": [], "no jump-forward": []}
    for _ in range(args.runs):
        for mode in runs:
            runs[mode].append(run_mode(llm, args.requests, jump_forward=mode == "jump-forward",
                                       max_tokens=args.max_tokens))
    med = {mode: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for mode, rs in runs.items()}
    print(f"## Tool calls end to end ({args.requests} requests x {args.runs} runs, temperature 0.8)\n")
    print(f"Machine: {report.machine()}\n")
    print("| mode | output tokens/s | forced share | forward passes / request | calls | valid | "
          "finish_reason tool_calls |")
    print("|---|---|---|---|---|---|---|")
    for mode, m in med.items():
        print(f"| {mode} | {m['tokens_per_s']:.1f} | {m['forced_share']:.1%} | {m['forward_passes']:.1f} | "
              f"{m['calls']:.0f} | {m['valid']:.0f} | {m['tool_calls_share']:.0%} |")
    ratio = med["jump-forward"]["tokens_per_s"] / med["no jump-forward"]["tokens_per_s"]
    print(f"\nOutput tokens/s with / without jump-forward: {ratio:.2f}x (median of {args.runs} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
