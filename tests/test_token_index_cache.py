"""Issue 19: the token index kept on disk across processes, and the frame walks' jumps to a LOOP state's
sort (a JSON string's escapes) give the sorts of the plain walks."""

from __future__ import annotations

import numpy as np
import pytest

from leapgen.compiler import index_cache, trie_kernels
from leapgen.compiler.token_index import TokenIndex


def _same_index(a: TokenIndex, b: TokenIndex) -> None:
    assert all(np.array_equal(x, y) for x, y in zip(a._trie, b._trie))
    assert np.array_equal(a._row_ids, b._row_ids) and np.array_equal(a._trie_pos, b._trie_pos)
    assert np.array_equal(a._lex_order, b._lex_order)  # the free-text slice's builds read it
    assert [s.name for s in a.token_slices] == [s.name for s in b.token_slices]
    for s, t in zip(a.token_slices, b.token_slices):
        assert s.count == t.count and np.array_equal(s.upto, t.upto) and np.array_equal(s.every, t.every)
        assert (s.rest_trie is s.outside_trie) == (t.rest_trie is t.outside_trie)  # a small slice's, kept once
        for x, y in ((s.outside_trie, t.outside_trie), (s.rest_trie, t.rest_trie), (s.loop_trie, t.loop_trie)):
            assert (x is None) == (y is None)
            assert x is None or all(np.array_equal(p, q) for p, q in zip(x, y))


def test_a_cached_index_is_read_back_whole_and_not_built(tmp_path, monkeypatch, grammar_compiler):
    info = grammar_compiler("gpt2").tokenizer_info
    built = TokenIndex(info, cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.idx")
    assert path == index_cache.path_for(tmp_path, info.fingerprint)

    def no_build(*args):
        raise AssertionError("the trie was built, not read")

    monkeypatch.setattr(trie_kernels, "build_trie", no_build)
    read = TokenIndex(info, cache_dir=tmp_path)
    _same_index(read, built)
    assert not read.token_slices[0].upto.flags.writeable  # as built: one numba signature
    loop = np.zeros(256, np.int32)
    live = np.ones(1, np.int8)
    assert np.array_equal(read.token_row(loop, 0, live), built.token_row(loop, 0, live))


def test_a_damaged_cache_file_is_a_miss(tmp_path, grammar_compiler):
    info = grammar_compiler("gpt2").tokenizer_info
    TokenIndex(info, cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.idx")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    again = TokenIndex(info, cache_dir=tmp_path)  # rebuilt and written again
    _same_index(again, grammar_compiler("gpt2").token_index)
    assert index_cache.load(path) is not None


def test_mapped_arrays_are_plain_aligned_and_private(tmp_path, grammar_compiler):
    """The file is mapped, not read: each array a plain, aligned, writable numpy array of the type the
    build gives (one numba signature), whose writes stay in the process."""
    numba = pytest.importorskip("numba")
    info = grammar_compiler("gpt2").tokenizer_info
    built = TokenIndex(info, cache_dir=tmp_path)
    read = TokenIndex(info, cache_dir=tmp_path)
    for got, want in zip(read._trie + (read._trie_pos,), built._trie + (built._trie_pos,)):
        assert type(got) is np.ndarray and got.flags.aligned and got.flags.c_contiguous
        assert numba.typeof(got) == numba.typeof(want)
    path = index_cache.path_for(tmp_path, info.fingerprint)
    meta, arrays = index_cache.load(path)
    assert all(a.ctypes.data % 64 == 0 for a in arrays.values())
    before = arrays["trie_pos"].copy()
    arrays["trie_pos"][:] = -7  # copy-on-write: the file keeps its bytes
    assert np.array_equal(index_cache.load(path)[1]["trie_pos"], before)


def test_older_layouts_of_the_vocabulary_are_removed_when_a_new_one_is_written(tmp_path, grammar_compiler):
    import os
    import time

    info = grammar_compiler("gpt2").tokenizer_info
    vocabulary = info.fingerprint[:32]
    old = time.time() - index_cache.STALE_AFTER_S - 60
    names = (f"{vocabulary}-0123456789abcdef.npz", f"{vocabulary}-fedcba9876543210.idx", ".tmp-crashed.idx",
             f"{vocabulary}-recent000000000.idx", "ffffffffffffffffffffffffffffffff-0123456789abcdef.idx", "notes.txt")
    files = {name: tmp_path / name for name in names}
    for name, path in files.items():
        path.write_bytes(b"x")
        if "recent" not in name:
            os.utime(path, (old, old))
    TokenIndex(info, cache_dir=tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([index_cache.path_for(tmp_path, info.fingerprint).name, f"{vocabulary}-recent000000000.idx",
                           "ffffffffffffffffffffffffffffffff-0123456789abcdef.idx", "notes.txt"])


@pytest.mark.parametrize("damage", ["magic", "header", "size"])
def test_a_file_that_is_not_an_index_is_a_miss(tmp_path, damage):
    path = tmp_path / "x.idx"
    arrays = {"a": np.arange(10, dtype=np.int32), "empty": np.zeros(0, np.uint8), "m": np.ones((3, 5), np.uint32)}
    index_cache.save(path, {"k": 1}, arrays)
    meta, got = index_cache.load(path)
    assert meta == {"k": 1} and all(np.array_equal(got[k], v) and got[k].dtype == v.dtype for k, v in arrays.items())
    data = bytearray(path.read_bytes())
    if damage == "magic":
        data[:8] = b"NOTANIDX"
    elif damage == "header":
        data[16:20] = b"\xff\xfe{]"
    else:
        data += b"\0" * 64
    path.write_bytes(bytes(data))
    assert index_cache.load(path) is None


@pytest.mark.parametrize("family", ["gpt2", "llama3"])
def test_frame_sorts_that_jump_equal_the_plain_sorts(grammar_compiler, family):
    """Context-free grammar: every frame of the builtin JSON grammar sorted with jumps to LOOP states
    (its string rule's escapes) equals its sort without them."""
    compiled = grammar_compiler(family).compile_builtin_json_grammar()
    index = compiled.token_index
    live = np.ones(len(compiled.pda.has_bytes_flat), np.int8)
    jumped = 0
    for g in np.flatnonzero(compiled.pda.has_bytes_flat).tolist():
        sort = compiled._frame_sort(g)
        plain = index.frame_sets(compiled._automaton, g, live)
        assert np.array_equal(compiled._certain(g), plain[0]) and np.array_equal(sort[1], plain[1]), g  # kept packed
        assert sort[2] >= plain[2]
        jumped += compiled._loops.target.get(g, -1) >= 0
    assert jumped  # the escapes' frames did jump
