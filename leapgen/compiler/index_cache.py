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

from leapgen.version import __version__

#: The files whose code decides what the cached arrays hold.
_LAYOUT_FILES = ("token_index.py", "token_slices.py", "trie_kernels.py", "index_cache.py")
_layout: str | None = None


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
