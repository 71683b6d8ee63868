"""xgrammar's own test suite run on ``leapgen.xgrammar`` with only names mapped.

The measurement behind issue 20 ("run through xgrammar's own test suite with
only names mapped, about a quarter of the engine-facing contract fails"). The
tests are xgrammar's ``tests/python`` (not shipped in its wheel: pass a
checkout's folder). The script copies them twice under ``--out``:

- ``oracle/``: unchanged, run on the installed ``xgrammar``;
- ``mapped/``: ``import xgrammar as xgr`` -> ``import leapgen.xgrammar as xgr``,
  ``from xgrammar[.sub] import`` -> ``from leapgen.xgrammar[.sub] import``,
  ``xgrammar.testing`` -> ``xgrammar_testing_shim`` (its helpers rebuilt on the
  public API; helpers reading xgrammar internals raise NotImplementedError);
  ``_BYTE_LEVEL_CHARSET`` (a data constant) still comes from xgrammar.

Both run offline (``HF_HUB_OFFLINE=1``: tests that download a tokenizer fail on
both sides and are left out). It prints, per file, the tests that pass on
xgrammar and how many of those pass on leapgen.xgrammar, then the commonest
failure reasons per file.

    python benchmarks/xgrammar_suite.py --tests ~/xgrammar/tests/python [--out /tmp/xgr_suite] [--files test_temperature.py,...]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
_REWRITES = [
    (re.compile(r"^import xgrammar as xgr\b", re.M), "import leapgen.xgrammar as xgr"),
    (re.compile(r"^from xgrammar\.tokenizer_info import _BYTE_LEVEL_CHARSET", re.M),
     "from xgrammar.tokenizer_info import _BYTE_LEVEL_CHARSET  # data, kept"),
    (re.compile(r"^from xgrammar\.testing import", re.M), "from xgrammar_testing_shim import"),
    (re.compile(r"^from xgrammar import", re.M), "from leapgen.xgrammar import"),
    (re.compile(r"^from xgrammar\.matcher import", re.M), "from leapgen.xgrammar import"),
    (re.compile(r"^from xgrammar\.(?!tokenizer_info import _BYTE)([a-z_]+) import", re.M), r"from leapgen.xgrammar.\1 import"),
    (re.compile(r"\bxgr\.testing\."), "xgrammar_testing_shim."),
]


def map_source(text: str) -> str:
    """``text`` (one test file) with xgrammar's names mapped to leapgen.xgrammar's."""
    for pattern, repl in _REWRITES:
        text = pattern.sub(repl, text)
    if "xgrammar_testing_shim." in text:
        text = "import xgrammar_testing_shim\n" + text
    return text


def run(folder: Path, xml: Path, files: list[str], timeout: int) -> None:
    """pytest on ``folder`` (offline, test_pressure.py left out), results to ``xml``."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    targets = [str(folder / f) for f in files] if files else [str(folder)]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors",
           f"--junitxml={xml}", f"--ignore={folder / 'test_pressure.py'}", *targets]
    try:
        import pytest_timeout  # noqa: F401

        cmd[4:4] = ["--timeout", str(timeout)]
    except ImportError:
        pass
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def outcomes(xml: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """(file, test) -> ("pass" | "fail" | "skip", first ``E`` line of the failure)."""
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        bad = [c for c in case if c.tag in ("failure", "error")]
        status = "skip" if any(c.tag == "skipped" for c in case) else "fail" if bad else "pass"
        reason = ""
        if bad:
            text = (bad[0].get("message") or "") + "\n" + (bad[0].text or "")
            e_lines = [line for line in text.split("\n") if line.startswith("E ")]
            reason = re.sub(r"'[^']*'", "'…'", (e_lines[0] if e_lines else text.split("\n")[0]).strip())[:110]
        out[(case.get("classname").split(".")[-1], case.get("name"))] = (status, reason)
    return out


def report(oracle: dict, mapped: dict, reasons: int) -> None:
    """Print the per-file table and the commonest failure reasons."""
    rows = collections.defaultdict(lambda: [0, 0, 0])
    why = collections.defaultdict(collections.Counter)
    for key, (status, _) in oracle.items():
        if status != "pass":
            rows[key[0]][2] += 1
            continue
        rows[key[0]][0] += 1
        got, reason = mapped.get(key, ("missing", "not collected"))
        if got == "pass":
            rows[key[0]][1] += 1
        else:
            why[key[0]][reason] += 1
    print("| file | pass on xgrammar | of those, pass on leapgen.xgrammar | not passing on xgrammar (offline) |")
    print("|---|---:|---:|---:|")
    total = [0, 0, 0]
    for name in sorted(rows):
        r = rows[name]
        total = [a + b for a, b in zip(total, r)]
        print(f"| {name} | {r[0]} | {r[1]} | {r[2]} |")
    share = 100 * total[1] / max(total[0], 1)
    print(f"| **total** | {total[0]} | {total[1]} ({share:.0f} %) | {total[2]} |")
    for name in sorted(why):
        print(f"\n{name}:")
        for reason, n in why[name].most_common(reasons):
            print(f"  {n:4d}  {reason}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tests", type=Path, required=True, help="xgrammar's tests/python folder")
    ap.add_argument("--out", type=Path, default=Path("/tmp/xgrammar_suite"))
    ap.add_argument("--files", default="", help="comma list of test files (default: all)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per test (with pytest-timeout)")
    ap.add_argument("--reasons", type=int, default=4, help="failure reasons shown per file")
    args = ap.parse_args()
    files = [f for f in args.files.split(",") if f]
    shutil.rmtree(args.out, ignore_errors=True)
    oracle_dir, mapped_dir = args.out / "oracle", args.out / "mapped"
    shutil.copytree(args.tests, oracle_dir)
    shutil.copytree(args.tests, mapped_dir)
    for path in mapped_dir.glob("*.py"):
        path.write_text(map_source(path.read_text()))
    run(oracle_dir, args.out / "oracle.xml", files, args.timeout)
    run(mapped_dir, args.out / "mapped.xml", files, args.timeout)
    report(outcomes(args.out / "oracle.xml"), outcomes(args.out / "mapped.xml"), args.reasons)


if __name__ == "__main__":
    main()
