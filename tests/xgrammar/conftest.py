"""Fixtures for the ``leapgen.xgrammar`` suites.

``xgr`` runs a test twice: on the installed ``xgrammar`` (the oracle: a ported
test must pass there, which checks the test itself) and on ``leapgen.xgrammar``.
Where the two differ on purpose, a test names the row of the differences
table in :mod:`leapgen.xgrammar`'s docstring and branches on ``is_leapgen``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/xgrammar, for xgr_pair


@pytest.fixture(params=["xgrammar", "leapgen.xgrammar"])
def xgr(request):
    """The module under test: ``xgrammar`` (skipped when not installed) or ``leapgen.xgrammar``."""
    if request.param == "xgrammar":
        pytest.importorskip("xgrammar", reason="xgrammar (the oracle) is not installed: pip install xgrammar")
    return importlib.import_module(request.param)


@pytest.fixture
def is_leapgen(xgr) -> bool:
    """Whether ``xgr`` is leapgen's module."""
    return xgr.__name__ == "leapgen.xgrammar"
