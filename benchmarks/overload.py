"""Overload of ``leapgen serve``: a burst of concurrent requests past its queue.

Starts ``leapgen serve`` with its defaults (``--max-running 16``,
``--max-queued-requests 256``; more flags after ``--``) on a free loopback
port, sends ``--requests`` short completions at once, and prints their
answers by status and ``Retry-After`` with latencies, the refusals
``/metrics`` counted, and the server's RSS before and at its peak. Past the
queue a request must get 429 with ``Retry-After`` at once, every other one
its 200; a 5xx or a transport error exits 1.

    python benchmarks/overload.py --requests 300
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from soak import start_server


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


async def _one(client: httpx.AsyncClient, url: str, i: int, max_tokens: int) -> tuple:
    t = time.perf_counter()
    try:
        r = await client.post(url + "/v1/completions", timeout=900, json={
            "model": "default", "prompt": f"Item {i}:", "max_tokens": max_tokens, "temperature": 0})
        return r.status_code, r.headers.get("retry-after"), time.perf_counter() - t
    except httpx.HTTPError as exc:
        return type(exc).__name__, None, time.perf_counter() - t


async def _burst(url: str, n: int, max_tokens: int) -> tuple[list, float, str]:
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with httpx.AsyncClient(limits=limits) as client:
        t = time.perf_counter()
        answers = await asyncio.gather(*[_one(client, url, i, max_tokens) for i in range(n)])
        wall = time.perf_counter() - t
        metrics = (await client.get(url + "/metrics")).text
    return answers, wall, metrics


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="requests sent at once")
    parser.add_argument("--max-tokens", type=int, default=8, help="max_tokens of each")
    parser.add_argument("serve_args", nargs="*", help="more `leapgen serve` flags (after --)")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="leapgen-overload-"))
    proc, url = start_server(args, tmp)
    try:
        rss_before = _status_kib(proc.pid, "VmRSS") / 1024
        answers, wall, metrics = asyncio.run(_burst(url, args.requests, args.max_tokens))
        rss_peak = _status_kib(proc.pid, "VmHWM") / 1024
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    groups = collections.defaultdict(list)
    for status, retry_after, seconds in answers:
        groups[(str(status), retry_after or "-")].append(seconds)
    print(f"{args.requests} requests at once (max_tokens {args.max_tokens}), wall {wall:.1f} s; "
          f"server RSS {rss_before:,.0f} MiB before, {rss_peak:,.0f} MiB at its peak")
    print("| status | Retry-After | requests | median s | max s |\n|---|---|---:|---:|---:|")
    for (status, retry_after), seconds in sorted(groups.items()):
        print(f"| {status} | {retry_after} | {len(seconds)} | {statistics.median(seconds):.2f} | {max(seconds):.2f} |")
    print("/metrics:", ", ".join(line for line in metrics.splitlines()
                                 if line.startswith(("leapgen_http_refusals_total", "leapgen_queued_requests"))))
    bad = [s for s, _, _ in answers if not (isinstance(s, int) and s in (200, 429))]
    if bad:
        print(f"unexpected answers: {collections.Counter(map(str, bad))}; the server's log: {tmp / 'server.log'}")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
