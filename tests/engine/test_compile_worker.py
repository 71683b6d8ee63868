"""The compile worker process: a grammar compiled there is a disk-cache hit
for the engine's compiler; its grammar errors come back with their type and
attributes; a dead worker is reported."""

from __future__ import annotations

import pytest

from leapgen import GrammarCompiler
from leapgen.engine.compile_worker import CompileWorker, CompileWorkerDied
from leapgen.errors import RegexError, SchemaError


@pytest.fixture
def worker(toy_info, tmp_path):
    w = CompileWorker(toy_info, str(tmp_path), niceness=0)
    yield w
    w.shutdown()


def test_a_regular_grammar_comes_back_through_the_disk_cache(worker, toy_info, tmp_path):
    assert worker.compile("compile_regex", ("(ab|cat)+",), {}) is True
    engine_side = GrammarCompiler(toy_info, cache_dir=str(tmp_path))
    compiled = engine_side.compile_regex("(ab|cat)+")
    assert engine_side.cache.disk_hits == 1 and compiled.is_regular


def test_grammar_errors_keep_their_type_and_attributes(worker):
    with pytest.raises(SchemaError) as info:
        worker.compile("compile_json_schema", ({"type": "object", "properties": {"a": {"type": "nope"}}},), {})
    assert info.value.pointer.startswith("/properties/a")
    with pytest.raises(RegexError) as info:
        worker.compile("compile_regex", ("(ab",), {})
    assert info.value.pattern == "(ab"


def test_a_dead_worker_is_reported(worker):
    worker._proc.kill()
    worker._proc.wait()
    with pytest.raises(CompileWorkerDied):
        worker.compile("compile_regex", ("ab",), {})


def test_the_worker_says_when_it_is_set_up(worker):
    """``is_ready`` never blocks, turns True once the worker has set itself up, and the compiles after
    it still get their own replies."""
    import time

    deadline = time.monotonic() + 120
    while not worker.is_ready():
        assert time.monotonic() < deadline, "the worker never got ready"
        time.sleep(0.05)
    assert worker.is_ready()
    assert worker.compile("compile_regex", ("(ab|cat)+",), {}) is True
