"""A disk cache of compiled regular and counted grammars, in a data format (never pickle).

One ``.npz`` file per grammar (numpy's zip of arrays, read with
``allow_pickle=False``): the DFA's ``trans`` (int32, ``(n, 256)``; a counted
DFA's ``(n, 256 + 2k)`` over its ``k`` regions' symbols, see
:mod:`leapgen.automata.counted`) and ``accepting`` (bool, ``(n,)``) plus ``meta``,
UTF-8 JSON bytes with the format version, leapgen version, vocabulary
fingerprint, the grammar's cache key, kind, warnings, start state and, for a
counted DFA, its regions' ``bounds``. The file name is the SHA-256 of (format,
leapgen version, fingerprint, key), so a new vocabulary or release never
reads an old entry; the key stored inside guards against the impossible
collision.

Writers write a temporary file in the same folder and ``os.replace`` it into
place (atomic on POSIX and Windows), so concurrent writers of one entry leave
one complete file and readers never see a partial one. A file that cannot be
read or does not check out (truncated, corrupt, another format) is a miss.
Context-free grammars are not stored (their per-rule automata are rebuilt).

Bounded in bytes: entries are compressed (``np.savez_compressed``: a DFA
table of repeated rows shrinks tens of times), a read touches the file's
modification time, and after each write the least recently used files are
removed until the folder holds at most ``max_bytes`` (an entry larger than the
bound alone is not written). Several processes may share a folder; a file
removed by one while another reads it is a miss for the reader.

Temporary folders (:class:`TemporaryCacheFolder`): ``leapgen-grammars-<pid>-*``
under the system's temporary folder, locked by their owner (``flock`` on a
``.lock`` file) and removed when it closes; :func:`remove_stale_folders` removes
the ones no live process holds (a run killed with SIGKILL leaves one behind).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

from leapgen.automata import Dfa
from leapgen.automata.counted import CountedDfa, Uncountable

FORMAT_VERSION = 1
#: Name prefix of temporary cache folders (see :class:`TemporaryCacheFolder`).
TEMPORARY_PREFIX = "leapgen-grammars-"
_LOCK_FILE = ".lock"
#: A temporary folder without a lock file younger than this is being set up by its owner: kept.
_SETUP_GRACE_S = 60.0
#: A folder of the older naming (no pid, no lock) untouched for this long is stale.
_UNLOCKED_STALE_S = 86400.0


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
    max_bytes : int or None, default None
        Bound on the folder's ``.npz`` bytes (least recently used files
        removed after a write); None: unbounded.
    """

    def __init__(self, directory: str | os.PathLike, *, fingerprint: str, version: str,
                 max_bytes: int | None = None):
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fingerprint = fingerprint
        self.version = version
        self.max_bytes = max_bytes

    def _key_text(self, key: tuple) -> str:
        return json.dumps(key, separators=(",", ":"), ensure_ascii=False)

    def path(self, key: tuple) -> Path:
        """The file of a cache key."""
        ident = json.dumps([FORMAT_VERSION, self.version, self.fingerprint, self._key_text(key)])
        return self.directory / (hashlib.sha256(ident.encode("utf-8")).hexdigest() + ".npz")

    def load(self, key: tuple) -> tuple[Dfa | CountedDfa, str, tuple[str, ...]] | None:
        """The stored ``(automaton, kind, warnings)`` of ``key``, or None (missing or unreadable)."""
        try:
            with np.load(self.path(key), allow_pickle=False) as data:
                trans, accepting = data["trans"], data["accepting"]
                meta = json.loads(data["meta"].tobytes().decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError, zipfile.BadZipFile):  # corrupt: a miss
            return None
        n = trans.shape[0] if trans.ndim == 2 else -1
        bounds = meta.get("bounds", []) if isinstance(meta, dict) else None
        ok = (isinstance(meta, dict) and meta.get("format") == FORMAT_VERSION
              and meta.get("version") == self.version and meta.get("fingerprint") == self.fingerprint
              and meta.get("key") == self._key_text(key) and trans.dtype == np.int32 and n > 0
              and _bounds_ok(bounds) and trans.shape[1] == 256 + 2 * len(bounds)
              and accepting.dtype == np.bool_ and accepting.shape == (n,) and isinstance(meta.get("kind"), str)
              and _strings(meta.get("warnings", []))
              and isinstance(meta.get("start"), int) and 0 <= meta["start"] < n
              and int(trans.min()) >= -1 and int(trans.max()) < n)
        if not ok:
            return None
        try:
            os.utime(self.path(key))  # used now: last in line for removal
        except OSError:
            pass
        automaton = Dfa(np.ascontiguousarray(trans), accepting.copy(), meta["start"])
        if bounds:
            try:
                automaton = CountedDfa(automaton, [tuple(b) for b in bounds])
            except Uncountable:  # not what a compile stored: a miss
                return None
        return automaton, str(meta["kind"]), tuple(meta.get("warnings", ()))

    def store(self, key: tuple, automaton: Dfa | CountedDfa, kind: str, warnings: tuple[str, ...]) -> bool:
        """Write an entry atomically (compressed), then trim the folder to ``max_bytes``.

        Returns
        -------
        bool
            False if the folder is not writable or the entry alone is larger
            than ``max_bytes`` (nothing is written then).
        """
        dfa = automaton.dfa if isinstance(automaton, CountedDfa) else automaton
        meta = {"format": FORMAT_VERSION, "version": self.version, "fingerprint": self.fingerprint,
                "key": self._key_text(key), "kind": kind, "warnings": list(warnings), "start": int(dfa.start)}
        if isinstance(automaton, CountedDfa):
            meta["bounds"] = [list(b) for b in automaton.bounds]
        meta_bytes = np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
        final = self.path(key)
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=final.stem[:16] + ".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    np.savez_compressed(f, trans=np.ascontiguousarray(dfa.trans, np.int32),
                             accepting=np.ascontiguousarray(dfa.accepting, np.bool_), meta=meta_bytes)
                    f.flush()
                    os.fsync(f.fileno())
                if self.max_bytes is not None and os.path.getsize(tmp) > self.max_bytes:
                    os.unlink(tmp)
                    return False
                os.replace(tmp, final)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        except OSError:
            return False
        if self.max_bytes is not None:
            self.trim(self.max_bytes, keep=final)
        return True

    def _entries(self) -> list[tuple[float, int, Path]]:
        """``(mtime, size, path)`` of every entry file (a file removed meanwhile is left out)."""
        out = []
        try:
            with os.scandir(self.directory) as it:
                for e in it:
                    if e.name.endswith(".npz"):
                        try:
                            st = e.stat()
                        except OSError:
                            continue
                        out.append((st.st_mtime, st.st_size, Path(e.path)))
        except OSError:
            pass
        return out

    def size_bytes(self) -> int:
        """Bytes of the entry files now in the folder (all vocabularies and versions)."""
        return sum(size for _, size, _ in self._entries())

    def trim(self, max_bytes: int, keep: Path | None = None) -> int:
        """Remove the least recently used entries until at most ``max_bytes`` remain.

        Parameters
        ----------
        max_bytes : int
        keep : pathlib.Path or None
            A file never removed (the one just written).

        Returns
        -------
        int
            Files removed (mutates the folder).
        """
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in entries:
            if total <= max_bytes:
                break
            if path == keep:
                continue
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass  # gone already (another process trimmed it)
            total -= size
        return removed


def _strings(value) -> bool:
    """Whether ``value`` is a list of strings (an entry's warnings)."""
    return isinstance(value, list) and all(isinstance(w, str) for w in value)


def _bounds_ok(bounds) -> bool:
    """``bounds`` as :meth:`DiskCache.store` writes them: a list of ``[lo, hi]`` pairs, ``hi`` null or
    at least ``lo``."""
    return isinstance(bounds, list) and all(
        isinstance(b, list) and len(b) == 2 and type(b[0]) is int and b[0] >= 0
        and (b[1] is None or (type(b[1]) is int and b[1] >= b[0])) for b in bounds)


class TemporaryCacheFolder:
    """A private disk-cache folder, removed on :meth:`cleanup` (or when the
    object is collected, or at interpreter exit).

    ``<tmp>/leapgen-grammars-<pid>-<random>``, held by an exclusive ``flock``
    on its ``.lock`` file for the owner's lifetime, so
    :func:`remove_stale_folders` in a later run can tell a folder left by a
    killed process from one in use.

    Attributes
    ----------
    path : str
    """

    def __init__(self, parent: str | os.PathLike | None = None):
        import weakref

        self.path = tempfile.mkdtemp(prefix=f"{TEMPORARY_PREFIX}{os.getpid()}-", dir=parent)
        self._lock_fd = _hold_lock(Path(self.path) / _LOCK_FILE)
        self._finalizer = weakref.finalize(self, _remove_folder, self.path, self._lock_fd)

    def cleanup(self) -> None:
        """Remove the folder and release its lock (idempotent)."""
        self._finalizer()


def _hold_lock(path: Path) -> int | None:
    """Open ``path`` and take an exclusive ``flock`` on it (None where there is no ``fcntl``)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: pid and age decide staleness
        os.close(fd)
        return None
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _remove_folder(path: str, lock_fd: int | None) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if lock_fd is not None:
        os.close(lock_fd)


def remove_stale_folders(parent: str | os.PathLike | None = None) -> list[str]:
    """Remove the temporary cache folders of processes that are gone.

    A folder is stale when no process holds its lock (its owner was killed
    before it could clean up); a folder of the older naming, without a lock
    file, when it was not modified for a day. Folders being set up (no lock
    file yet, younger than a minute) and folders in use are kept.

    Parameters
    ----------
    parent : path-like or None
        Where to look; None: the system's temporary folder.

    Returns
    -------
    list of str
        The folders removed (mutates the file system).
    """
    root = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    removed = []
    try:
        candidates = [p for p in root.iterdir() if p.name.startswith(TEMPORARY_PREFIX) and p.is_dir()]
    except OSError:
        return removed
    now = time.time()
    for folder in candidates:
        try:
            age = now - folder.stat().st_mtime
        except OSError:
            continue
        lock = folder / _LOCK_FILE
        if lock.exists():
            if not _lock_is_free(lock):
                continue
        elif age < (_SETUP_GRACE_S if folder.name.count("-") >= 3 else _UNLOCKED_STALE_S):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(str(folder))
    return removed


def _lock_is_free(lock: Path) -> bool:
    """Whether no process holds the ``flock`` of ``lock`` (probed without keeping it)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        return False
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True
