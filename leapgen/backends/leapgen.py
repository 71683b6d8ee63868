"""The leapgen backend: :class:`~leapgen.GrammarCompiler` and
:class:`~leapgen.GrammarMatcher` behind the backend interface."""

from __future__ import annotations

from typing import Any, Sequence

from leapgen.backends.base import GrammarBackend, GrammarState
from leapgen.compiler import CompiledGrammar, GrammarCompiler
from leapgen.matcher import BatchGrammarMatcher, GrammarMatcher
from leapgen.vocab import TokenizerInfo


class LeapgenState(GrammarMatcher, GrammarState):
    """A :class:`~leapgen.GrammarMatcher` is already a :class:`GrammarState`
    (same verbs), so the hot path runs through no wrapper."""


class LeapgenBackend(GrammarBackend):
    """leapgen itself.

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
    hf_tokenizer : optional
        Not needed; accepted for a uniform registry call.
    compiler : GrammarCompiler, optional
        Share an existing compiler (and its cache); default: a new one.
    max_threads : int or "auto", default "auto"
        For :meth:`batch_fill_next_token_bitmask` (see
        :class:`~leapgen.BatchGrammarMatcher`).
    **compiler_options
        Passed to :class:`~leapgen.GrammarCompiler` when it is created here.
    """

    name = "leapgen"

    def __init__(self, tokenizer_info: TokenizerInfo, *, hf_tokenizer: Any = None,
                 compiler: GrammarCompiler | None = None, max_threads: int | str = "auto", **compiler_options):
        super().__init__(tokenizer_info, hf_tokenizer=hf_tokenizer)
        self.compiler = compiler or GrammarCompiler(tokenizer_info, **compiler_options)
        self._batch = BatchGrammarMatcher(max_threads=max_threads)

    def compile_regex(self, pattern: str) -> CompiledGrammar:
        return self.compiler.compile_regex(pattern)

    def compile_json_schema(self, schema, *, any_whitespace: bool = True, strict_mode: bool = True,
                            any_order: bool = False) -> CompiledGrammar:
        return self.compiler.compile_json_schema(schema, any_whitespace=any_whitespace, strict_mode=strict_mode,
                                                 any_order=any_order)

    def compile_grammar(self, ebnf: str, *, root_rule_name: str = "root") -> CompiledGrammar:
        return self.compiler.compile_grammar(ebnf, root_rule_name=root_rule_name)

    def compile_lark(self, lark_text: str, *, start: str = "start") -> CompiledGrammar:
        return self.compiler.compile_lark(lark_text, start=start)

    def compile_builtin_json(self) -> CompiledGrammar:
        return self.compiler.compile_builtin_json_grammar()

    def compile_structural_tag(self, tag: dict | str) -> CompiledGrammar:
        return self.compiler.compile_structural_tag(tag)

    def compile_choice(self, choices: Sequence[str]) -> CompiledGrammar:
        return self.compiler.compile_choice(choices)

    def new_state(self, compiled: CompiledGrammar) -> LeapgenState:
        return LeapgenState(compiled)

    def batch_fill_next_token_bitmask(self, states: Sequence[GrammarState], bitmask,
                                      indices: Sequence[int] | None = None) -> None:
        self._batch.batch_fill_next_token_bitmask(states, bitmask, indices)
