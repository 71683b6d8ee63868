"""Soak test of ``leapgen serve`` on loopback: mixed traffic for a set time.

Starts ``leapgen serve`` (or talks to ``--url``), then keeps ``--concurrency``
clients busy for ``--duration`` seconds with a random mix of

- unconstrained chat and text completions, full and streamed;
- constrained ones: JSON Schemas (a few fixed ones, and distinct ones that
  force new compiles), regexes (distinct heavy ones among them: 66 MiB
  grammars that exercise the byte-bounded caches); each complete output is
  checked against its schema (``jsonschema``) or pattern (``regex``), a
  mismatch is a *violation*;
- streams the client cancels after a few chunks, and requests it abandons;
- bad inputs: malformed JSON, bad grammars, wrong types, a lone surrogate, a
  10 MB prompt (413), a wrong model; each must get its 4xx.

Every ``--probe-every`` seconds (and once at the start) the load pauses and a
probe streams a long unconstrained completion; while it streams, 10 MB
prompts are sent beside it (each refused with a 413), and the probe's longest
gap between two chunks in that window is compared with its median gap.

Reports: requests by outcome (ok, expected 4xx, 429, 5xx, transport errors,
*lost*: no complete answer and not cancelled on purpose), violations, the
server's and its compile worker's RSS and the grammar disk cache over time,
and the probes. The run is bounded (``--duration``, ``--max-requests``, a
timeout per request) and stops the server at the end (SIGTERM), checking that
its temporary disk cache is gone.

    python benchmarks/soak.py --duration 1800 --concurrency 8 --out benchmarks/results/soak.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                      "age": {"type": "integer", "minimum": 0, "maximum": 120}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
     "required": ["city", "tags"], "additionalProperties": False},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 1, "maxItems": 4},
]
REGEXES = [r"(yes|no)", r"[0-9]{3}-[0-9]{4}", r"[a-z]{2,8}@[a-z]{3,6}\.(com|org)", r"(19|20)[0-9]{2}-[01][0-9]"]
HEAVY = "h{}:(m|n)*m(m|n){{15}}"
PROMPTS = ["Describe a person as JSON.", "Give me a phone number.", "Name a city and some tags.",
           "Write a short sentence about the sea.", "List a few digits.", "Is the sky blue?"]
MB10 = 10 * 1000 * 1000


class Tally:
    """Outcomes, violations and samples of one run."""

    def __init__(self) -> None:
        self.outcomes: Counter = Counter()
        self.kinds: Counter = Counter()
        self.errors: list[str] = []
        self.violations: list[str] = []
        self.samples: list[dict] = []
        self.probes: list[dict] = []
        self.latencies: list[float] = []
        self.checked = 0

    def add(self, kind: str, outcome: str, detail: str = "") -> None:
        self.kinds[kind] += 1
        self.outcomes[outcome] += 1
        if outcome in ("5xx", "lost", "transport", "unexpected", "client_error") and len(self.errors) < 50:
            self.errors.append(f"{kind}: {outcome}: {detail[:300]}")


def _violates(text: str, grammar: dict) -> str | None:
    """Why ``text`` breaks its grammar (None if it holds)."""
    if "json_schema" in grammar:
        import jsonschema

        try:
            jsonschema.validate(json.loads(text), grammar["json_schema"])
        except (ValueError, jsonschema.ValidationError) as exc:
            return f"{text!r}: {str(exc)[:120]}"
    elif "regex" in grammar:
        import regex

        if regex.fullmatch(grammar["regex"], text) is None:
            return f"{text!r} !~ {grammar['regex']}"
    return None


def _grammar(rng: random.Random, n: int) -> dict:
    roll = rng.random()
    if roll < 0.35:
        return {"json_schema": rng.choice(SCHEMAS)}
    if roll < 0.55:  # a distinct schema: a new compile
        return {"json_schema": {"type": "object", "properties": {f"k{n}": {"type": "integer"}},
                                "required": [f"k{n}"], "additionalProperties": False}}
    if roll < 0.9:
        return {"regex": rng.choice(REGEXES)}
    return {"regex": HEAVY.format(n)}


def _bad_request(rng: random.Random) -> tuple[str, str | bytes | dict, int]:
    """(path, body, expected status) of one bad input."""
    return rng.choice([
        ("/v1/chat/completions", b'{"messages": [', 400),
        ("/v1/completions", {"prompt": "x", "regex": "a(b"}, 400),
        ("/v1/completions", {"prompt": "x", "json_schema": {"type": "objec"}}, 400),
        ("/v1/completions", {"prompt": "x", "max_tokens": "many"}, 400),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "\ud800"}]}, 400),
        ("/v1/completions", {"prompt": "x", "model": "gpt-17"}, 404),
        ("/v1/completions", {"prompt": "x" * MB10}, 413),
    ])


async def _post(client: httpx.AsyncClient, path: str, body, timeout: float) -> httpx.Response:
    """POST raw bytes, or a dict as ASCII JSON (a lone surrogate goes as its \\u escape)."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await client.post(path, content=content, headers={"content-type": "application/json"}, timeout=timeout)


async def _one(client: httpx.AsyncClient, rng: random.Random, n: int, tally: Tally, args) -> None:
    roll = rng.random()
    start = time.perf_counter()
    if roll < 0.1:
        path, body, expected = _bad_request(rng)
        try:
            r = await _post(client, path, body, args.timeout)
        except httpx.TimeoutException as exc:
            tally.add("bad", "lost", repr(exc))
            return
        except httpx.HTTPError as exc:
            tally.add("bad", "transport", repr(exc))
            return
        outcome = "expected_4xx" if r.status_code == expected else "5xx" if r.status_code >= 500 else "unexpected"
        tally.add("bad", outcome, f"{path} -> {r.status_code}, wanted {expected}: {r.text[:200]}")
        return
    constrained = roll < 0.6
    grammar = _grammar(rng, n) if constrained else {}
    chat = rng.random() < 0.6
    stream = rng.random() < 0.4
    cancel = stream and rng.random() < 0.25
    abandon = not stream and rng.random() < 0.05
    body = {"model": "default", "max_tokens": rng.choice((16, 32, 48)), "temperature": rng.choice((0.0, 0.7, 1.0)),
            "seed": rng.randrange(1 << 30), "stream": stream, **grammar}
    if chat:
        path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": rng.choice(PROMPTS)}]
    else:
        path, body["prompt"] = "/v1/completions", rng.choice(PROMPTS)
    kind = ("constrained" if constrained else "plain") + ("-stream" if stream else "") + ("-cancel" if cancel else "")
    try:
        if stream:
            text, finish, status, detail = await _stream(client, path, body, chat, cancel, args.timeout)
        elif abandon:
            try:
                await client.post(path, json=body, timeout=0.3)
            except httpx.TimeoutException:
                pass
            tally.add("abandoned", "abandoned")
            return
        else:
            r = await client.post(path, json=body, timeout=args.timeout)
            status, detail = r.status_code, r.text[:200]
            text = finish = None
            if status == 200:
                choice = r.json()["choices"][0]
                text = choice["message"]["content"] if chat else choice["text"]
                finish = choice["finish_reason"]
    except httpx.TimeoutException as exc:
        tally.add(kind, "lost", f"{path}: {exc!r}")
        return
    except httpx.HTTPError as exc:
        tally.add(kind, "transport", f"{path}: {exc!r}")
        return
    if status == 429:
        tally.add(kind, "429")
        await asyncio.sleep(1.0)  # Retry-After
        return
    if status >= 500:
        tally.add(kind, "5xx", f"{status}: {detail}")
        return
    if status != 200:
        tally.add(kind, "unexpected", f"{status}: {detail}")
        return
    if cancel:
        tally.add(kind, "cancelled")
        return
    if finish is None:
        tally.add(kind, "lost", f"{path}: the answer ended without a finish reason: {detail}")
        return
    tally.latencies.append(time.perf_counter() - start)
    if constrained and finish == "stop":
        tally.checked += 1
        why = _violates(text, grammar)
        if why is not None:
            tally.violations.append(f"{kind}: {why}")
    tally.add(kind, "ok")


async def _stream(client, path, body, chat, cancel, timeout):
    """Stream one completion: (text, finish reason or None, status, detail)."""
    pieces, finish, chunks = [], None, 0
    async with client.stream("POST", path, json=body, timeout=timeout) as r:
        if r.status_code != 200:
            return None, None, r.status_code, (await r.aread()).decode(errors="replace")[:200]
        done = False
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            event = json.loads(data)
            if "error" in event:
                return None, None, 500, data[:200]
            chunks += 1
            if cancel and chunks >= 3:
                return None, None, 200, "cancelled"
            for choice in event.get("choices", []):
                delta = choice.get("delta", {}).get("content") if chat else choice.get("text")
                pieces.append(delta or "")
                finish = choice.get("finish_reason") or finish
        if not done:
            return None, None, 200, "the stream ended without [DONE]"
    return "".join(pieces), finish, 200, ""


async def _probe(url: str, tally: Tally, args) -> None:
    """One gap probe: a long stream, with 10 MB prompts refused beside it."""
    body = {"model": "default", "prompt": "Once upon a time", "max_tokens": args.probe_tokens, "temperature": 0.8,
            "seed": 1, "stream": True}
    stamps: list[float] = []
    window: list[float] = []
    big = json.dumps({"prompt": "x" * MB10}).encode()
    refusals: list[int] = []
    async with httpx.AsyncClient(base_url=url, headers=args.headers) as client:
        async def bigs():
            while len(stamps) < 15:
                await asyncio.sleep(0.05)
            window.append(time.perf_counter())
            for _ in range(3):
                r = await client.post("/v1/completions", content=big, timeout=args.timeout,
                                      headers={"content-type": "application/json"})
                refusals.append(r.status_code)
            window.append(time.perf_counter())

        async def probe():
            async with client.stream("POST", "/v1/completions", json=body, timeout=args.timeout) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        stamps.append(time.perf_counter())

        await asyncio.gather(probe(), bigs())
    gaps = [(b - a, b) for a, b in zip(stamps, stamps[1:])]
    if len(gaps) < 20 or len(window) < 2:
        tally.probes.append({"error": f"too short a probe ({len(gaps)} gaps)"})
        return
    median = statistics.median(g for g, _ in gaps)
    # gaps that overlap the window of the refusals (a gap ending after it started and starting before it ended)
    inside = [g for g, end in gaps if end >= window[0] and end - g <= window[1]]
    worst = max(inside) if inside else 0.0
    tally.probes.append({"median_gap_ms": round(median * 1e3, 1), "max_gap_ms_beside_10mb": round(worst * 1e3, 1),
                         "ratio": round(worst / median, 2) if median else None, "refusals": refusals,
                         "window_ms": round((window[1] - window[0]) * 1e3, 1), "chunks": len(stamps)})


def _rss_mib(pid: int | None) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, TypeError):
        return None
    return None


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(p) for p in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def _disk_mib(tmp: Path | None) -> float | None:
    if tmp is None:
        return None
    return round(sum(p.stat().st_size for p in tmp.glob("leapgen-grammars-*/*.npz") if p.exists()) / 2**20, 2)


async def _sampler(url, server_pid, tmp, tally, args, stop: asyncio.Event, t0: float) -> None:
    async with httpx.AsyncClient(base_url=url, headers=args.headers) as client:
        while not stop.is_set():
            worker = (_children(server_pid) or [None])[0] if server_pid else None
            sample = {"t_s": round(time.perf_counter() - t0), "server_rss_mib": _rss_mib(server_pid),
                      "worker_rss_mib": _rss_mib(worker), "disk_mib": _disk_mib(tmp),
                      "requests": sum(tally.outcomes.values())}
            try:
                text = (await client.get("/metrics", timeout=30)).text
                for line in text.splitlines():
                    if line.startswith(("leapgen_queued_requests ", "leapgen_running_requests ")):
                        name, value = line.split()
                        sample[name.removeprefix("leapgen_")] = float(value)
            except httpx.HTTPError:
                pass
            tally.samples.append(sample)
            try:
                await asyncio.wait_for(stop.wait(), args.sample_every)
            except asyncio.TimeoutError:
                pass


async def _run(url: str, server_pid: int | None, tmp: Path | None, args) -> Tally:
    tally = Tally()
    rng = random.Random(args.seed)
    stop, resume = asyncio.Event(), asyncio.Event()
    resume.set()
    t0 = time.perf_counter()
    deadline = t0 + args.duration
    counter = iter(range(args.max_requests))
    active = [0]

    async def client_loop(i: int) -> None:
        local = random.Random(rng.random())
        async with httpx.AsyncClient(base_url=url, headers=args.headers) as client:
            while time.perf_counter() < deadline:
                await resume.wait()
                n = next(counter, None)
                if n is None:
                    return
                active[0] += 1
                try:
                    await _one(client, local, n, tally, args)
                except Exception as exc:  # noqa: BLE001 - a client-side bug is reported, the soak goes on
                    tally.add("client", "client_error", repr(exc))
                finally:
                    active[0] -= 1

    async def prober() -> None:
        next_probe = t0
        while time.perf_counter() < deadline - 30:
            if time.perf_counter() >= next_probe:
                resume.clear()
                while active[0]:  # let the running requests finish: the probe's gaps are its own
                    await asyncio.sleep(0.1)
                try:
                    await _probe(url, tally, args)
                finally:
                    resume.set()
                next_probe = time.perf_counter() + args.probe_every
            await asyncio.sleep(1.0)

    sampler = asyncio.ensure_future(_sampler(url, server_pid, tmp, tally, args, stop, t0))
    await asyncio.gather(prober(), *(client_loop(i) for i in range(args.concurrency)))
    stop.set()
    await sampler
    return tally


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args, tmp: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = dict(os.environ, TMPDIR=str(tmp))
    cmd = [sys.executable, "-m", "leapgen.cli", "serve", "--port", str(port), "--disable-log-requests",
           *args.serve_args]
    log = open(tmp / "server.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: see {tmp / 'server.log'}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("the server did not start")


def _report(tally: Tally, args, stopped: dict) -> dict:
    o = tally.outcomes
    sent = sum(o.values())
    samples = tally.samples
    probes = [p for p in tally.probes if "ratio" in p]
    summary = {"duration_s": args.duration, "concurrency": args.concurrency, "requests": sent,
               "outcomes": dict(o), "kinds": dict(tally.kinds), "lost": o.get("lost", 0), "5xx": o.get("5xx", 0),
               "transport_errors": o.get("transport", 0), "unexpected": o.get("unexpected", 0),
               "violations": len(tally.violations), "checked_outputs": tally.checked,
               "violation_examples": tally.violations[:10],
               "error_examples": tally.errors[:20], "probes": tally.probes,
               "worst_probe_ratio": max((p["ratio"] for p in probes), default=None),
               "latency_p50_s": round(statistics.median(tally.latencies), 2) if tally.latencies else None,
               "samples": samples, "stop": stopped, "load_average_at_end": os.getloadavg()}
    print(f"\n## Soak: {args.duration} s, {args.concurrency} clients, {sent} requests")
    print("\n| outcome | requests |\n|---|---:|")
    for name, count in sorted(o.items()):
        print(f"| {name} | {count} |")
    print(f"\nlost {summary['lost']}, 5xx {summary['5xx']}, transport errors {summary['transport_errors']}, "
          f"unexpected statuses {summary['unexpected']}, violations {summary['violations']} "
          f"(of {tally.checked} complete constrained outputs checked)")
    for e in tally.errors[:10] + tally.violations[:10]:
        print("  -", e)
    print("\n| t (s) | requests | server RSS MiB | worker RSS MiB | disk MiB | queued | running |\n|---:|---:|---:|---:|---:|---:|---:|")
    step = max(1, len(samples) // 30)
    for s in samples[::step] + ([samples[-1]] if samples and (len(samples) - 1) % step else []):
        print(f"| {s['t_s']} | {s['requests']} | {s['server_rss_mib']} | {s['worker_rss_mib']} | {s['disk_mib']} | "
              f"{s.get('queued_requests', '')} | {s.get('running_requests', '')} |")
    print("\n| probe | median gap ms | longest gap beside 10 MB ms | ratio | 10 MB answers | window ms |\n|---:|---:|---:|---:|---|---:|")
    for i, p in enumerate(tally.probes):
        if "ratio" in p:
            print(f"| {i} | {p['median_gap_ms']} | {p['max_gap_ms_beside_10mb']} | {p['ratio']} | {p['refusals']} | "
                  f"{p['window_ms']} |")
        else:
            print(f"| {i} | {p['error']} | | | | |")
    print(f"\nserver stop: {stopped}; load average at the end {summary['load_average_at_end']}")
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of traffic")
    parser.add_argument("--concurrency", type=int, default=8, help="clients sending at once")
    parser.add_argument("--max-requests", type=int, default=200_000, help="bound on requests sent")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before a request counts as lost")
    parser.add_argument("--probe-every", type=float, default=300.0, help="seconds between gap probes")
    parser.add_argument("--probe-tokens", type=int, default=160, help="tokens the probe streams")
    parser.add_argument("--sample-every", type=float, default=30.0, help="seconds between RSS/disk samples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--url", default=None, help="a running server (default: start one on a free port)")
    parser.add_argument("--api-key", default=None, help="the server's API key, if any")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    parser.add_argument("serve_args", nargs="*", help="more `leapgen serve` flags (after --)")
    args = parser.parse_args(argv)
    args.headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    tmp = proc = None
    stopped: dict = {}
    if args.url is None:
        tmp = Path(tempfile.mkdtemp(prefix="leapgen-soak-"))
        proc, url = start_server(args, tmp)
    else:
        url = args.url
    try:
        tally = asyncio.run(_run(url, proc.pid if proc else None, tmp, args))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                stopped["exit_code"] = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                stopped["exit_code"] = "killed after 60 s"
            stopped["grammar_folders_left"] = [str(p) for p in tmp.glob("leapgen-grammars-*")]
            stopped["server_log"] = str(tmp / "server.log")
    summary = _report(tally, args, stopped)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(summary, indent=1))
    bad = summary["lost"] or summary["5xx"] or summary["violations"] or summary["transport_errors"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
