"""``n=4`` against 4 separate requests, end to end, on the embedded model.

One prompt (a few hundred tokens: a system message and a task), one grammar,
sampled at temperature 0.8: mode ``n4`` submits one request with ``n=4``
(seed ``s``: samples seeded ``s .. s+3``), mode ``4x1`` submits 4 requests of
``n=1`` at once (seeds ``s .. s+3``), both to the same :class:`LLM`, so both
decode the same 4 samples in one continuous batch; they differ only in the
prompt: prefilled once and its KV copied (``n4``), or prefilled 4 times.
Wall time from submission to the last output, prompt tokens prefilled and
forward passes, medians of interleaved rounds (the prefix cache is off
unless ``--prefix-cache-tokens``, so ``4x1`` really prefills 4 times). The
outputs of the two modes are checked equal (same seeds, same samples).

    python benchmarks/bench_n.py --rounds 7 --grammar json --max-tokens 48
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

SCHEMA = {"type": "object", "properties": {
    "title": {"type": "string", "maxLength": 40}, "genre": {"enum": ["fantasy", "mystery", "science fiction"]},
    "year": {"type": "integer", "minimum": 1900, "maximum": 2030}, "rating": {"type": "number"}},
    "required": ["title", "genre", "year", "rating"], "additionalProperties": False}
SYSTEM = ("You are a librarian who recommends books. " * 12 +
          "Answer with one recommendation as a JSON object with the title, the genre, the year and a rating "
          "from 0 to 5. Keep titles short. Prefer books that are widely available in public libraries, in print, "
          "and suitable for a reading group that meets once a month and likes to discuss characters and ideas.")
TASK = "Recommend a book for a reader who liked long novels about journeys, maps and old cities."
GRAMMARS = {"json": {"json_schema": SCHEMA}, "regex": {"regex": r"[A-Z][a-z]{2,12}( [A-Z][a-z]{2,12}){1,3}"},
            "none": {}}


def run_mode(llm, mode: str, grammar: dict, max_tokens: int, seed: int) -> dict:
    """One round of a mode: wall time, prefilled tokens, forward passes, texts."""
    from leapgen.engine import SamplingParams

    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    before = (llm.stats.prefill_tokens, llm.stats.forward_passes)
    start = time.perf_counter()
    if mode == "n4":
        requests = llm.add_requests(messages, SamplingParams(n=4, seed=seed, temperature=0.8, max_tokens=max_tokens,
                                                             **grammar))
    else:
        requests = [llm.add_request(messages, SamplingParams(seed=seed + i, temperature=0.8, max_tokens=max_tokens,
                                                             **grammar)) for i in range(4)]
    while any(not r.is_finished for r in requests):
        llm.step()
    wall = time.perf_counter() - start
    outs = [llm.get_output(r) for r in requests]
    return {"wall_s": wall, "prefill_tokens": llm.stats.prefill_tokens - before[0],
            "forward_passes": llm.stats.forward_passes - before[1], "texts": [o.text for o in outs],
            "tokens": sum(o.completion_tokens for o in outs), "prompt_tokens": outs[0].prompt_tokens}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds per mode (medians reported)")
    p.add_argument("--grammar", choices=sorted(GRAMMARS), default="json")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: the idle CPUs)")
    p.add_argument("--prefix-cache-tokens", type=int, default=0, help="the prefix cache's budget (default 0: off)")
    p.add_argument("--out", default=None, help="write the rounds as JSON here")
    args = p.parse_args(argv)

    from leapgen.engine import LLM

    llm = LLM(num_threads=args.threads, prefix_cache_tokens=args.prefix_cache_tokens)
    grammar = GRAMMARS[args.grammar]
    run_mode(llm, "n4", grammar, args.max_tokens, 999)  # warm-up: the compile, the kernels
    rounds: dict[str, list[dict]] = {"n4": [], "4x1": []}
    for r in range(args.rounds):
        order = ("n4", "4x1") if r % 2 == 0 else ("4x1", "n4")
        for mode in order:
            rounds[mode].append(run_mode(llm, mode, grammar, args.max_tokens, seed=100 + r))
    same = all(a["texts"] == b["texts"] for a, b in zip(rounds["n4"], rounds["4x1"]))
    med = {m: {k: statistics.median(x[k] for x in rs) for k in ("wall_s", "prefill_tokens", "forward_passes",
                                                                   "tokens")} for m, rs in rounds.items()}
    print(f"## n=4 vs 4 separate requests ({args.grammar}, {rounds['n4'][0]['prompt_tokens']}-token prompt, "
          f"max_tokens {args.max_tokens}, temperature 0.8, medians of {args.rounds} interleaved rounds)\n")
    print(f"Machine: {platform.processor() or platform.machine()}, torch threads {args.threads or 'default'}; "
          f"prefix cache {'off' if not args.prefix_cache_tokens else args.prefix_cache_tokens}\n")
    print("| mode | wall s | prompt tokens prefilled | forward passes | output tokens | output tokens/s |")
    print("|---|---|---|---|---|---|")
    for mode in ("n4", "4x1"):
        m = med[mode]
        print(f"| {mode} | {m['wall_s']:.2f} | {m['prefill_tokens']:.0f} | {m['forward_passes']:.0f} | "
              f"{m['tokens']:.0f} | {m['tokens'] / m['wall_s']:.1f} |")
    print(f"\n4x1 / n4 wall time: {med['4x1']['wall_s'] / med['n4']['wall_s']:.2f}x; "
          f"same samples in both modes: {same}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "rounds": rounds}, f)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
