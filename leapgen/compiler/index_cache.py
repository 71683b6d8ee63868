"""A vocabulary's token index on disk: its trie and token slices, built once per vocabulary.

Building a :class:`~leapgen.compiler.token_index.TokenIndex` sorts the
vocabulary, builds its trie and the tries and bitsets of its token slices
(~0.1 s for a 49k-token vocabulary, ~0.7 s for Llama-3's 128k, plus loading
the build kernels); a new process that finds them here maps them in about a
millisecond. One file per vocabulary, keyed by the vocabulary's fingerprint
and a hash of the code that lays the arrays out (so a changed layout is a
miss, never a wrong mask), written by atomic rename: a magic, a JSON header
(the metadata; each array's dtype, shape and offset), then the arrays at
64-byte offsets. It is read by a private copy-on-write memory map
(``mmap.ACCESS_COPY``): no array is read before it is used, so a process pays
for the slices its grammars need (Llama-3's index is ~90 MB, most of it the
small slices' tries), and the arrays are plain, aligned, writable numpy arrays
(one numba signature, as built). A file whose header does not parse, or whose
size is not the header's, is a miss; the arrays carry no checksum (as ``.npy``
files do not), the atomic rename being what keeps a file whole.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from leapgen.compiler.token_slices import TokenSlice
from leapgen.version import __version__

#: The files whose code decides what the cached arrays hold.
_LAYOUT_FILES = ("token_index.py", "token_slices.py", "trie_kernels.py", "index_cache.py")
_layout: str | None = None
_TRIE_FIELDS = 11  # arrays of trie_kernels.build_trie
_MAGIC = b"LEAPIDX1"
_ALIGN = 64


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
    return Path(cache_dir) / f"{fingerprint[:32]}-{layout_key()}.idx"


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def load(path: Path) -> tuple[dict, dict[str, np.ndarray]] | None:
    """``(meta, arrays)`` mapped from ``path`` (private copy-on-write pages: the arrays are writable,
    and a write stays in this process), or None when it is missing, its header does not parse, or
    its size is not the header's."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_MAGIC) + 8)
            if len(head) != len(_MAGIC) + 8 or head[:len(_MAGIC)] != _MAGIC:
                return None
            header = json.loads(f.read(int.from_bytes(head[len(_MAGIC):], "little")).decode("utf-8"))
            if os.fstat(f.fileno()).st_size != header["size"]:
                return None
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        arrays = {}
        for name, dtype, shape, offset in header["arrays"]:
            count = int(np.prod(shape, dtype=np.int64))
            arrays[name] = np.frombuffer(mapped, np.dtype(dtype), count, offset).reshape(shape)
        return header["meta"], arrays
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def save(path: Path, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``meta`` (JSON-able) and ``arrays`` to ``path`` atomically (the layout: the module's
    docstring); a failure to write is ignored (the index is only not cached)."""
    arrays = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    table, offset = [], 0
    for name, a in arrays.items():
        table.append([name, a.dtype.str, list(a.shape), offset])
        offset = _aligned(offset + a.nbytes)
    start = 0
    while True:  # the arrays start after the header, whose length depends on where they start
        placed = [[name, dtype, shape, start + at] for name, dtype, shape, at in table]
        header = json.dumps({"meta": meta, "arrays": placed, "size": start + offset}).encode("utf-8")
        if len(_MAGIC) + 8 + len(header) <= start:
            break
        start = _aligned(len(_MAGIC) + 8 + len(header) + 64)
    table = placed
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".idx")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + len(header).to_bytes(8, "little") + header)
                for (_, _, _, at), a in zip(table, arrays.values()):
                    f.write(b"\0" * (at - f.tell()))
                    f.write(a.tobytes())
                f.write(b"\0" * (start + offset - f.tell()))
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
    path = path_for(cache_dir, fingerprint)
    save(path, meta, arrays)
    remove_stale(path)


#: A file of another layout (another leapgen version) left this long unwritten is removed (seconds).
STALE_AFTER_S = 24 * 3600


def remove_stale(path: Path) -> None:
    """Remove, beside ``path`` (just written), the same vocabulary's indexes of other layouts (an
    earlier leapgen's: ~90 MB each for Llama-3, never read again) and unfinished writes, where
    written more than :data:`STALE_AFTER_S` ago; a version still in use writes its own again (and
    at most once a day). Failures are ignored."""
    vocabulary = path.name.split("-", 1)[0]
    try:
        folder = list(path.parent.iterdir())
    except OSError:
        return
    for other in folder:
        name = other.name
        ours = name.startswith(vocabulary + "-") and name.endswith((".idx", ".npz"))
        if other == path or not (ours or name.startswith(".tmp-")):
            continue
        try:
            if time.time() - other.stat().st_mtime > STALE_AFTER_S:
                other.unlink()
        except OSError:
            pass


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
