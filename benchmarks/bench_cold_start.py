"""Cold start: ``leapgen generate`` and ``leapgen serve`` in new processes, with and without a grammar.

Usage (from the repository root)::

    python benchmarks/bench_cold_start.py --runs 5
    python benchmarks/bench_cold_start.py --runs 3 --no-serve --max-tokens 1 256

``generate``: each run starts two new processes one after the other, the
README's command (``--json-schema examples/schemas/order.json`` and its
prompt) and the same command without the grammar (the baseline), at each
``--max-tokens`` (1 isolates the start-up: the model load, the prompt, one
token, and for the grammar its set-up and compile; 256 is the README's run,
whose constrained output is shorter and mostly jumped forward; odd runs reverse
the order of the two commands, and of the checkouts with ``--compare``, since the
place in the sequence moved a run by 0.2-0.5 s). Reported per mode: the median
wall time, the median CPU time (user + system, the load of other processes on a
shared machine inflates wall times far more), the ``compile`` figure of the summary line, and the difference with the
baseline: of the medians, and the median of each pair's difference (a
grammar run and the baseline run beside it: the machine's drift over
minutes cancels, which the difference of medians leaves in). The first
constrained run may build the vocabulary's token index
(``$LEAPGEN_CACHE/token_index``); ``--fresh-index`` removes it before the
first run to show that case too. Every process runs torch with the same
number of threads (``--threads``, default 1).

``serve``: a new ``leapgen serve`` (its start-up prepares the grammar layer
and runs a warm-up request), then four streamed chat requests one after
another. The first two are the same work, so that their ratio shows what only
a first request pays: the README's schema with its prompt, and the same
schema with every property renamed (a new compile of an automaton as large)
with the prompt reworded from its first word (no prompt prefix shared beyond
the chat template); servers alternate which of the two comes first. Then the
first one again (a compile-cache hit and a prompt-prefix hit) and a smaller
schema (``SECOND_SCHEMA``, the comparison of earlier runs). TTFT is the time
to the first content delta. Reported: each TTFT and the first one over the
second one.

To measure another checkout (``main``, for a before/after table), run this
script with ``PYTHONPATH=<that checkout>`` (the ``leapgen`` processes import
it, the compile worker too), or pass ``--compare <that checkout>``: its
``generate`` pairs then run interleaved with this checkout's, so both see the
same load (wall times on a shared machine drift by seconds between minutes).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "examples" / "schemas" / "order.json"
PROMPT = (ROOT / "examples" / "prompts" / "order.txt").read_text("utf-8").strip()
SECOND_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "age", "city"],
                 "properties": {"name": {"type": "string", "maxLength": 30}, "age": {"type": "integer", "minimum": 0},
                                "city": {"type": "string"}}}
RENAMED_PROMPT = "Please " + PROMPT[0].lower() + PROMPT[1:]
SUMMARY = re.compile(r"\[leapgen\] (\d+) tokens .*compile (\d+) ms")


def leapgen_command() -> list[str]:
    """The ``leapgen`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("leapgen")
    return [str(script)] if script.exists() else [sys.executable, "-m", "leapgen.cli"]


def run_generate(schema: bool, max_tokens: int, env: dict | None = None, cwd: Path = ROOT) -> dict:
    """One new ``leapgen generate`` process (environment ``env``, default this one's; in ``cwd``, the
    checkout's root): wall s, CPU s, compile ms, tokens."""
    cmd = leapgen_command() + ["generate", "--max-tokens", str(max_tokens)]
    if schema:
        cmd += ["--json-schema", str(SCHEMA)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd + [PROMPT], capture_output=True, text=True, cwd=cwd, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    got = SUMMARY.search(proc.stderr)
    return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "compile_ms": int(got.group(2)) if got else None, "tokens": int(got.group(1)) if got else None}


def generate_table(runs: int, max_tokens: list[int], fresh_index: bool, compare: str | None = None,
                   threads: int = 1) -> str:
    """Interleaved generate runs (grammar, baseline, grammar, ...) and their medians; with ``compare``
    (another checkout's root), each run also runs that checkout's pair beside this one's; torch
    with ``threads`` threads in each."""
    if fresh_index:
        root = os.environ.get("LEAPGEN_CACHE") or os.path.expanduser("~/.cache/leapgen")
        shutil.rmtree(Path(root) / "token_index", ignore_errors=True)
    checkouts = _checkouts(compare, threads)
    rows, first = [], None
    for m in max_tokens:
        got = {(c, k): [] for c, _, _ in checkouts for k in (True, False)}
        for r in range(runs):
            # Odd runs reverse both orders: a process that follows another of the same command measured
            # 0.2-0.5 s faster than one that follows another command, so a fixed order biased --compare
            # (the checkout run first looked faster without a grammar and slower with one).
            flip = r % 2 == 1
            for name, env, cwd in (checkouts[::-1] if flip else checkouts):
                for schema in ((False, True) if flip else (True, False)):
                    res = run_generate(schema, m, env, cwd)
                    got[name, schema].append(res)
                    print(f"  {name} max_tokens {m} run {r + 1} {'grammar' if schema else 'baseline'}: {res}",
                          file=sys.stderr)
                    if first is None and schema:
                        first = res
        for name, _, _ in checkouts:
            med = {k: {f: statistics.median(x[f] for x in got[name, k]) for f in ("wall_s", "cpu_s")}
                   for k in (True, False)}
            pairs = {f: statistics.median(g[f] - b[f] for g, b in zip(got[name, True], got[name, False]))
                     for f in ("wall_s", "cpu_s")}  # each grammar run against the baseline run beside it
            compiles = [x["compile_ms"] for x in got[name, True]]
            rows.append(f"| {name} | {m} | {med[False]['wall_s']:.2f} | {med[True]['wall_s']:.2f} | "
                        f"**{1e3 * (med[True]['wall_s'] - med[False]['wall_s']):+.0f}** | "
                        f"**{1e3 * pairs['wall_s']:+.0f}** | {med[False]['cpu_s']:.2f} | "
                        f"{med[True]['cpu_s']:.2f} | **{1e3 * (med[True]['cpu_s'] - med[False]['cpu_s']):+.0f}** | "
                        f"**{1e3 * pairs['cpu_s']:+.0f}** | "
                        f"**{statistics.median(compiles):.0f}** ({', '.join(str(c) for c in compiles)}) | "
                        f"{got[name, False][0]['tokens']} / {got[name, True][0]['tokens']} |")
    head = ("| checkout | max tokens | baseline wall s | grammar wall s | wall difference ms | wall difference, "
            "median of pairs ms | baseline CPU s | grammar CPU s | CPU difference ms | CPU difference, median of "
            "pairs ms | compile ms, median (runs) | tokens baseline / grammar |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    note = ""
    if fresh_index and first is not None:
        note = (f"\n\nFirst constrained run, token index built (not on disk yet): wall {first['wall_s']:.2f} s, "
                f"compile {first['compile_ms']} ms.")
    return head + "\n" + "\n".join(rows) + note


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ttft(port: int, schema: dict, prompt: str = PROMPT) -> float:
    """Seconds from sending a streamed chat request to its first content delta."""
    body = json.dumps({"model": "default", "messages": [{"role": "user", "content": prompt}], "max_tokens": 32,
                       "stream": True, "response_format": {"type": "json_schema",
                                                           "json_schema": {"name": "x", "schema": schema}}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise SystemExit(f"serve answered {resp.status}: {resp.read()[:500]!r}")
    ttft = None
    for line in resp:
        line = line.strip()
        if not line.startswith(b"data:") or line == b"data: [DONE]":
            continue
        delta = json.loads(line[5:])["choices"][0].get("delta", {})
        if ttft is None and delta.get("content"):
            ttft = time.perf_counter() - t
    conn.close()
    return ttft if ttft is not None else float("nan")


#: torch's threads in every process measured (``--threads``): with none set, each process picks its own
#: from the load average it starts under (``leapgen.engine.model_loader.default_num_threads``: 1 or 2 on
#: a 2-core machine, run to run), so two runs of one pair could differ in that too.
THREADS_ENV = "LEAPGEN_NUM_THREADS"


def _checkouts(compare: str | None, threads: int = 1) -> list[tuple[str, dict, Path]]:
    """(name, environment, working directory) of this checkout and, with ``compare``, of that one (on
    PYTHONPATH, and run in its own root: a ``python -m`` child, as an older checkout starts its
    compile worker, imports the leapgen of its working directory); every environment sets torch's
    ``threads`` (:data:`THREADS_ENV`)."""
    base = dict(os.environ, **{THREADS_ENV: str(threads)})
    out: list[tuple[str, dict, Path]] = [("this", base, ROOT)]
    if compare is not None:
        root = Path(compare).resolve()
        out.append((compare, dict(base, PYTHONPATH=str(root)), root))
    return out


def kernels_of(env: dict, cwd: Path) -> str:
    """What the kernels of a new process of that checkout are: the kernel library (compiled ahead of
    time), numba's JIT, or plain Python (``leapgen.automata.jit.MODE``; checkouts before the library have
    numba's JIT)."""
    done = subprocess.run([sys.executable, "-c", "import leapgen.automata.jit as j; print(getattr(j, 'MODE', 'jit'))"],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    mode = done.stdout.strip() or f"unknown ({done.stderr.strip().splitlines()[-1:]})"
    return {"aot": "the kernel library (compiled ahead of time; numba not imported)", "jit": "numba's JIT",
            "python": "plain Python (numba missing)"}.get(mode, mode)


def renamed(schema: Any, suffix: str = "_2") -> Any:
    """``schema`` with every property name (``properties`` and ``required``) ending in ``suffix``."""
    if isinstance(schema, list):
        return [renamed(s, suffix) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {name + suffix: renamed(sub, suffix) for name, sub in value.items()}
        elif key == "required":
            out[key] = [name + suffix for name in value]
        else:
            out[key] = renamed(value, suffix)
    return out


def _serve_ttfts(env: dict | None, cwd: Path, readme_first: bool) -> tuple[float, float, float, float]:
    """A new server's four TTFTs (s): two requests of the same work (the README schema and prompt,
    the renamed schema and reworded prompt; ``readme_first`` says which goes first), the first one
    again, ``SECOND_SCHEMA``."""
    port = _free_port()
    proc = subprocess.Popen(leapgen_command() + ["serve", "--port", str(port)], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("leapgen serve did not come up")
            time.sleep(0.2)
        readme = json.loads(SCHEMA.read_text("utf-8"))
        pair = [(readme, PROMPT), (renamed(readme), RENAMED_PROMPT)]
        first, second = pair if readme_first else pair[::-1]
        return _ttft(port, *first), _ttft(port, *second), _ttft(port, *first), _ttft(port, SECOND_SCHEMA)
    finally:
        proc.terminate()
        proc.wait(30)


def serve_table(runs: int, compare: str | None = None, threads: int = 1) -> str:
    """New servers, four requests each (:func:`_serve_ttfts`, alternating which of the pair goes
    first); with ``compare``, that checkout's server right after each of this one's."""
    checkouts = _checkouts(compare, threads)
    rows, ratios = [], {name: ([], []) for name, _, _ in checkouts}
    for r in range(runs):
        for name, env, cwd in checkouts:
            t1, t2, t3, t4 = _serve_ttfts(env, cwd, readme_first=r % 2 == 0)
            ratios[name][0].append(t1 / t2)
            ratios[name][1].append(t1 / t4)
            rows.append(f"| {name} | {r + 1} | {'README' if r % 2 == 0 else 'renamed'} | {1e3 * t1:.0f} | "
                        f"{1e3 * t2:.0f} | {1e3 * t3:.0f} | {1e3 * t4:.0f} | **{t1 / t2:.2f}** |")
            print(f"  serve run {r + 1}: {rows[-1]}", file=sys.stderr)
    medians = "; ".join(f"{name}: median 1st / 2nd **{statistics.median(a):.2f}** (1st / 4th, the smaller "
                        f"schema: {statistics.median(b):.2f})" for name, (a, b) in ratios.items())
    return ("| checkout | server | first | TTFT 1st ms | TTFT 2nd (same work) ms | TTFT 3rd (1st again) ms | "
            "TTFT 4th (smaller schema) ms | 1st / 2nd |\n"
            "|---|---:|---|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n\n" + medians)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs per mode (interleaved)")
    p.add_argument("--max-tokens", type=int, nargs="+", default=[1, 256], help="generate's --max-tokens values")
    p.add_argument("--fresh-index", action="store_true", help="remove the token index cache before the first run")
    p.add_argument("--compare", metavar="CHECKOUT",
                   help="another checkout's root (e.g. an export of main): its runs interleave with these")
    p.add_argument("--threads", type=int, default=1,
                   help=f"torch's threads in every process measured (${THREADS_ENV}; default 1: the same in both "
                        "modes, whatever the load average)")
    p.add_argument("--no-generate", action="store_true")
    p.add_argument("--no-serve", action="store_true")
    args = p.parse_args(argv)
    if args.threads < 1:
        p.error(f"--threads must be >= 1, got {args.threads}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    # Python's default writes bytecode caches (.pyc) and imports from them; with PYTHONDONTWRITEBYTECODE set
    # every new process compiles each module's source again: ~150 ms more for the grammar's imports here
    print("Python bytecode caches: " + ("off (PYTHONDONTWRITEBYTECODE is set: each process compiles the modules it "
                                        "imports; a default Python writes and reads .pyc files)"
                                        if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"))
    for name, env, cwd in _checkouts(args.compare, args.threads):
        print(f"kernels of {name}: {kernels_of(env, cwd)}")
    if not args.no_generate:
        print("\n#### leapgen generate, new processes (medians of %d interleaved runs)\n" % args.runs)
        print(generate_table(args.runs, args.max_tokens, args.fresh_index, args.compare, args.threads))
    if not args.no_serve:
        print("\n#### leapgen serve: first constrained requests of new servers\n")
        print(serve_table(args.runs, args.compare, args.threads))
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
