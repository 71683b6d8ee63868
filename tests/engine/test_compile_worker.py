"""The compile worker process: a grammar compiled there comes back in the
reply (and in the disk cache) for the engine's compiler; its grammar errors
come back with their type and attributes; a dead worker is reported."""

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


def test_a_new_regular_grammar_comes_back_in_the_reply(worker, toy_info, tmp_path):
    """Its DFA rides in the reply: the engine's compiler adopts it and then compiles it from memory,
    without reading the disk (the worker writes it there after replying)."""
    assert worker.compile("compile_regex", ("(ab|cat)+",), {}) is True
    assert [entry[0] for entry in worker.new_dfas] == [("regex", "(ab|cat)+")]
    engine_side = GrammarCompiler(toy_info, cache_dir=str(tmp_path))
    for entry in worker.new_dfas:
        engine_side.cache.adopt(*entry)
    compiled = engine_side.compile_regex("(ab|cat)+")
    assert (engine_side.cache.hits, engine_side.cache.disk_hits) == (1, 0)
    local = GrammarCompiler(toy_info).compile_regex("(ab|cat)+")
    assert compiled.is_regular and compiled.n_states == local.n_states
    assert (compiled.dfa.trans == local.dfa.trans).all()


def test_a_counted_grammar_comes_back_in_the_reply(worker, toy_info, tmp_path):
    """A string's maxLength kept as a count: its counted DFA rides in the reply too, so the engine's
    compile is a memory hit, not a compile of its own on the engine's thread."""
    schema = {"type": "string", "maxLength": 64}
    assert worker.compile("compile_json_schema", (schema,), {}) is True
    assert [type(entry[1]).__name__ for entry in worker.new_dfas] == ["CountedDfa"]
    engine_side = GrammarCompiler(toy_info, cache_dir=str(tmp_path))
    for entry in worker.new_dfas:
        engine_side.cache.adopt(*entry)
    compiled = engine_side.compile_json_schema(schema)
    assert (engine_side.cache.hits, engine_side.cache.misses) == (1, 0)
    assert type(compiled).__name__ == "CountedGrammar" and compiled.automaton.bounds == ((0, 64),)
    assert compiled.walk(compiled.start_state, b'"' + b"x" * 64) is not None
    assert compiled.walk(compiled.start_state, b'"' + b"x" * 65) is None


def test_the_disk_cache_gets_it_too_and_a_worker_hit_sends_no_dfa(worker, toy_info, tmp_path):
    assert worker.compile("compile_regex", ("(ab|cat)+",), {}) is True
    assert worker.compile("compile_regex", ("(ab|cat)+",), {}) is True  # the write ended before this reply
    assert worker.last_reply["hit"] and worker.new_dfas == []
    engine_side = GrammarCompiler(toy_info, cache_dir=str(tmp_path))
    compiled = engine_side.compile_regex("(ab|cat)+")
    assert engine_side.cache.disk_hits == 1 and compiled.is_regular


def test_the_worker_runs_the_engines_leapgen_whatever_the_working_directory(toy_info, tmp_path, monkeypatch):
    """Started from a folder holding another ``leapgen`` (a checkout of another version), the worker
    still imports the engine's: the two must read each other's replies."""
    other = tmp_path / "elsewhere"
    (other / "leapgen").mkdir(parents=True)
    (other / "leapgen" / "__init__.py").write_text("raise ImportError('the leapgen of the working directory')\n")
    monkeypatch.chdir(other)
    cache = tmp_path / "cache"
    cache.mkdir()
    w = CompileWorker(toy_info, str(cache), niceness=0)
    try:
        assert w.compile("compile_regex", ("(ab|cat)+",), {}) is True
    finally:
        w.shutdown()


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


def test_the_grammar_manager_compiles_in_the_worker_and_reads_no_disk():
    """A served compile: the worker compiles, the engine's compiler adopts the DFA from the reply; its
    own compile is then a memory hit (no disk read, no second compile)."""
    pytest.importorskip("torch")
    from vocab_loaders import load_hf_tokenizer

    from leapgen.engine import SamplingParams
    from leapgen.engine.grammar_manager import GrammarManager

    hf = load_hf_tokenizer("smollm2")
    manager = GrammarManager(hf, len(hf), [hf.eos_token_id], compile_in_process=True)
    try:
        manager.prepare()
        schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}},
                  "required": ["id"]}
        compiled, _ = manager.compile_async(SamplingParams(json_schema=schema)).result(timeout=120)
        cache = manager.compiler.cache
        assert compiled.is_regular and (cache.hits, cache.misses, cache.disk_hits) == (1, 0, 0)
    finally:
        manager.close()


def test_a_failed_disk_write_does_not_end_the_worker():
    """The write after the reply fails (here: a disk whose store raises): the worker goes on."""
    from leapgen.engine.compile_worker import _WriteBehind

    class Broken:
        def store(self, *entry):
            raise ValueError("disk full")

    disk = _WriteBehind(Broken())
    disk.store(("regex", "a"), None, "regex", ())
    disk.flush(disk.take())  # raises nothing
    assert disk.take() == []
