"""Big transition tables allocated without transparent huge pages.

One responsibility: :func:`empty_table` and :func:`full_table`, numpy's ``empty`` and ``full`` for
the tables a compile writes once, right after allocating them, and then reads.

numpy asks Linux for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every array of 4 MiB or
more (``NUMPY_MADVISE_HUGEPAGE``, numpy's documented default). A context-free grammar's global byte
table (:attr:`Pda.trans_flat <leapgen.automata.pda.Pda.trans_flat>`, 1 KiB a state: 10-50 MiB for
the JSONSchemaBench schemas that compile slowest) and a rule's automaton widened with its call
columns are such arrays. They are new memory whose first touch the operating system pays, and a
huge page's first touch can cost far more than the 512 small pages it replaces: allocating one
means finding 2 MiB of contiguous physical memory (compaction, where the system's memory is
fragmented), and in a virtual machine that hands freed memory back to its host, backing it anew.
On this project's benchmark machine (a 2-core VM) touching 8 GiB of new memory took 47 s with
huge pages and 5 s without. With the compile's tables on small pages, the TTFM p99 of 400
JSONSchemaBench schemas fell 7-29 % in five alternating rounds while the memory was new to the VM,
and did not move once it had been used; TBM did not move beyond the noise (``benchmarks/README.md``,
stop 46).

The advice is per allocation (``madvise(MADV_NOHUGEPAGE)`` on the table's pages, before they are
touched): numpy's setting stays as the process has it, for every other array. Elsewhere than Linux,
or where the call fails, the table is numpy's.
"""

from __future__ import annotations

import ctypes
import mmap
import sys

import numpy as np

#: numpy's own threshold for its huge-page advice: smaller arrays are left alone.
MIN_ADVISED_BYTES = 4 << 20

_MADV_NOHUGEPAGE = getattr(mmap, "MADV_NOHUGEPAGE", None)


def _libc_madvise():
    if not sys.platform.startswith("linux") or _MADV_NOHUGEPAGE is None:
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):  # pragma: no cover - a libc without madvise
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


_madvise = _libc_madvise()


def small_pages(table: np.ndarray) -> np.ndarray:
    """Advise the kernel to back ``table``'s whole pages with small pages (no transparent huge pages),
    where it holds at least :data:`MIN_ADVISED_BYTES`; a no-op elsewhere than Linux or where the call
    fails. Call it before the table is written: pages already touched keep what they have.

    Parameters
    ----------
    table : numpy.ndarray
        C-contiguous (its memory is one range).

    Returns
    -------
    numpy.ndarray
        ``table`` itself (its contents are not read or changed).
    """
    if _madvise is None or table.nbytes < MIN_ADVISED_BYTES:
        return table
    page = mmap.PAGESIZE
    start = table.ctypes.data
    lo = -(-start // page) * page
    hi = (start + table.nbytes) // page * page
    if hi > lo:
        _madvise(lo, hi - lo, _MADV_NOHUGEPAGE)
    return table


def empty_table(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``, its pages advised as :func:`small_pages` says (uninitialized)."""
    return small_pages(np.empty(shape, dtype))


def full_table(shape, value, dtype) -> np.ndarray:
    """``np.full(shape, value, dtype)``, its pages advised as :func:`small_pages` says before the fill."""
    table = empty_table(shape, dtype)
    table.fill(value)
    return table
