"""Where TBM time goes by string-length bound: schemas whose strings leapgen writes as block calls.

Usage (from the repository root; OUT is a ``bench_masks.py --out`` file)::

    python benchmarks/report_lengths.py OUT

leapgen counts a ``minLength``/``maxLength`` up to ``MAX_EXACT_LENGTH`` in the
regular automaton; beyond it the string is a run of calls of one block rule
(:mod:`leapgen.grammar.json.lengths`), so the grammar is context-free. This
script splits each backend's summed TBM time, on the JSONSchemaBench grammars
that every backend walked (the same tokens), into the schemas with such a
bound somewhere and the rest, per half of the split. Reads the schemas from
``../shared/corpora`` (``workloads.jsonschemabench_grammars``); measures nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import bench_masks  # noqa: E402
import report  # noqa: E402
import workloads  # noqa: E402
from leapgen.grammar.json.lengths import MAX_EXACT_LENGTH  # noqa: E402


def has_long_length(node) -> bool:
    """Whether a schema (parsed JSON) holds a ``minLength``/``maxLength`` integer above MAX_EXACT_LENGTH."""
    if isinstance(node, list):
        return any(has_long_length(n) for n in node)
    if not isinstance(node, dict):
        return False
    for key, value in node.items():
        if key in ("minLength", "maxLength") and isinstance(value, int) and value > MAX_EXACT_LENGTH:
            return True
        if has_long_length(value):
            return True
    return False


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit(__doc__)
    results, grammars, _ = bench_masks.load_saved(argv[0])
    sources = {g.name: g.source for g in workloads.jsonschemabench_grammars(None)}
    backends = list(results)
    walked = [i for i, g in enumerate(grammars) if g.group == "jsb" and g.name in sources
              and all(results[b]["grammars"].get(i, {}).get("tbm_ns") for b in backends)]
    long_ = {i for i in walked if has_long_length(json.loads(sources[grammars[i].name]))}
    rows = []
    for half in (*workloads.HALVES, None):
        keep = [i for i in walked if half is None or grammars[i].half == half]
        n_long = sum(i in long_ for i in keep)
        for b in backends:
            ms = {i: sum(sum(x) for x in results[b]["grammars"][i]["tbm_ns"]) / 1e6 for i in keep}
            total, in_long = sum(ms.values()), sum(v for i, v in ms.items() if i in long_)
            rows.append([half or "both", f"{len(keep):,} ({n_long} long)", b, f"{total:,.0f}",
                         f"{in_long:,.0f} ({100 * in_long / max(total, 1e-9):.0f} %)", f"{total - in_long:,.0f}"])
    print(report._table(["half", "schemas walked by all (with a length > %d)" % MAX_EXACT_LENGTH, "backend",
                         "TBM time ms", "in the long-length schemas", "in the others"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
