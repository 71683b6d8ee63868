"""The engine's door to the grammar layer: compile a request's grammar and
create its matcher.

One responsibility. The tokenizer's :class:`TokenizerInfo` and the
:class:`GrammarCompiler` (which caches compiled grammars) are built once per
model, on the first constrained request, so unconstrained use never pays for
them. Later this grows async compiles and batched mask fills.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable

from leapgen.engine.sampling_params import SamplingParams
from leapgen.errors import SchemaError


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
        if params.json_schema is not None:
            compiled = compiler.compile_json_schema(
                _parse_schema(params.json_schema),
                any_whitespace=params.json_any_whitespace,
                indent=params.json_indent,
                separators=params.json_separators,
            )
        elif params.regex is not None:
            compiled = compiler.compile_regex(params.regex)
        else:
            raise ValueError("these SamplingParams have no grammar")
        return compiled, (time.perf_counter() - start) * 1000.0

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
