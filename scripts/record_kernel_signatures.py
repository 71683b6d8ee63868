"""Merge recorded kernel signatures into leapgen/automata/kernel_signatures.txt (the kernel library's list).

Record them by running any workload in numba's JIT mode with a file to append to, e.g. the tests:

    LEAPGEN_KERNELS=jit LEAPGEN_RECORD_KERNEL_SIGNATURES=/tmp/sigs.txt .venv/bin/python -m pytest -q
    .venv/bin/python scripts/record_kernel_signatures.py /tmp/sigs.txt
    .venv/bin/python -m leapgen.automata.aot_build

Each line is checked against the notation (leapgen.automata.kernel_types); the list is kept sorted and
free of duplicates, and what it held before is kept unless --replace is given. A signature that another of
the same kernel takes all of (kernel_types.takes_all_of: read-only for writable arrays, int64 for narrower
integers) is left out: the library's wrapper tries a kernel's signatures in turn, and each miss costs an
exception.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leapgen.automata.aot import SIGNATURES, signature_lines  # noqa: E402
from leapgen.automata.kernel_types import parse_signature, takes_all_of  # noqa: E402

HEADER = """\
# The signatures leapgen's kernel library is compiled for (python -m leapgen.automata.aot_build), one
# 'module:qualname(argument types) -> return type' line each, in leapgen.automata.kernel_types' notation.
# Written by scripts/record_kernel_signatures.py from what numba compiled in recorded runs; a call of a
# kernel with other argument types switches that process to numba's JIT (same results, a warning).
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="+", type=Path, help="files written by LEAPGEN_RECORD_KERNEL_SIGNATURES")
    parser.add_argument("--replace", action="store_true", help="drop the lines the list holds now")
    options = parser.parse_args()
    lines = set() if options.replace or not SIGNATURES.exists() else set(signature_lines())
    for record in options.records:
        lines.update(signature_lines(record))
    parsed = {line: parse_signature(line) for line in lines}
    lines = {line for line, (kernel, args, _) in parsed.items()
             if not any(other != line and parsed[other][0] == kernel and takes_all_of(parsed[other][1], args)
                        for other in lines)}
    SIGNATURES.write_text(HEADER + "".join(line + "\n" for line in sorted(lines)), encoding="utf-8")
    print(f"{SIGNATURES}: {len(lines)} signatures of {len({parse_signature(x)[0] for x in lines})} kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
