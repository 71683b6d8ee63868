"""A disk cache of compiled regular grammars, in a data format (never pickle).

One ``.npz`` file per grammar (numpy's zip of arrays, read with
``allow_pickle=False``): the DFA's ``trans`` (int32, ``(n, 256)``) and
``accepting`` (bool, ``(n,)``) plus ``meta``, UTF-8 JSON bytes with the format
version, leapgen version, vocabulary fingerprint, the grammar's cache key,
kind, warnings and start state. The file name is the SHA-256 of (format,
leapgen version, fingerprint, key), so a new vocabulary or release never
reads an old entry; the key stored inside guards against the impossible
collision.

Writers write a temporary file in the same folder and ``os.replace`` it into
place (atomic on POSIX and Windows), so concurrent writers of one entry leave
one complete file and readers never see a partial one. A file that cannot be
read or does not check out (truncated, corrupt, another format) is a miss.
Context-free grammars are not stored (their per-rule automata are rebuilt).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from leapgen.automata import Dfa

FORMAT_VERSION = 1


class DiskCache:
    """Compiled DFAs on disk for one vocabulary and leapgen version (thread- and process-safe).

    Parameters
    ----------
    directory : str or os.PathLike
        Created if missing.
    fingerprint : str
        ``TokenizerInfo.fingerprint`` of the vocabulary.
    version : str
        The leapgen version writing and reading.
    """

    def __init__(self, directory: str | os.PathLike, *, fingerprint: str, version: str):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fingerprint = fingerprint
        self.version = version

    def _key_text(self, key: tuple) -> str:
        return json.dumps(key, separators=(",", ":"), ensure_ascii=False)

    def path(self, key: tuple) -> Path:
        """The file of a cache key."""
        ident = json.dumps([FORMAT_VERSION, self.version, self.fingerprint, self._key_text(key)])
        return self.directory / (hashlib.sha256(ident.encode("utf-8")).hexdigest() + ".npz")

    def load(self, key: tuple) -> tuple[Dfa, str, tuple[str, ...]] | None:
        """The stored ``(dfa, kind, warnings)`` of ``key``, or None (missing or unreadable)."""
        try:
            with np.load(self.path(key), allow_pickle=False) as data:
                trans, accepting = data["trans"], data["accepting"]
                meta = json.loads(data["meta"].tobytes().decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError, zipfile.BadZipFile):  # corrupt: a miss
            return None
        n = trans.shape[0] if trans.ndim == 2 else -1
        ok = (isinstance(meta, dict) and meta.get("format") == FORMAT_VERSION
              and meta.get("version") == self.version and meta.get("fingerprint") == self.fingerprint
              and meta.get("key") == self._key_text(key) and trans.dtype == np.int32 and n > 0
              and trans.shape[1] == 256 and accepting.dtype == np.bool_ and accepting.shape == (n,)
              and isinstance(meta.get("start"), int) and 0 <= meta["start"] < n
              and int(trans.min()) >= -1 and int(trans.max()) < n)
        if not ok:
            return None
        return Dfa(np.ascontiguousarray(trans), accepting.copy(), meta["start"]), str(meta["kind"]), \
            tuple(meta.get("warnings", ()))

    def store(self, key: tuple, dfa: Dfa, kind: str, warnings: tuple[str, ...]) -> bool:
        """Write an entry atomically; returns False if the folder is not writable."""
        meta = {"format": FORMAT_VERSION, "version": self.version, "fingerprint": self.fingerprint,
                "key": self._key_text(key), "kind": kind, "warnings": list(warnings), "start": int(dfa.start)}
        meta_bytes = np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
        final = self.path(key)
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=final.stem[:16] + ".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    np.savez(f, trans=np.ascontiguousarray(dfa.trans, np.int32),
                             accepting=np.ascontiguousarray(dfa.accepting, np.bool_), meta=meta_bytes)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, final)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            return False
        return True
