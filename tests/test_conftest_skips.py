"""``tests/conftest.py`` skips by marker, never by name: a test's keywords also hold its name, its
parameter ids and its folders' names, so a test named after vLLM or a checkout in a folder named
``slow`` must still run (10 default-suite tests were skipped as "needs vLLM/SGLang" that way)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("tests_root_conftest", Path(__file__).parent / "conftest.py")
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)


class _Item:
    """What the collection hook reads of a test item: its keywords (names of the test, its parameters
    and folders, and its markers), its markers, and the markers it is given."""

    def __init__(self, markers=()):
        self.keywords = {"test_vllm_shaped_backend": 1, "vllm-sql": 1, "sglang": 1, "slow": 1, "vllm": 1}
        self._markers = {name: getattr(pytest.mark, name) for name in markers}
        self.added = []

    def get_closest_marker(self, name):
        return self._markers.get(name)

    def add_marker(self, marker):
        self.added.append(marker)


class _Config:
    def getoption(self, name):
        return False  # no --run-slow


def test_only_marked_tests_are_skipped():
    named_like_engines, slow = _Item(), _Item(markers=("slow",))
    _conftest.pytest_collection_modifyitems(_Config(), [named_like_engines, slow])
    assert named_like_engines.added == []
    assert [m.kwargs.get("reason") for m in slow.added] == ["slow: run with --run-slow"]
