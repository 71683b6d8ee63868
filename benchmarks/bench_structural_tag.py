"""TTFM and TBM of a structural tag's ``triggered_tags`` of 1, 16 and 128 tools, leapgen against xgrammar.

Usage (from the repository root)::

    python benchmarks/bench_structural_tag.py --tools 1,16,128 --runs 3

Each tool is a function of JSONSchemaBench's Glaiveai2K subset (function-calling
argument schemas, each its own), called the Hermes / Qwen way::

    {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"],
     "tags": [{"begin": "<tool_call>\\n{\\"name\\": \\"NAME\\", \\"arguments\\": ",
               "content": {"type": "json_schema", "json_schema": SCHEMA}, "end": "}\\n</tool_call>"}, ...]}}

TTFM = compile + new matcher + first bitmask fill (ms, wall clock: xgrammar
compiles on several threads). TBM = fill + accept per token (µs, the thread's
CPU time, ``time.thread_time_ns``: on shared cores a wall clock also counts the
milliseconds the process waits for a core, which swamp means and p99) along outputs that mix free text and tool calls (a sentence, a call
of one of the tools with a MaskBench valid instance as arguments, another
sentence), tokenized by the model's tokenizer (Llama-3 by default, where the
markers are spelled in ordinary tokens; ``--tokenizer qwen``: they are single
added tokens). The sizes use disjoint tools (tools 0, 1-16, 17-144), so no size
profits from another's cached sub-automata (``--first-tool N``: the sizes' tools start at the Nth, to
tune on other tools than the default run's). Each run of each backend is a
fresh forked process (caches cold; compile caches off), backends one after
the other, in the same session; medians over runs are printed with the ratio
leapgen / xgrammar (below 1: leapgen faster). TBM p50 and p99 are each run's,
then the median of the runs; the mean pools every run's tokens; "TTFM + walks'
masks" is the compile plus every fill and accept of the walks (xgrammar computes
every state's mask at compile time; so does leapgen where the tag is one DFA of at
most 50,000 states, as at every size here, else lazily at a state's first visit).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests"), str(HERE)]

import report  # noqa: E402
import workloads  # noqa: E402

SENTENCES = ("Let me look that up for you. ", "Sure, I can help with that. ", "I will call a tool now. ")
WALKS_PER_SIZE = 8


def tools(corpus: Path, count: int, accepts) -> list[tuple[str, dict, str]]:
    """``count`` tools ``(name, schema, arguments JSON)`` from Glaiveai2K, in file order, each with a valid
    instance that ``accepts(schema, text)`` takes (strict objects: some instances hold extra keys)."""
    out = []
    with open(corpus / "tests" / "Glaiveai2K.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            valid = [t["data"] for t in row["tests"] if t["valid"]]
            if not valid:
                continue
            schema = json.loads((corpus / row["schema_file"]).read_text("utf-8"))
            arguments = json.dumps(valid[0], ensure_ascii=False)
            if accepts(schema, arguments):
                out.append((f"{row['id'].rsplit('_', 1)[0]}_{len(out)}", schema, arguments))
                if len(out) == count:
                    break
    if len(out) < count:
        raise SystemExit(f"only {len(out)} usable Glaiveai2K tools under {corpus}, {count} wanted")
    return out


def leapgen_accepts(info):
    """``accepts(schema, text)`` for :func:`tools`: leapgen compiles ``schema`` (flexible whitespace) and
    matches ``text`` in full; a schema it refuses accepts nothing."""
    from leapgen import GrammarCompiler, GrammarMatcher

    checker = GrammarCompiler(info)

    def accepts(schema, text):
        try:
            m = GrammarMatcher(checker.compile_json_schema(schema, any_whitespace=True))
        except Exception:  # a schema leapgen refuses is no use here
            return False
        return m.accept_string(text) and m.is_completed()
    return accepts


def structural_tag(chosen) -> dict:
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
        {"begin": '<tool_call>\n{"name": "%s", "arguments": ' % name,
         "content": {"type": "json_schema", "json_schema": schema}, "end": "}\n</tool_call>"}
        for name, schema, _ in chosen]}}


def outputs(chosen) -> list[str]:
    """Texts a model might write with these tools: free text, one call, free text."""
    picks = [chosen[(i * 7919) % len(chosen)] for i in range(min(WALKS_PER_SIZE, max(2, len(chosen))))]
    return [SENTENCES[i % 3] + '<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>' % (name, arguments)
            + " " + SENTENCES[(i + 1) % 3].strip() for i, (name, _, arguments) in enumerate(picks)]


def walk(backend, compiled, token_lists, stop_id: int) -> tuple[list[int], int]:
    """Fill, check (untimed), accept each token of each output: (CPU ns per token, rejected walks)."""
    clock = time.thread_time_ns
    bitmask = backend.allocate_bitmask(1)
    times, rejected = [], 0
    for ids in token_lists + [[]]:
        state = backend.new_state(compiled)
        for token in ids:
            a = clock()
            state.fill_next_token_bitmask(bitmask, 0)
            b = clock()
            if not (int(bitmask[0, token >> 5]) >> (token & 31)) & 1:
                rejected += 1
                break
            c = clock()
            ok = state.accept_token(token)
            times.append(b - a + clock() - c)
            if not ok:
                rejected += 1
                break
        else:
            state.fill_next_token_bitmask(bitmask, 0)
            rejected += bool(ids) and not (int(bitmask[0, stop_id >> 5]) >> (stop_id & 31)) & 1
    return times, rejected


def run_one(backend_name: str, sizes: list, info, hf, conn) -> None:
    """Child process: one backend, every size; sends {size: {ttfm_ms, tbm_ns, rejected}}."""
    from leapgen.backends import get_backend

    options = {"cache_entries": 0} if backend_name == "leapgen" else {"cache_enabled": False}
    backend = get_backend(backend_name, info, hf_tokenizer=hf, **options)
    warm = structural_tag([("warm_up", {"type": "object", "properties": {"k": {"type": "string"}}}, '{"k": "v"}')])
    walk(backend, backend.compile_structural_tag(warm), [hf.encode('x <tool_call>\n{"name": "warm_up", '
                                                                  '"arguments": {"k": "v"}}\n</tool_call>',
                                                                  add_special_tokens=False)], info.stop_token_ids[0])
    out = {}
    for n, chosen in sizes:
        tag = structural_tag(chosen)
        bitmask = backend.allocate_bitmask(1)
        t0 = time.perf_counter()
        compiled = backend.compile_structural_tag(tag)
        backend.new_state(compiled).fill_next_token_bitmask(bitmask, 0)
        ttfm = (time.perf_counter() - t0) * 1e3
        ids = [hf.encode(text, add_special_tokens=False) for text in outputs(chosen)]
        times, rejected = walk(backend, compiled, ids, info.stop_token_ids[0])
        out[n] = {"ttfm_ms": ttfm, "tbm_ns": times, "rejected": rejected}
    conn.send(out)
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tools", default="1,16,128", help="comma-separated tool counts")
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per backend")
    ap.add_argument("--backend", default="leapgen,xgrammar")
    ap.add_argument("--tokenizer", default="llama3", help="a tests/vocab_loaders.py family with a HF tokenizer")
    ap.add_argument("--first-tool", type=int, default=0,
                    help="skip this many usable Glaiveai2K tools first (tune on other tools than those reported)")
    ap.add_argument("--corpus", type=Path, default=workloads.JSB_ROOT, help="the jsonschemabench corpus folder")
    ap.add_argument("--out", type=Path, help="write the raw results as JSON here")
    args = ap.parse_args()
    from vocab_loaders import load_hf_tokenizer, load_tokenizer_info

    info, hf = load_tokenizer_info(args.tokenizer), load_hf_tokenizer(args.tokenizer)
    counts = [int(x) for x in args.tools.split(",")]
    pool = tools(args.corpus, args.first_tool + sum(counts), leapgen_accepts(info))
    sizes, start = [], args.first_tool
    for n in counts:
        sizes.append((n, pool[start:start + n]))
        start += n
    backends = args.backend.split(",")
    results = {b: [] for b in backends}
    ctx = mp.get_context("fork")
    for _ in range(args.runs):
        for b in backends:
            receiver, sender = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=run_one, args=(b, sizes, info, hf, sender))
            proc.start()
            sender.close()
            results[b].append(receiver.recv())
            proc.join()
    print(f"\n{report.machine()}\ntokenizer {args.tokenizer}, {args.runs} runs, outputs of {WALKS_PER_SIZE} "
          f"calls per size, tools from {args.first_tool}\n")
    rows = []
    for n in counts:
        line = {}
        for b in backends:
            ttfm = statistics.median(r[n]["ttfm_ms"] for r in results[b])
            tbm = [t / 1e3 for r in results[b] for t in r[n]["tbm_ns"]]
            p50 = statistics.median(statistics.median([t / 1e3 for t in r[n]["tbm_ns"]]) for r in results[b])
            p99 = statistics.median(report._pct([t / 1e3 for t in r[n]["tbm_ns"]], 99) for r in results[b])
            total = statistics.median(r[n]["ttfm_ms"] + sum(r[n]["tbm_ns"]) / 1e6 for r in results[b])
            line[b] = (ttfm, p50, p99, statistics.fmean(tbm), total, sum(r[n]["rejected"] for r in results[b]))
        for b in backends:
            ttfm, p50, p99, mean, total, rejected = line[b]
            ratio = ""
            if b != "xgrammar" and "xgrammar" in line:
                x = line["xgrammar"]
                ratio = f"{ttfm / x[0]:.2f} / {p50 / x[1]:.2f} / {p99 / x[2]:.2f} / {mean / x[3]:.2f} / {total / x[4]:.2f}"
            rows.append([str(n), b, report._fmt(ttfm), report._fmt(p50), report._fmt(p99), report._fmt(mean),
                         report._fmt(total), str(rejected), ratio])
    print(report._table(["tools", "backend", "TTFM ms", "TBM p50 µs", "TBM p99 µs", "TBM mean µs",
                         "TTFM + walks' masks ms", "rejected", "ratio TTFM / p50 / p99 / mean / total"], rows))
    if args.out:
        args.out.write_text(json.dumps(results))


if __name__ == "__main__":
    main()
