"""Compile grammars in a worker process, off the engine's GIL.

One responsibility. A leapgen compile is mostly Python (front-end, subset
construction, minimization); on a thread it holds the GIL in long stretches,
and every other request's decode step, whose forward pass re-takes the GIL
between torch ops, slows down with it (``benchmarks/bench_compile_stall.py``:
decode steps 2-3x slower during a compile on 2 shared cores). So the grammar
manager's compile thread hands the work to one worker process and waits for
it without the GIL. The worker runs at a lower CPU priority (``nice``), so
when the CPUs are short the decoding requests go first.

How the compiled grammar comes back: a new regular grammar's DFA (a counted
grammar's :class:`~leapgen.automata.counted.CountedDfa`, pickled as its DFA and
bounds), with its cache key, rides in the worker's reply, and the engine's
:class:`~leapgen.GrammarCompiler` adopts it into its memory cache
(:meth:`CompileCache.adopt`), so the engine's compile of the same grammar is a
memory hit (the DFA wrapped, milliseconds). The worker writes the DFA to the
disk cache folder the two share after replying, not before: a compressed,
fsynced write and its read back took 60-90 ms of the first request's TTFT
(``benchmarks/bench_cold_start.py``). That folder still serves the grammars
the worker finds in its own memory cache (no DFA in the reply then). A
context-free grammar is not disk-cached, so the engine compiles it again on
its own thread (the old behaviour, stall included). A grammar error raised in
the worker is raised again, same type and attributes, in the engine.

The worker is a plain ``python -m leapgen.engine.compile_worker`` subprocess
talking pickles over pipes, not ``multiprocessing``: a spawned
``multiprocessing`` child re-imports the caller's ``__main__``, which re-runs
any script without an ``if __name__ == "__main__"`` guard.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO

import leapgen.errors

_INFO_FILE = "tokenizer_info.pickle"


class CompileWorkerDied(leapgen.errors.LeapgenError):
    """The compile worker process is gone (killed, out of memory, crashed)."""


def _send(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _recv(stream: BinaryIO) -> Any:
    """The next message, or raises EOFError when the other side is gone."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("pipe closed")
    (size,) = struct.unpack("<Q", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("pipe closed")
    return pickle.loads(data)


def _rebuild_error(name: str, args: tuple, attributes: dict) -> leapgen.errors.GrammarError:
    """The worker's GrammarError, rebuilt without calling its ``__init__``
    (the subclasses take keyword-only arguments)."""
    cls = getattr(leapgen.errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, leapgen.errors.GrammarError)):
        cls = leapgen.errors.GrammarError
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(attributes)
    return exc


class CompileWorker:
    """One worker process that compiles grammars into a shared disk cache.

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
        The engine's vocabulary (handed to the worker through ``cache_dir``).
    cache_dir : str
        The disk-cache folder the engine's compiler also reads.
    niceness : int, default 10
        Added to the worker's ``nice`` value.
    max_compile_seconds : float or None
        The worker compiler's time limit (see :class:`~leapgen.GrammarCompiler`).
    compiler_options : dict or None
        More :class:`~leapgen.GrammarCompiler` keywords of the worker's
        compiler (JSON values: ``cache_bytes``, ``mask_cache_bytes``,
        ``max_grammar_bytes``, ``disk_cache_bytes``), so its memory and disk
        are bounded as the engine's are.

    Attributes
    ----------
    cache_bytes : int
        The worker compiler's in-memory cache bytes, as of its last reply.
    last_reply : dict
        What the worker said of its last successful compile (see :meth:`compile`).
    new_dfas : list of (tuple, Dfa or CountedDfa, str, tuple of str)
        The automata that compile built (regular and counted grammars'), with their cache keys.

    Notes
    -----
    The process starts at once and sets itself up (imports, token index) in
    the background, then says so (:meth:`is_ready`). :meth:`compile` calls
    are serialized (one compile at a time, as the grammar manager's single
    compile thread makes them); one made before the set-up ended waits for it.
    """

    def __init__(self, tokenizer_info: Any, cache_dir: str, niceness: int = 10,
                 max_compile_seconds: float | None = None, index_cache_dir: str | None = None,
                 compiler_options: dict | None = None):
        with open(Path(cache_dir) / _INFO_FILE, "wb") as f:
            pickle.dump(tokenizer_info, f, protocol=pickle.HIGHEST_PROTOCOL)
        env = dict(os.environ)
        package_root = str(Path(leapgen.errors.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        options = dict(compiler_options or {}, max_compile_seconds=max_compile_seconds,
                       index_cache_dir=None if index_cache_dir is None else os.path.abspath(index_cache_dir))
        argv = [sys.executable, "-m", "leapgen.engine.compile_worker", os.path.abspath(cache_dir), str(niceness),
                json.dumps(options)]
        # ``python -m`` puts its working directory first on sys.path: started in the package's own folder,
        # the worker imports the engine's leapgen, not one that the caller's working directory holds
        # (another checkout), so the two read each other's replies.
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=package_root)
        self._lock = threading.Lock()
        self._ready = False
        self.cache_bytes = 0
        self.last_reply: dict = {}
        self.new_dfas: list = []

    @property
    def pid(self) -> int:
        """The worker process's id."""
        return self._proc.pid

    def is_ready(self) -> bool:
        """Whether the worker has set itself up (its first message, read here; never blocks).
        Until then the grammar manager compiles in its own process rather than wait."""
        if not self._ready:
            with self._lock:
                if not self._ready and select.select([self._proc.stdout], [], [], 0)[0]:
                    try:
                        self._ready = _recv(self._proc.stdout) == "ready"
                    except (EOFError, OSError, ValueError):
                        return False
        return self._ready

    def compile(self, method: str, args: tuple, kwargs: dict) -> bool:
        """Compile in the worker and wait (the caller's thread blocks on a
        pipe, GIL released).

        Parameters
        ----------
        method : str
            A ``GrammarCompiler`` compile method (``"compile_json_schema"``, ...).
        args, kwargs
            Its arguments (picklable).

        Returns
        -------
        bool
            True if the grammar has a stored automaton (regular or counted:
            ``CompiledGrammar.stored_automaton``), so the engine's compile of it now
            hits its memory cache once :attr:`new_dfas` are adopted, or the
            disk cache. :attr:`last_reply` then holds what the worker said
            of it (``hit``: it was in the worker's memory cache; ``ms``,
            ``n_states``, ``bytes``), and :attr:`new_dfas` the ``(key, automaton,
            kind, warnings)`` of each automaton the compile built, for
            :meth:`CompileCache.adopt`.

        Raises
        ------
        leapgen.errors.GrammarError
            What the compile raised in the worker.
        CompileWorkerDied
            If the worker is gone.
        """
        try:
            data = pickle.dumps((method, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        except (RecursionError, pickle.PicklingError, TypeError, AttributeError):
            # Too deep (or not picklable) to ship: the engine compiles it itself and reports its error.
            return False
        with self._lock:
            try:
                if not self._ready:  # wait for the set-up to end (its "ready" message) first
                    self._ready = _recv(self._proc.stdout) == "ready"
                self._proc.stdin.write(struct.pack("<Q", len(data)) + data)
                self._proc.stdin.flush()
                result = _recv(self._proc.stdout)
            except (EOFError, OSError, ValueError) as exc:
                raise CompileWorkerDied(f"the grammar compile worker is gone ({exc})") from None
        if result[0] == "error":
            self.cache_bytes = result[-1]
            raise _rebuild_error(*result[1:-1])
        self.last_reply = result[2]
        self.new_dfas = result[3]
        self.cache_bytes = result[2]["cache_bytes"]
        return result[1]

    def shutdown(self) -> None:
        """Stop the worker: close its input (it exits), kill it after 2 s."""
        try:
            self._proc.stdin.close()
            self._proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()


class _WriteBehind:
    """The worker compiler's disk cache, written after the reply: :meth:`store` keeps the entry
    (the reply carries it), :meth:`flush` writes what was kept."""

    def __init__(self, disk: Any):
        self.disk = disk
        self.kept: list[tuple] = []

    def load(self, key: tuple) -> Any:
        return self.disk.load(key) if self.disk is not None else None

    def store(self, key: tuple, dfa: Any, kind: str, warnings: tuple[str, ...]) -> bool:
        self.kept.append((key, dfa, kind, warnings))
        return True

    def take(self) -> list[tuple]:
        kept, self.kept = self.kept, []
        return kept

    def flush(self, entries: list[tuple]) -> None:
        """Write ``entries``; a failed write is a disk-cache miss later, never the worker's end."""
        for entry in entries if self.disk is not None else ():
            try:
                self.disk.store(*entry)
            except Exception:  # noqa: BLE001 - the reply already carried the DFA
                pass


def _serve(cache_dir: str, niceness: int, options: dict) -> None:
    """The worker's loop: read ``(method, args, kwargs)``, compile, answer
    ``("ok", stored, facts, new_dfas)`` or ``("error", class name, args,
    attributes, cache_bytes)`` (an unexpected exception answers ``("ok",
    False, facts, [])``: the engine then compiles on its own and meets it),
    then write the new DFAs to the disk cache; exit when the engine closes
    the pipe."""
    import signal
    import time

    # Ctrl-C reaches the whole process group: the engine shuts the worker down (closes the pipe) itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the replies
    if niceness and hasattr(os, "nice"):
        os.nice(niceness)
    from leapgen.compiler import GrammarCompiler

    options = dict(options)
    options["max_compile_seconds"] = options.get("max_compile_seconds") or None
    with open(Path(cache_dir) / _INFO_FILE, "rb") as f:
        compiler = GrammarCompiler(pickle.load(f), cache_dir=cache_dir, **options)
    _send(replies, "ready")
    cache = compiler.cache
    disk = cache.disk = _WriteBehind(cache.disk)
    while True:
        try:
            method, args, kwargs = _recv(requests)
        except EOFError:
            return
        start, hits = time.perf_counter(), cache.hits
        try:
            compiled = getattr(compiler, method)(*args, **kwargs)
            facts = {"hit": cache.hits > hits, "ms": (time.perf_counter() - start) * 1e3,
                     "n_states": getattr(compiled, "n_states", None), "bytes": compiled.memory_size_bytes(),
                     "cache_bytes": cache.memory_size_bytes()}
            reply = ("ok", compiled.stored_automaton is not None, facts, disk.take())
        except leapgen.errors.GrammarError as exc:
            reply = ("error", type(exc).__name__, exc.args, dict(vars(exc)), cache.memory_size_bytes())
        except Exception:  # noqa: BLE001 - a bug: the engine compiles it itself and sees the error
            reply = ("ok", False, {"cache_bytes": cache.memory_size_bytes()}, [])
        compiled = None  # not kept past the cache's bound by this loop's variable
        _send(replies, reply)
        disk.flush(reply[3] if reply[0] == "ok" else disk.take())
        reply = None


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]))
