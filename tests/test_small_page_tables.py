"""The compile's big transition tables are advised onto small pages (leapgen.automata.tables).

numpy advises transparent huge pages for every array of 4 MiB or more; the tables a compile writes
once are advised back to small pages before their first touch (see the module's docstring for why).
The advice shows in the ``VmFlags`` of the table's mapping in ``/proc/self/smaps``: ``nh``
(``MADV_NOHUGEPAGE``) where ``hg`` (``MADV_HUGEPAGE``) would be numpy's.
"""

from __future__ import annotations

import mmap
import os
import sys

import numpy as np
import pytest

from leapgen.automata.tables import MIN_ADVISED_BYTES, empty_table, full_table

#: madvise(MADV_NOHUGEPAGE) sets a mapping's flag only on a Linux kernel built with transparent huge pages.
LINUX_ADVICE = (sys.platform.startswith("linux") and hasattr(mmap, "MADV_NOHUGEPAGE")
                and os.path.isdir("/sys/kernel/mm/transparent_hugepage"))
NO_ADVICE = "needs Linux with transparent huge pages (madvise(MADV_NOHUGEPAGE) has nothing to set here)"


def _vm_flags(address: int) -> list[str]:
    """The ``VmFlags`` of the mapping of this process that holds ``address``."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("VmFlags:"):
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def _middle(table: np.ndarray) -> int:
    return table.ctypes.data + table.nbytes // 2


def test_the_tables_hold_what_numpy_would():
    table = full_table((1 << 21,), -1, np.int32)
    assert table.dtype == np.int32 and table.shape == (1 << 21,) and table.flags.c_contiguous
    assert table.flags.writeable and (table == -1).all()
    small = full_table((3, 260), 7, np.int32)
    assert small.shape == (3, 260) and (small == 7).all()
    assert empty_table((5, 4), np.int32).shape == (5, 4)


@pytest.mark.skipif(not LINUX_ADVICE, reason=NO_ADVICE)
def test_a_big_table_is_advised_onto_small_pages_before_it_is_written():
    table = full_table((MIN_ADVISED_BYTES // 4 * 2,), -1, np.int32)
    assert "nh" in _vm_flags(_middle(table))
    assert "hg" not in _vm_flags(_middle(table))


@pytest.mark.skipif(not LINUX_ADVICE, reason=NO_ADVICE)
def test_a_pushdown_automatons_tables_are_on_small_pages():
    """A rule of ~5,100 states (a string of up to 255 characters): its automaton widened with the call
    columns and the pushdown automaton's global byte table are both over 4 MiB, and both advised."""
    from leapgen.automata.dfa import compile_dfa
    from leapgen.automata.pda import Pda
    from leapgen.grammar import ir
    from leapgen.grammar.json.strings import quoted, string_content

    names = ["root", "text"]
    ids = {n: i for i, n in enumerate(names)}
    bodies = [ir.seq(ir.lit("["), ir.alt(ir.EMPTY, ir.RuleRef("root")), ir.RuleRef("text"), ir.lit("]")),
              quoted(string_content(0, 255))]
    dfas = [compile_dfa(body, max_states=100_000, rule_ids=ids) for body in bodies]
    assert dfas[1].trans.nbytes >= MIN_ADVISED_BYTES
    assert "nh" in _vm_flags(_middle(dfas[1].trans))
    pda = Pda.from_rule_dfas(names, dfas)
    assert pda.trans_flat.nbytes >= MIN_ADVISED_BYTES
    assert "nh" in _vm_flags(_middle(pda.trans_flat))


@pytest.mark.skipif(not LINUX_ADVICE, reason=NO_ADVICE)
def test_a_counted_automatons_tables_are_on_small_pages():
    """The README's schema (two counted string lengths, 5,027 states): the counted automaton's byte
    table and its flattened table are each over 4 MiB, and both advised."""
    from pathlib import Path

    from leapgen.automata.counted import CountedDfa
    from leapgen.automata.dfa import compile_counted_dfa
    from leapgen.grammar.json.schema import json_schema_to_ir

    schema = (Path(__file__).resolve().parents[1] / "examples" / "schemas" / "order.json").read_text("utf-8")
    node, _ = json_schema_to_ir(schema, count_lengths=True)
    dfa, bounds = compile_counted_dfa(node, max_states=100_000)
    counted = CountedDfa(dfa, bounds)
    for table in (counted.byte_trans, counted.flat_trans):
        assert table.nbytes >= MIN_ADVISED_BYTES
        assert "nh" in _vm_flags(_middle(table))
