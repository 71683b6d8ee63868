"""The compile service: compile_async, single flight, remembered failures,
the byte-bounded LRU, the disk cache (corrupt files, concurrent writers) and
the compile time limit."""

from __future__ import annotations

import json
import multiprocessing as mp
import threading
import time
from concurrent.futures import Future

import numpy as np
import pytest

from leapgen import CompileLimitError, GrammarCompiler, GrammarMatcher, RegexError, TokenizerInfo
from leapgen.compiler.disk_cache import DiskCache

VOCAB = ["a", "b", "c", "ab", "1", "2", "12", "-", "{", "}", '"', ":", "</s>"]


@pytest.fixture(scope="module")
def info():
    return TokenizerInfo(VOCAB, stop_token_ids=[len(VOCAB) - 1])


def _counting(compiler, delay: float = 0.0) -> list:
    """Count (and optionally slow down) the compiler's real compiles."""
    calls = []
    build = compiler._build_unlimited

    def counted(kind, front_end):
        calls.append(kind)
        time.sleep(delay)
        return build(kind, front_end)

    compiler._build_unlimited = counted
    return calls


def _mask(compiled) -> np.ndarray:
    bitmask = np.zeros((1, 1), np.int32)
    GrammarMatcher(compiled).fill_next_token_bitmask(bitmask)
    return bitmask


def test_compile_async(info):
    compiler = GrammarCompiler(info, compile_threads=2)
    future = compiler.compile_async("regex", "(ab|c)+")
    assert isinstance(future, Future)
    assert future.result(timeout=30) is compiler.compile_regex("(ab|c)+")
    schema = compiler.compile_async("json_schema", {"type": "integer"}, any_whitespace=False).result(timeout=30)
    assert schema.kind == "json_schema"
    with pytest.raises(RegexError):
        compiler.compile_async("regex", "a(b").result(timeout=30)
    with pytest.raises(ValueError):
        compiler.compile_async("yaml", "x: 1")


def test_single_flight(info):
    compiler = GrammarCompiler(info)
    calls = _counting(compiler, delay=0.2)
    results = [None] * 8

    def worker(i):
        results[i] = compiler.compile_regex("[a-c]{2,5}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["regex"]
    assert all(r is results[0] for r in results)


def test_failures_are_remembered(info):
    compiler = GrammarCompiler(info)
    calls = _counting(compiler, delay=0.1)
    errors = []

    def worker():
        try:
            compiler.compile_json_schema({"type": "integer", "minimum": 5, "maximum": 1})
        except Exception as e:  # noqa: BLE001 - collected and checked below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    worker()
    assert len(calls) == 1 and len(errors) == 5
    assert len({type(e) for e in errors}) == 1 and len({str(e) for e in errors}) == 1
    assert compiler.cache.failure_hits == 4
    compiler.clear_cache()  # forgets failures too
    worker()
    assert len(calls) == 2


def test_cache_bounded_in_bytes(info):
    compiler = GrammarCompiler(info, cache_bytes=1)  # every grammar is bigger: only the newest stays
    first = compiler.compile_regex("a+")
    compiler.compile_regex("b+")
    assert len(compiler.cache) == 1
    assert compiler.compile_regex("a+") is not first
    roomy = GrammarCompiler(info, cache_bytes=1 << 30, cache_entries=2)
    for pattern in ("a+", "b+", "c+"):
        roomy.compile_regex(pattern)
    assert len(roomy.cache) == 2 and roomy.cache.memory_size_bytes() > 0


def test_disk_cache_round_trip(info, tmp_path):
    writer = GrammarCompiler(info, cache_dir=tmp_path)
    compiled = writer.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1 and not list(tmp_path.glob("*.tmp"))
    with np.load(files[0], allow_pickle=False) as data:  # a data format: loads without pickle
        assert set(data.files) == {"trans", "accepting", "meta"}
    reader = GrammarCompiler(info, cache_dir=tmp_path)
    calls = _counting(reader)
    again = reader.compile_json_schema({"properties": {"a": {"type": "integer"}}, "type": "object"})
    assert calls == [] and reader.cache.disk_hits == 1
    np.testing.assert_array_equal(again.dfa.trans, compiled.dfa.trans)
    np.testing.assert_array_equal(_mask(again), _mask(compiled))
    other_vocab = TokenizerInfo(VOCAB[:-1] + ["<eos>"], stop_token_ids=[len(VOCAB) - 1])
    assert DiskCache(tmp_path, fingerprint=other_vocab.fingerprint, version="0").load(("x",)) is None


def _masks_along(compiled, tokens: list[int]) -> list[np.ndarray]:
    matcher, masks = GrammarMatcher(compiled), []
    for token in [*tokens, None]:
        bitmask = np.zeros((1, 1), np.int32)
        matcher.fill_next_token_bitmask(bitmask)
        masks.append(bitmask)
        if token is not None:
            assert matcher.accept_token(token)
    return masks


def test_disk_cache_keeps_counted_lengths(info, tmp_path):
    """A counted grammar (a string's maxLength kept as a count) is stored with its bounds and read
    back as a counted grammar, not compiled again: the same masks, the bound still refusing."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 40}}, "required": ["a"]}
    writer = GrammarCompiler(info, cache_dir=tmp_path)
    compiled = writer.compile_json_schema(schema)
    assert type(compiled).__name__ == "CountedGrammar" and len(list(tmp_path.glob("*.npz"))) == 1
    reader = GrammarCompiler(info, cache_dir=tmp_path)
    calls = _counting(reader)
    again = reader.compile_json_schema(schema)
    assert calls == [] and reader.cache.disk_hits == 1 and type(again) is type(compiled)
    ids = {piece: i for i, piece in enumerate(VOCAB)}
    walk = [ids[p] for p in ("{", '"', "a", '"', ":", '"')] + [ids["ab"]] * 20  # 40 characters: the bound
    masks = _masks_along(again, walk)
    for got, want in zip(masks, _masks_along(compiled, walk)):
        np.testing.assert_array_equal(got, want)
    past = masks[-1][0, 0]
    assert not past >> ids["a"] & 1 and past >> ids['"'] & 1  # the 41st character refused, the quote allowed
    plain = GrammarCompiler(info, cache_dir=tmp_path, count_lengths=False)  # the same folder: not its entry
    assert plain.compile_json_schema(schema).is_regular and plain.cache.disk_hits == 0
    (path,) = [p for p in tmp_path.glob("*.npz") if "bounds" in _meta_of(p)]
    _rewrite_meta(path, bounds=[[0, 2**63]])  # a bound past what a count holds: a miss, not a crash
    again = GrammarCompiler(info, cache_dir=tmp_path)
    assert isinstance(again.compile_json_schema(schema), type(compiled)) and again.cache.disk_hits == 0


def _meta_of(path) -> dict:
    with np.load(path, allow_pickle=False) as data:
        return json.loads(data["meta"].tobytes())


def _rewrite_meta(path, **changes) -> None:
    """Rewrite a disk-cache entry with its metadata changed (a well-formed file)."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["meta"] = np.frombuffer(json.dumps(dict(_meta_of(path), **changes)).encode(), np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "wrong_key", "bad_meta"])
def test_disk_cache_tolerates_corrupt_files(info, tmp_path, damage):
    GrammarCompiler(info, cache_dir=tmp_path).compile_regex("(ab)+c")
    (path,) = tmp_path.glob("*.npz")
    if damage == "garbage":
        path.write_bytes(b"not a zip file at all" * 10)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "bad_meta":  # readable, but its warnings are not a list of strings
        _rewrite_meta(path, warnings=5)
    else:  # a well-formed entry of another grammar under this name
        other = GrammarCompiler(info, cache_dir=tmp_path / "other")
        other.compile_regex("c+")
        path.write_bytes(next((tmp_path / "other").glob("*.npz")).read_bytes())
    reader = GrammarCompiler(info, cache_dir=tmp_path)
    calls = _counting(reader)
    compiled = reader.compile_regex("(ab)+c")
    assert calls == ["regex"] and reader.cache.disk_hits == 0
    assert compiled.dfa.matches(b"ababc")
    assert DiskCache(tmp_path, fingerprint=info.fingerprint, version=_version()).load(("regex", "(ab)+c")) is not None


def _version() -> str:
    from leapgen import __version__

    return __version__


def _store_many(directory, fingerprint, trans, accepting, rounds):
    from leapgen.automata import Dfa

    cache = DiskCache(directory, fingerprint=fingerprint, version="test")
    for _ in range(rounds):
        assert cache.store(("regex", "shared"), Dfa(trans, accepting, 0), "regex", ())


def test_disk_cache_concurrent_writers(info, tmp_path):
    dfa = GrammarCompiler(info).compile_regex("[a-c]{1,40}").dfa
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_store_many, args=(tmp_path, info.fingerprint, dfa.trans, dfa.accepting, 25))
             for _ in range(4)]
    for p in procs:
        p.start()
    reader = DiskCache(tmp_path, fingerprint=info.fingerprint, version="test")
    seen = 0
    while any(p.is_alive() for p in procs):
        got = reader.load(("regex", "shared"))
        if got is not None:  # a reader sees a whole entry or none, never a torn one
            np.testing.assert_array_equal(got[0].trans, dfa.trans)
            seen += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    got = reader.load(("regex", "shared"))
    assert got is not None and np.array_equal(got[0].trans, dfa.trans)
    assert len(list(tmp_path.glob("*.npz"))) == 1 and not list(tmp_path.glob("*.tmp"))


def test_compile_time_limit(info):
    compiler = GrammarCompiler(info, max_compile_seconds=1e-6)
    with pytest.raises(CompileLimitError, match="limit"):
        compiler.compile_regex("([a-c][0-9a-c]{0,30}-){1,8}[a-c]{5,30}")
    assert GrammarCompiler(info, max_compile_seconds=60).compile_regex("[a-c]{5,30}").dfa.matches(b"abcab")
    with pytest.raises(ValueError):
        GrammarCompiler(info, max_compile_seconds=0)


def _fill_rows(compiled, states) -> None:
    for state in states:
        compiled.bitmask_row(state)


def test_an_unbounded_cache_counts_rows_filled_after_insertion_when_asked(info):
    """Without ``cache_bytes`` no grammar reports its growth (no call per new mask row), and the
    cache's size is summed when asked, so it still covers the rows filled since insertion."""
    compiler = GrammarCompiler(info)
    compiled = compiler.compile_regex("[a-c]{0,60}")
    assert compiled.on_grow is None
    before = compiler.cache.memory_size_bytes()
    _fill_rows(compiled, range(compiled.n_states))
    assert compiler.cache.memory_size_bytes() == compiled.memory_size_bytes() > before


def test_the_byte_bound_counts_rows_filled_after_insertion(info):
    probe = GrammarCompiler(info)
    old, new = probe.compile_regex("[a-c]{0,60}"), probe.compile_regex("[12]{0,60}")
    bound = old.memory_size_bytes() + new.memory_size_bytes() + 8 * old._row_bytes
    compiler = GrammarCompiler(info, cache_bytes=bound)
    first = compiler.compile_regex("[a-c]{0,60}")
    second = compiler.compile_regex("[12]{0,60}")
    assert len(compiler.cache) == 2
    _fill_rows(second, range(second.n_states))  # rows of the newest grammar, filled after it was cached
    assert second.memory_size_bytes() > second.n_states * second._row_bytes - 1
    assert len(compiler.cache) == 1 and compiler.compile_regex("[12]{0,60}") is second
    assert compiler.cache.memory_size_bytes() == second.memory_size_bytes()
    assert first.on_grow is None  # evicted: it no longer reports its growth
    assert compiler.compile_regex("[a-c]{0,60}") is not first


def test_budgeted_and_counted_grammars_report_their_growth(info):
    """Every kind of grammar tells the byte-bounded cache of a row it computed after insertion (a
    grammar with rule budgets did not, so its rows escaped the bound)."""
    compiler = GrammarCompiler(info, cache_bytes=1 << 30)
    for compiled in (compiler.compile_grammar('root ::= "{" r "}"\nr[max_tokens=3] ::= [a-c]*'),
                     compiler.compile_json_schema({"type": "string", "maxLength": 40})):
        grow, calls = compiled.on_grow, []
        assert grow is not None
        compiled.on_grow = lambda g, grow=grow: (calls.append(g), grow(g))
        _mask(compiled)
        assert calls == [compiled], type(compiled).__name__


def test_a_grammar_over_max_grammar_bytes_is_refused_and_remembered(info):
    size = GrammarCompiler(info).compile_regex("[a-c]{0,200}").memory_size_bytes()
    compiler = GrammarCompiler(info, max_grammar_bytes=size - 1)
    calls = _counting(compiler)
    for _ in range(2):
        with pytest.raises(CompileLimitError, match="MiB per grammar"):
            compiler.compile_regex("[a-c]{0,200}")
    assert calls == ["regex"]
    assert GrammarCompiler(info, max_grammar_bytes=size).compile_regex("[a-c]{0,200}").n_states > 200


def test_the_grammar_size_limit_covers_choices(info):
    choices = [f"choice number {i}" for i in range(300)]
    size = GrammarCompiler(info).compile_choice(choices).memory_size_bytes()
    with pytest.raises(CompileLimitError, match="MiB per grammar"):
        GrammarCompiler(info, max_grammar_bytes=size - 1).compile_choice(choices)
    assert GrammarCompiler(info, max_grammar_bytes=size).compile_choice(choices).memory_size_bytes() == size


def test_disk_cache_is_compressed_and_bounded_lru(info, tmp_path):
    dfa = GrammarCompiler(info).compile_regex("[a-c]{1,300}").dfa
    cache = DiskCache(tmp_path, fingerprint=info.fingerprint, version="test")
    assert cache.store(("regex", "big"), dfa, "regex", ())
    size = cache.size_bytes()
    assert size < dfa.trans.nbytes / 10  # compressed: a DFA table of repeated rows shrinks tens of times
    bounded = DiskCache(tmp_path / "b", fingerprint=info.fingerprint, version="test", max_bytes=int(3.5 * size))
    for i in range(3):
        assert bounded.store(("regex", i), dfa, "regex", ())
        time.sleep(0.02)  # distinct modification times
    assert bounded.load(("regex", 0)) is not None  # used now: no longer the least recently used
    time.sleep(0.02)
    assert bounded.store(("regex", 3), dfa, "regex", ())
    assert bounded.size_bytes() <= 3.5 * size
    kept = [i for i in range(4) if bounded.load(("regex", i)) is not None]
    assert kept == [0, 2, 3]
    tiny = DiskCache(tmp_path / "t", fingerprint=info.fingerprint, version="test", max_bytes=size // 2)
    assert not tiny.store(("regex", "big"), dfa, "regex", ()) and tiny.size_bytes() == 0
    assert not list((tmp_path / "t").iterdir())  # nor a temporary file


def test_temporary_folders_are_removed_when_closed_or_stale(tmp_path):
    import os

    from leapgen.compiler.disk_cache import TEMPORARY_PREFIX, TemporaryCacheFolder, remove_stale_folders

    live = TemporaryCacheFolder(tmp_path)
    closed = TemporaryCacheFolder(tmp_path)
    closed_path = closed.path
    closed.cleanup()
    assert not os.path.exists(closed_path)
    killed = tmp_path / f"{TEMPORARY_PREFIX}999999-dead"  # what a killed owner leaves: its lock is free
    killed.mkdir()
    (killed / ".lock").touch()
    (killed / "x.npz").write_bytes(b"0" * 100)
    starting = tmp_path / f"{TEMPORARY_PREFIX}999998-new"  # being set up: no lock file yet, young
    starting.mkdir()
    old_style = tmp_path / f"{TEMPORARY_PREFIX}abc123"  # the naming before locks, untouched for two days
    old_style.mkdir()
    os.utime(old_style, (time.time() - 2 * 86400,) * 2)
    removed = remove_stale_folders(tmp_path)
    assert sorted(removed) == sorted([str(killed), str(old_style)])
    assert os.path.isdir(live.path) and starting.is_dir()
    live.cleanup()
    assert not os.path.exists(live.path)
