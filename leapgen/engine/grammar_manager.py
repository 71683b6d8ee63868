"""The engine's door to the grammar layer: compile a request's grammar and
create its matcher.

One responsibility. The tokenizer's :class:`TokenizerInfo` and the
:class:`GrammarCompiler` (which caches compiled grammars) are built once per
model, on the first constrained request, so unconstrained use never pays for
them. Compiles run on the compiler's thread pool (:meth:`compile_async`), so a
request's compile overlaps other requests' steps and its own prefill; the
bitmask rows of a batch are filled on a worker thread
(:meth:`batch_fill_async`) while the model runs its forward pass (torch and
numpy release the GIL for most of their work).
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterable, Sequence

from leapgen.engine.sampling_params import SamplingParams
from leapgen.errors import SchemaError

_MAX_SEEN = 256


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
    """

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: Iterable[int]):
        self._tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.stop_token_ids = frozenset(stop_token_ids)
        self._compiler = None
        self.tokenizer_info = None
        self._fill_pool: ThreadPoolExecutor | None = None
        self._compile_pool: ThreadPoolExecutor | None = None
        #: Recently compiled grammars (their mask-cache counters feed the metrics).
        self.compiled_seen: OrderedDict[int, Any] = OrderedDict()
        self._seen_lock = threading.Lock()

    @property
    def compiler(self) -> Any:
        """The :class:`GrammarCompiler` (built on first use)."""
        if self._compiler is None:
            from leapgen import GrammarCompiler, TokenizerInfo

            self.tokenizer_info = TokenizerInfo.from_huggingface(
                self._tokenizer, vocab_size=self.vocab_size, stop_token_ids=sorted(self.stop_token_ids)
            )
            self._compiler = GrammarCompiler(self.tokenizer_info)
        return self._compiler

    @staticmethod
    def check(params: SamplingParams) -> None:
        """Parse the grammar of ``params`` without a vocabulary (the front-end
        only: fast, no model needed), to reject a malformed grammar early.

        Raises
        ------
        leapgen.errors.GrammarError
            If the regex or schema is malformed or unsupported. Passing does
            not guarantee the compile succeeds (automaton limits, an empty
            language are found later).
        """
        if params.json_schema is not None:
            from leapgen.grammar.json_schema import json_schema_to_ir

            json_schema_to_ir(
                _parse_schema(params.json_schema),
                any_whitespace=params.json_any_whitespace,
                indent=params.json_indent,
                separators=params.json_separators,
            )
        elif params.regex is not None:
            from leapgen.grammar.regex import parse_regex

            parse_regex(params.regex)
        elif params.ebnf is not None:
            from leapgen.grammar.ebnf import parse_ebnf

            parse_ebnf(params.ebnf)

    def compile(self, params: SamplingParams) -> tuple[Any, float]:
        """Compile the grammar of ``params``.

        Parameters
        ----------
        params : SamplingParams
            ``json_schema`` (with the JSON layout knobs) or ``regex``; must be
            constrained.

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
        compiled = getattr(compiler, kind)(*args, **kwargs)
        with self._seen_lock:
            self.compiled_seen[id(compiled)] = compiled
            self.compiled_seen.move_to_end(id(compiled))
            while len(self.compiled_seen) > _MAX_SEEN:
                self.compiled_seen.popitem(last=False)
        return compiled, (time.perf_counter() - start) * 1000.0

    def compile_async(self, params: SamplingParams) -> Future:
        """:meth:`compile` on the manager's compile thread (starts at once).

        Returns
        -------
        concurrent.futures.Future
            Resolves to ``(compiled, compile_ms)`` (compile_ms: wall time from
            submission, queueing included), or raises what :meth:`compile`
            raises.
        """
        _ = self.compiler  # per-model setup on the caller's thread, once
        if self._compile_pool is None:
            self._compile_pool = ThreadPoolExecutor(1, thread_name_prefix="leapgen-compile")
        submitted = time.perf_counter()

        def run():
            compiled, _ = self.compile(params)
            return compiled, (time.perf_counter() - submitted) * 1000.0

        return self._compile_pool.submit(run)

    def batch_fill_async(self, matchers: Sequence[Any], bitmask: Any, timing: dict | None = None) -> Future:
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

        Returns
        -------
        concurrent.futures.Future
            Resolves to ``(need_apply, fill_ms)``: list of bool per row, and
            the fill's wall time in milliseconds.
        """
        if self._fill_pool is None:
            self._fill_pool = ThreadPoolExecutor(1, thread_name_prefix="leapgen-mask")

        def fill():
            start = time.perf_counter()
            if timing is not None:
                timing["start"] = start
            need = [m.fill_next_token_bitmask(bitmask, i) for i, m in enumerate(matchers)]
            end = time.perf_counter()
            if timing is not None:
                timing["end"] = end
            return need, (end - start) * 1000.0

        return self._fill_pool.submit(fill)

    def mask_cache_counts(self) -> tuple[int, int]:
        """(hits, misses) of the per-state bitmask caches of every compiled
        grammar seen so far."""
        with self._seen_lock:
            seen = list(self.compiled_seen.values())
        return sum(c.mask_cache_hits for c in seen), sum(c.mask_cache_misses for c in seen)

    def _compile_call(self, params: SamplingParams) -> tuple[str, tuple, dict]:
        """The compiler method, arguments and options of ``params``' grammar."""
        if params.json_schema is not None:
            return "compile_json_schema", (_parse_schema(params.json_schema),), dict(
                any_whitespace=params.json_any_whitespace, indent=params.json_indent,
                separators=params.json_separators, strict_mode=params.json_strict)
        if params.regex is not None:
            return "compile_regex", (params.regex,), {}
        if params.ebnf is not None:
            return "compile_grammar", (params.ebnf,), {}
        if params.json_object:
            return "compile_builtin_json_grammar", (), {}
        raise ValueError("these SamplingParams have no grammar")

    def new_matcher(self, compiled: Any, stop_token_ids: Iterable[int]) -> Any:
        """A fresh :class:`GrammarMatcher` over ``compiled`` that ends on
        ``stop_token_ids``."""
        from leapgen import GrammarMatcher

        stop = frozenset(stop_token_ids)
        # The default set is already in the tokenizer info (cheaper masks).
        return GrammarMatcher(compiled, stop_token_ids=None if stop == self.stop_token_ids else sorted(stop))


def _parse_schema(schema: Any) -> Any:
    """A schema given as JSON text, parsed (dicts and bools pass through)."""
    if isinstance(schema, str):
        try:
            return json.loads(schema)
        except ValueError as exc:
            raise SchemaError(f"the JSON Schema is not valid JSON: {exc}", pointer="") from None
    return schema
