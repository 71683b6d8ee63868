"""A vocabulary's token index on disk: its trie and token slices, built once per vocabulary.

Building a :class:`~leapgen.compiler.token_index.TokenIndex` sorts the
vocabulary, builds its trie and the tries and bitsets of its token slices
(~0.1 s for a 49k-token vocabulary, ~0.4 s for Llama-3's 128k, plus loading
the build kernels); a new process that finds them here reads them in a few
milliseconds. One ``.npz`` per vocabulary, keyed by the vocabulary's
fingerprint and a hash of the code that lays the arrays out (so a changed
layout is a miss, never a wrong mask), read with ``allow_pickle=False``,
written by atomic rename; a file that does not read back whole is a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from leapgen.compiler.token_slices import TokenSlice
from leapgen.version import __version__

#: The files whose code decides what the cached arrays hold.
_LAYOUT_FILES = ("token_index.py", "token_slices.py", "trie_kernels.py", "index_cache.py")
_layout: str | None = None
_TRIE_FIELDS = 11  # arrays of trie_kernels.build_trie


def layout_key() -> str:
    """A hash of leapgen's version and of the code that builds the cached arrays (cached per process)."""
    global _layout
    if _layout is None:
        h = hashlib.sha256(__version__.encode())
        here = Path(__file__).resolve().parent
        for name in _LAYOUT_FILES:
            h.update((here / name).read_bytes())
        _layout = h.hexdigest()[:16]
    return _layout


def path_for(cache_dir: str | os.PathLike, fingerprint: str) -> Path:
    """The file of one vocabulary's index under ``cache_dir``."""
    return Path(cache_dir) / f"{fingerprint[:32]}-{layout_key()}.npz"


def load(path: Path) -> tuple[dict, dict[str, np.ndarray]] | None:
    """``(meta, arrays)`` read from ``path``, or None when it is missing or does not read back whole
    (the arrays are fresh and writable)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    return meta, arrays


def save(path: Path, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``meta`` (JSON-able) and ``arrays`` to ``path`` atomically; a failure to write is ignored
    (the index is only not cached)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, meta=np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8), **arrays)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def save_index(cache_dir: str | os.PathLike, fingerprint: str, vocab_size: int, arrays: dict[str, np.ndarray],
               trie: tuple, slices: list[TokenSlice] | None) -> None:
    """Keep one vocabulary's index under ``cache_dir``: named ``arrays``, the trie
    (:func:`~leapgen.compiler.trie_kernels.build_trie`'s arrays) and the token slices (None: built
    without slices). A failure to write is ignored."""
    arrays = dict(arrays)
    arrays.update({f"trie{k}": a for k, a in enumerate(trie)})
    kept = []
    for n, sl in enumerate(slices or ()):
        arrays[f"s{n}_upto"] = np.concatenate((sl.upto, sl.every[None]))
        arrays.update({f"s{n}_dfa{k}": a for k, a in enumerate(sl.char_dfa)})
        shared_rest = sl.rest_trie is sl.outside_trie  # a small slice's: kept once
        for label, sub in (("out", sl.outside_trie), ("rest", None if shared_rest else sl.rest_trie),
                           ("loop", sl.loop_trie)):
            if sub is not None:
                arrays.update({f"s{n}_{label}{k}": a for k, a in enumerate(sub)})
        if sl.loop_ids is not None:
            arrays[f"s{n}_loop_ids"] = sl.loop_ids
        kept.append({"name": sl.name, "count": sl.count, "rest": "out" if shared_rest else "own",
                     "loop": sl.loop_trie is not None})
    meta = {"vocab_size": vocab_size, "slices": kept if slices is not None else None}
    save(path_for(cache_dir, fingerprint), meta, arrays)


def load_index(cache_dir: str | os.PathLike, fingerprint: str, vocab_size: int,
               use_slices: bool) -> tuple[dict[str, np.ndarray], tuple, list[TokenSlice]] | None:
    """What :func:`save_index` kept: ``(arrays, trie, slices)`` (the slices' bitsets read-only, as
    built), or None on a miss (no file, one that does not read back whole, another vocabulary size,
    or slices where none are wanted or the other way round)."""
    got = load(path_for(cache_dir, fingerprint))
    if got is None:
        return None
    meta, a = got
    if meta.get("vocab_size") != vocab_size or (meta.get("slices") is not None) != use_slices:
        return None
    try:
        trie = lambda prefix: tuple(a[f"{prefix}{k}"] for k in range(_TRIE_FIELDS))  # noqa: E731
        slices = []
        for n, m in enumerate(meta["slices"] or ()):
            upto = a[f"s{n}_upto"]
            upto.setflags(write=False)  # as built: read-only bitsets (one numba signature)
            outside = trie(f"s{n}_out")
            slices.append(TokenSlice(m["name"], upto[:-1], upto[-1], m["count"],
                                     tuple(a[f"s{n}_dfa{k}"] for k in range(5)), outside,
                                     outside if m["rest"] == "out" else trie(f"s{n}_rest"),
                                     trie(f"s{n}_loop") if m["loop"] else None,
                                     a[f"s{n}_loop_ids"] if m["loop"] else None))
        main_trie = trie("trie")
        named = {k: a[k] for k in ("byte_matrix", "byte_lengths", "row_ids", "trie_pos", "lex_order")}
    except KeyError:
        return None
    return named, main_trie, slices
