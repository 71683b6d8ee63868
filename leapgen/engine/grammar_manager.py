"""The engine's door to the grammar layer: compile a request's grammar and
create its matcher.

One responsibility. The tokenizer's :class:`TokenizerInfo` and the
:class:`GrammarCompiler` (which caches compiled grammars) are built once per
model, on the first constrained request, so unconstrained use never pays for
them. With ``backend`` set to a peer engine (``"xgrammar"``, ``"llguidance"``,
``"outlines-core"``), grammars are compiled and matched by that engine through
:func:`leapgen.backends.get_backend`: its states have the matcher's verbs
(fill, accept, rollback, jump-forward string; a peer without jump-forward
returns ``""``, so its requests never jump), it keeps the model's default stop
tokens, and it has no JSON indent or custom separators.

Compiles start on the manager's compile thread (:meth:`compile_async`), so a
request's compile overlaps other requests' steps and its own prefill; with
leapgen the work itself runs in a worker process
(:mod:`leapgen.engine.compile_worker`) so that it does not hold the GIL the
steps need. The bitmask rows of a batch are filled on a worker thread
(:meth:`batch_fill_async`, the work in :mod:`leapgen.engine.mask_fill`) while
the model runs its forward pass (torch and numpy release the GIL for most of
their work). What a request's ``SamplingParams`` ask of the compiler (its
verb, arguments and options, and the front-end check) is read in
:mod:`leapgen.engine.grammar_params`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterable, Sequence

from leapgen.compiler.warm_up import wait_for_warm_up
from leapgen.engine import grammar_log
from leapgen.engine.compile_worker import CompileWorker, CompileWorkerDied
from leapgen.engine.grammar_params import check_grammar, compile_call, peer_compile_call
from leapgen.engine.mask_fill import fill_rows
from leapgen.engine.sampling_params import SamplingParams
from leapgen.errors import GrammarError
from leapgen.vocab import TokenizerInfo

_MAX_SEEN = 256
#: Compile time limit of a served grammar (seconds): past it the request fails alone with a CompileLimitError.
SERVE_COMPILE_SECONDS = 30.0
#: Default bound of the compiled-grammar cache, per process (vLLM's default for xgrammar: 512 MiB).
DEFAULT_GRAMMAR_CACHE_BYTES = 512 << 20
#: Default limit of one compiled grammar's size.
DEFAULT_MAX_GRAMMAR_BYTES = 256 << 20
#: Default bound of the disk cache folder.
DEFAULT_DISK_CACHE_BYTES = 1 << 30
logger = logging.getLogger("leapgen.engine")


class GrammarManager:
    """Compile grammars for one model's vocabulary.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
    vocab_size : int
        Width of the model's logits (may exceed the tokenizer's vocabulary).
    stop_token_ids : iterable of int
        The model's default stop tokens (a matcher allows them where the
        grammar may end).
    backend : str, default "leapgen"
        The grammar engine: one of :func:`leapgen.backends.known_backends`.
    compile_in_process : bool, default True
        With the leapgen backend, run :meth:`compile_async`'s compiles in a
        worker process (:mod:`leapgen.engine.compile_worker`) so they do not
        hold this process's GIL; False compiles on the thread itself.
    cache_bytes : int or None, default 512 MiB
        Bound on the compiled grammars kept in memory, in this process and
        in the compile worker alike (each), bitmask rows filled later
        included; a grammar's own row cache is bounded by half of it. None:
        256 entries, no byte bound. Grammars in use by running requests stay
        alive past eviction until they finish.
    max_grammar_bytes : int or None, default 256 MiB
        Largest compiled grammar: a bigger one fails its request with a
        CompileLimitError (a 400 from the server). None: no limit.
    cache_dir : str or None, default None
        Folder of the disk cache shared with the compile worker: None is a
        fresh temporary folder (``$TMPDIR/leapgen-grammars-<pid>-*``, removed
        by :meth:`close`, at exit, and, if this process is killed, by the
        next manager that starts); a folder given is kept.
    disk_cache_bytes : int or None, default 1 GiB
        Bound on the disk cache folder (least recently used files removed).

    Raises
    ------
    ValueError
        Unknown ``backend``.
    ImportError
        ``backend`` is a peer engine that is not installed.
    """

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: Iterable[int], backend: str = "leapgen",
                 compile_in_process: bool = True, cache_bytes: int | None = DEFAULT_GRAMMAR_CACHE_BYTES,
                 max_grammar_bytes: int | None = DEFAULT_MAX_GRAMMAR_BYTES, cache_dir: str | None = None,
                 disk_cache_bytes: int | None = DEFAULT_DISK_CACHE_BYTES):
        from leapgen.backends import available_backends, known_backends

        if backend not in known_backends():
            raise ValueError(f"unknown grammar backend {backend!r}; known: {', '.join(known_backends())}")
        if backend not in available_backends():
            raise ImportError(f"grammar backend {backend!r} is not installed: pip install 'leapgen[peers]'")
        self.backend_name = backend
        self._tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.stop_token_ids = frozenset(stop_token_ids)
        self._compiler = None
        self._healing = None
        self._text_bytes: tuple[bytes, ...] | None = None
        self._compile_in_process = compile_in_process and backend == "leapgen"
        self._worker = None
        self._temporary = None
        self.cache_bytes = cache_bytes
        self.max_grammar_bytes = max_grammar_bytes
        self.cache_dir = cache_dir
        self.disk_cache_bytes = disk_cache_bytes
        self.tokenizer_info = None
        self._fill_pool: ThreadPoolExecutor | None = None
        self._compile_pool: ThreadPoolExecutor | None = None
        self._peer_cache: OrderedDict[str, Any] = OrderedDict()
        self._seen_lock = threading.Lock()
        self._vocab_lock = threading.Lock()
        self._setup_lock = threading.Lock()
        if self._compile_in_process and cache_dir is None:
            from leapgen.compiler.disk_cache import remove_stale_folders

            for stale in remove_stale_folders():  # left by runs that were killed
                logger.info("removed the grammar cache folder of an earlier run: %s", stale)

    @property
    def compiler(self) -> Any:
        """The :class:`GrammarCompiler`, or the peer's
        :class:`~leapgen.backends.GrammarBackend` (built on first use, thread-safe)."""
        if self._compiler is None:
            with self._setup_lock:
                if self._compiler is None:
                    self._compiler = self._build_compiler()
        return self._compiler

    def _build_compiler(self) -> Any:
        """The vocabulary's set-up: its TokenizerInfo, then the compiler (with leapgen, the token index
        read from ``$LEAPGEN_CACHE/token_index`` where an earlier process left it; the worker is
        started first, so its own set-up overlaps this one). Both compilers get this manager's bounds."""
        if self.backend_name == "leapgen":
            wait_for_warm_up()  # an LLM(warm_up_grammar=True)'s kernel loading, if still running
        _ = self.vocabulary
        if self.backend_name != "leapgen":
            from leapgen.backends import get_backend

            return get_backend(self.backend_name, self.tokenizer_info, hf_tokenizer=self._tokenizer)
        from leapgen.compiler import GrammarCompiler  # (numba and the kernels: a process's first grammar pays them)
        from leapgen.engine.model_loader import default_cache_dir

        index_dir = str(default_cache_dir().parent / "token_index")
        options = self._compiler_options()
        # no warm-up compile here: the first request compiles its own grammar (prepare() warms a server up)
        if not self._compile_in_process:
            return GrammarCompiler(self.tokenizer_info, max_compile_seconds=SERVE_COMPILE_SECONDS,
                                   index_cache_dir=index_dir, warm_up=False, **options)
        import weakref

        from leapgen.compiler.disk_cache import TemporaryCacheFolder

        cache_dir = self.cache_dir
        if cache_dir is None:
            self._temporary = TemporaryCacheFolder()
            cache_dir = self._temporary.path
        self._worker = CompileWorker(self.tokenizer_info, cache_dir, max_compile_seconds=SERVE_COMPILE_SECONDS,
                                     index_cache_dir=index_dir, compiler_options=options)
        weakref.finalize(self, _close_worker, self._worker, self._temporary)
        return GrammarCompiler(self.tokenizer_info, cache_dir=cache_dir, max_compile_seconds=SERVE_COMPILE_SECONDS,
                               index_cache_dir=index_dir, warm_up=False, **options)

    def prepare(self, timeout: float = 60.0) -> None:
        """Set the grammar layer up now (a server before it listens): the vocabulary, the compiler,
        the mask kernels of both grammar kinds, and the compile worker's own set-up (waited for up to
        ``timeout`` seconds), so that the first constrained request pays only its compile."""
        compiler = self.compiler
        if self.backend_name == "leapgen":
            compiler.warm_up()
            compiler.token_index.warm_up_pushdown()
        deadline = time.monotonic() + timeout
        while self._worker is not None and not self._worker.is_ready() and time.monotonic() < deadline:
            time.sleep(0.02)

    def _compiler_options(self) -> dict:
        """The GrammarCompiler bounds of this manager (the engine's and the worker's compiler alike)."""
        from leapgen.compiler.compiled import DEFAULT_MASK_CACHE_BYTES

        options: dict = {"max_grammar_bytes": self.max_grammar_bytes, "disk_cache_bytes": self.disk_cache_bytes}
        if self.cache_bytes is not None:
            options["cache_bytes"] = self.cache_bytes
            options["mask_cache_bytes"] = min(DEFAULT_MASK_CACHE_BYTES, self.cache_bytes // 2)
        return options

    def close(self) -> None:
        """Stop the compile worker and remove the temporary disk cache folder
        (idempotent; later compiles run on the compile thread, without a disk cache)."""
        worker, self._worker = self._worker, None
        temporary, self._temporary = self._temporary, None
        _close_worker(worker, temporary)

    def cache_sizes(self) -> dict[str, int]:
        """Bytes of the grammar caches: ``memory`` (this process's compiler), ``worker_memory`` (the
        compile worker's, as of its last reply), ``disk`` (the disk cache folder)."""
        compiler = self._compiler
        cache = getattr(compiler, "cache", None)
        disk = getattr(cache, "disk", None)
        return {"memory": cache.memory_size_bytes() if cache is not None else 0,
                "worker_memory": self._worker.cache_bytes if self._worker is not None else 0,
                "disk": disk.size_bytes() if disk is not None else 0}

    @property
    def vocabulary(self) -> Any:
        """The model's :class:`~leapgen.vocab.TokenizerInfo` (token id -> exact
        bytes; built on first use, from any thread)."""
        with self._vocab_lock:
            if self.tokenizer_info is None:
                self.tokenizer_info = TokenizerInfo.from_huggingface(
                    self._tokenizer, vocab_size=self.vocab_size, stop_token_ids=sorted(self.stop_token_ids))
            return self.tokenizer_info

    @property
    def healing(self) -> Any:
        """The vocabulary's :class:`~leapgen.engine.token_healing.TokenHealing`
        (built on first use)."""
        if self._healing is None:
            from leapgen.engine.token_healing import TokenHealing

            index = getattr(self.compiler, "token_index", None)  # leapgen's: its tokens already in byte order
            self._healing = TokenHealing(self.token_text_bytes, self.tokenizer_info.special_token_ids,
                                         index.ids_in_byte_order() if index is not None else None)
        return self._healing

    @property
    def token_text_bytes(self) -> tuple[bytes, ...]:
        """Each token's bytes in the output text, special tokens' texts included (a structural
        tag's markers are accepted as one special or added token); built on first use."""
        if self._text_bytes is None:
            info = self.vocabulary
            table = list(info.token_bytes)
            for i, text in info.special_token_texts.items():
                table[i] = text.encode("utf-8")
            self._text_bytes = tuple(table)
        return self._text_bytes

    #: :func:`~leapgen.engine.grammar_params.check_grammar`: the front-end alone, no vocabulary (the CLI's fail-fast).
    check = staticmethod(check_grammar)

    def compile(self, params: SamplingParams) -> tuple[Any, float]:
        """Compile the grammar of ``params``.

        Parameters
        ----------
        params : SamplingParams
            Constrained: ``json_schema`` or ``json_object`` (with the JSON
            layout knobs), ``regex``, ``ebnf`` or ``choice``.

        Returns
        -------
        compiled : CompiledGrammar
        compile_ms : float
            Wall time, milliseconds (a compiler cache hit is fast).

        Raises
        ------
        leapgen.errors.GrammarError
            If the grammar is malformed or unsupported (a schema given as text
            that is not JSON raises :class:`SchemaError` at pointer ``""``).
        ValueError
            If ``params`` is unconstrained.
        """
        compiler = self.compiler  # per-model setup, not counted as compile time
        start = time.perf_counter()
        kind, args, kwargs = self._compile_call(params)
        if self.backend_name == "leapgen":
            compiled = getattr(compiler, kind)(*args, **kwargs)  # the compiler has its own cache
        else:
            compiled = self._peer_compile(kind, args, kwargs)
        return compiled, (time.perf_counter() - start) * 1000.0

    def compile_async(self, params: SamplingParams, request_id: int | None = None) -> Future:
        """:meth:`compile` on the manager's compile thread (starts at once),
        the work itself in the compile worker process once it is set up (until
        then, and without a worker, on the thread itself).

        Parameters
        ----------
        params : SamplingParams
        request_id : int or None
            Named in the grammar debug log's compile line.

        Returns
        -------
        concurrent.futures.Future
            Resolves to ``(compiled, compile_ms)`` (compile_ms: wall time from
            submission: queueing included, and for the first grammar the
            vocabulary's set-up, :attr:`compiler`), or raises what :meth:`compile`
            raises.
        """
        pool = self._compile_thread()
        submitted = time.perf_counter()

        def run():
            _ = self.compiler  # the first request pays the set-up, timed
            facts: dict = {}
            worker = self._worker
            if worker is not None and worker.is_ready():
                try:
                    worker.compile(*self._compile_call(params))  # a GrammarError is raised here
                    facts = worker.last_reply
                    for entry in worker.new_dfas:  # so the compile below is a memory hit, no disk read
                        self._compiler.cache.adopt(*entry)
                except CompileWorkerDied:
                    logger.warning("the grammar compile worker died; compiling on the engine's thread from now on")
                    self._worker = None
            cache = getattr(self._compiler, "cache", None)
            hits = cache.hits if cache is not None else 0
            compiled, _ = self.compile(params)  # a cache hit after the worker's compile
            ms = (time.perf_counter() - submitted) * 1000.0
            if grammar_log.debug_enabled():
                hit = facts.get("hit", cache is not None and cache.hits > hits)
                grammar_log.logger.debug(
                    "grammar compile: request %s: %s: %.1f ms (%s), %s, %s states, %.1f MiB", request_id,
                    grammar_log.describe_grammar(params), ms,
                    f"worker {facts['ms']:.1f} ms" if "ms" in facts else "in this process",
                    "cache hit" if hit else "new", getattr(compiled, "n_states", "?"), _size_of(compiled) / 2**20)
            return compiled, ms

        return pool.submit(run)

    def _compile_thread(self) -> ThreadPoolExecutor:
        """The manager's one compile thread (started on first use)."""
        if self._compile_pool is None:
            with self._setup_lock:
                if self._compile_pool is None:
                    self._compile_pool = ThreadPoolExecutor(1, thread_name_prefix="leapgen-compile")
        return self._compile_pool

    def set_up_async(self) -> Future:
        """Start the vocabulary's set-up (:attr:`compiler`: the TokenizerInfo, the token index) on the
        compile thread now, for a caller that knows a constrained request comes. A compile submitted
        meanwhile runs after it, and its ``compile_ms`` counts the wait.

        Returns
        -------
        concurrent.futures.Future
            Resolves to the compiler (or raises what building it raised; a later compile builds it again).
        """
        return self._compile_thread().submit(lambda: self.compiler)

    def batch_fill_async(self, matchers: Sequence[Any], bitmask: Any, timing: dict | None = None,
                         request_ids: Sequence[int] | None = None) -> Future:
        """Fill row ``i`` of ``bitmask`` from ``matchers[i]`` on the mask
        worker thread.

        Parameters
        ----------
        matchers : sequence of GrammarMatcher
        bitmask : torch.Tensor
            int32, shape ``(>= len(matchers), ceil(vocab_size / 32))``;
            mutated by the worker.
        timing : dict or None, default None
            When given, the worker sets ``"start"`` and ``"end"``: the fill's
            ``time.perf_counter()`` bounds (for step traces).
        request_ids : sequence of int or None
            Named in the grammar debug log's mask-cache lines (one per row).

        Returns
        -------
        concurrent.futures.Future
            Resolves to ``(need_apply, fill_ms)``: list of bool per row, and
            the fill's wall time in milliseconds.
        """
        if self._fill_pool is None:
            self._fill_pool = ThreadPoolExecutor(1, thread_name_prefix="leapgen-mask")
        return self._fill_pool.submit(fill_rows, matchers, bitmask, timing, request_ids, grammar_log.debug_enabled())

    def mask_cache_counts(self) -> tuple[int, int]:
        """(hits, misses) of the per-state bitmask caches of every compiled
        grammar of this process's cache (and of those it dropped)."""
        cache = getattr(self._compiler, "cache", None)
        if cache is not None:
            return cache.mask_cache_counts()
        with self._seen_lock:
            seen = list(self._peer_cache.values())
        return (sum(getattr(c, "mask_cache_hits", 0) for c in seen),
                sum(getattr(c, "mask_cache_misses", 0) for c in seen))

    def _compile_call(self, params: SamplingParams) -> tuple[str, tuple, dict]:
        """The compiler method, arguments and options of ``params``' grammar
        (:func:`~leapgen.engine.grammar_params.compile_call`, or
        :func:`~leapgen.engine.grammar_params.peer_compile_call` with a peer backend).

        Raises
        ------
        leapgen.errors.GrammarError
            A JSON layout the peer backend does not have (indent, a whitespace
            pattern, separators other than compact or the default).
        ValueError
            ``params`` has no grammar.
        """
        if self.backend_name != "leapgen":
            return peer_compile_call(params, self.backend_name)
        return compile_call(params)

    def _peer_compile(self, kind: str, args: tuple, kwargs: dict) -> Any:
        """Compile with the peer backend, through an LRU of ``_MAX_SEEN``
        handles (not every peer caches: outlines-core rebuilds its index)."""
        key = json.dumps([kind, args, kwargs], sort_keys=True, default=str)
        with self._seen_lock:
            if key in self._peer_cache:
                self._peer_cache.move_to_end(key)
                return self._peer_cache[key]
        compiled = getattr(self.compiler, kind)(*args, **kwargs)
        with self._seen_lock:
            self._peer_cache[key] = compiled
            while len(self._peer_cache) > _MAX_SEEN:
                self._peer_cache.popitem(last=False)
        return compiled

    def new_matcher(self, compiled: Any, stop_token_ids: Iterable[int]) -> Any:
        """A fresh :class:`GrammarMatcher` (or peer
        :class:`~leapgen.backends.GrammarState`) over ``compiled`` that ends
        on ``stop_token_ids``.

        Raises
        ------
        leapgen.errors.GrammarError
            A peer backend and stop tokens other than the model's defaults.
        """
        stop = frozenset(stop_token_ids)
        if self.backend_name != "leapgen":
            if stop != self.stop_token_ids:
                raise GrammarError(f"the {self.backend_name} backend ends on the model's stop tokens only")
            return self.compiler.new_state(compiled)
        from leapgen.matcher import GrammarMatcher

        # The default set is already in the tokenizer info (cheaper masks).
        return GrammarMatcher(compiled, stop_token_ids=None if stop == self.stop_token_ids else sorted(stop))


def _close_worker(worker: Any, temporary: Any) -> None:
    """Stop the compile worker (if any) and remove the temporary cache folder (if any)."""
    if worker is not None:
        worker.shutdown()
    if temporary is not None:
        temporary.cleanup()


def _size_of(compiled: Any) -> int:
    size = getattr(compiled, "memory_size_bytes", None)
    return size() if callable(size) else 0

