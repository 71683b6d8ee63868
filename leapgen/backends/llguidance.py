"""The llguidance backend (``pip install llguidance``), imported only when used.

llguidance has no compiled-grammar object shared between requests: a
compiled handle here is a validated prototype ``LLMatcher`` and
:meth:`LlguidanceBackend.new_state` deep-copies it. A rejected token would
put an ``LLMatcher`` into its sticky error state, so tokens are tried with
``try_consume_tokens`` (which leaves it unchanged on rejection).

Choices the engine makes: regexes use Rust ``regex`` syntax; JSON Schemas
follow the specification for unlisted properties whatever ``strict_mode``
says; EBNF goes through llguidance's GBNF-to-Lark converter.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from leapgen.backends.base import GrammarBackend, GrammarState, bitmask_row_pointer, fill_empty_row
from leapgen.errors import GrammarError, SchemaError
from leapgen.vocab import TokenizerInfo


def _whole_characters(data: bytes) -> str:
    """The longest prefix of ``data`` that decodes as UTF-8, decoded."""
    for cut in range(min(4, len(data) + 1)):
        try:
            return data[:len(data) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""


class LlguidanceState(GrammarState):
    """An ``llguidance.LLMatcher`` as a :class:`GrammarState`.

    History entries are ``(tokens consumed, terminated before)``, one per
    accepted token or string, so :meth:`rollback` counts what the caller
    accepted.
    """

    def __init__(self, matcher, tokenizer, stop_ids: frozenset[int]):
        self.matcher = matcher
        self._tokenizer = tokenizer
        self._stop_ids = stop_ids
        self._terminated = False
        self._history: list[tuple[int, bool]] = []

    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> bool:
        if self._terminated:  # llguidance would allow the stop tokens; leapgen allows nothing
            fill_empty_row(bitmask, index)
        else:
            self.matcher.unsafe_compute_mask_ptr(*bitmask_row_pointer(bitmask, index))
        return True

    def accept_token(self, token_id: int) -> bool:
        if self._terminated:
            return False
        if token_id in self._stop_ids:
            if not self.matcher.is_accepting() or not self.matcher.consume_token(token_id):
                return False
            self._history.append((1, False))
            self._terminated = True
            return True
        if self.matcher.try_consume_tokens([token_id]) != 1:
            return False
        self._history.append((1, False))
        return True

    def accept_string(self, text: str | bytes) -> bool:
        if self._terminated:
            return False
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        tokens = self._tokenizer.tokenize_bytes(data)
        done = self.matcher.try_consume_tokens(tokens)
        if done != len(tokens):
            if done:
                self.matcher.rollback(done)
            return False
        self._history.append((len(tokens), False))
        return True

    def rollback(self, num_tokens: int = 1) -> None:
        if num_tokens < 0 or num_tokens > len(self._history):
            raise ValueError(f"cannot roll back {num_tokens} tokens; {len(self._history)} in history")
        if num_tokens == 0:
            return
        undone = self._history[-num_tokens:]
        del self._history[-num_tokens:]
        self.matcher.rollback(sum(n for n, _ in undone))
        self._terminated = undone[0][1]

    def is_terminated(self) -> bool:
        return self._terminated

    def is_completed(self) -> bool:
        return self._terminated or self.matcher.is_accepting()

    def find_jump_forward_string(self) -> str:
        if self._terminated:
            return ""
        return _whole_characters(self.matcher.compute_ff_bytes())

    def fork(self) -> "LlguidanceState":
        other = LlguidanceState(self.matcher.deep_copy(), self._tokenizer, self._stop_ids)
        other._terminated = self._terminated
        other._history = list(self._history)
        return other


class LlguidanceBackend(GrammarBackend):
    """llguidance 1.x behind the backend interface.

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
    hf_tokenizer : transformers.PreTrainedTokenizerFast
        Required.
    num_threads : int, optional
        Threads of the ``LLExecutor`` used by the batch fill (llguidance's
        default when None).
    """

    name = "llguidance"

    def __init__(self, tokenizer_info: TokenizerInfo, *, hf_tokenizer: Any = None, num_threads: int | None = None):
        super().__init__(tokenizer_info, hf_tokenizer=hf_tokenizer)
        import llguidance
        import llguidance.hf

        self._llg = llguidance
        self.tokenizer = llguidance.hf.from_tokenizer(self._require_hf_tokenizer(),
                                                      n_vocab=tokenizer_info.vocab_size,
                                                      eos_token=list(tokenizer_info.stop_token_ids))
        self._stop_ids = frozenset(tokenizer_info.stop_token_ids)
        self._num_threads = num_threads
        self._executor = None

    def _matcher(self, grammar: str, error_type):
        matcher = self._llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            message = "llguidance: " + " ".join(matcher.get_error().split())[:500]
            if error_type is SchemaError:
                raise SchemaError(message, pointer="")
            raise GrammarError(message)
        return matcher

    def compile_regex(self, pattern: str):
        return self._matcher(self._llg.LLMatcher.grammar_from_regex(pattern), GrammarError)

    def compile_json_schema(self, schema, *, any_whitespace: bool = True, strict_mode: bool = True,
                            any_order: bool = False):
        if any_order:
            raise GrammarError("llguidance: no any_order option (properties in any order); use the leapgen backend")
        text = schema if isinstance(schema, str) else json.dumps(schema)
        options = {"whitespace_flexible": any_whitespace}
        if not any_whitespace:
            options.update(item_separator=",", key_separator=":")
        try:
            grammar = self._llg.LLMatcher.grammar_from_json_schema(text, defaults=options)
        except ValueError as e:
            raise SchemaError(f"llguidance: {e}", pointer="") from None
        return self._matcher(grammar, SchemaError)

    def compile_grammar(self, ebnf: str, *, root_rule_name: str = "root"):
        if root_rule_name != "root":
            raise GrammarError("llguidance: GBNF grammars must start at a rule named 'root'")
        try:
            grammar = self._llg.grammar_from("gbnf", ebnf)
        except ValueError as e:
            raise GrammarError(f"llguidance: {e}") from None
        return self._matcher(grammar, GrammarError)

    def compile_lark(self, lark_text: str, *, start: str = "start"):
        """llguidance's own Lark dialect (what vLLM's guidance backend takes): a lexer of greedy
        longest-match tokens, so not leapgen's Earley semantics everywhere."""
        if start != "start":
            raise GrammarError("llguidance: Lark grammars must start at a rule named 'start'")
        try:
            grammar = self._llg.grammar_from("lark", lark_text)
        except ValueError as e:
            raise GrammarError(f"llguidance: {e}") from None
        return self._matcher(grammar, GrammarError)

    def compile_builtin_json(self):
        return self._matcher(self._llg.LLMatcher.grammar_from_json_schema({}), SchemaError)

    def new_state(self, compiled) -> LlguidanceState:
        return LlguidanceState(compiled.deep_copy(), self.tokenizer, self._stop_ids)

    def batch_fill_next_token_bitmask(self, states: Sequence[GrammarState], bitmask,
                                      indices: Sequence[int] | None = None) -> None:
        if self._executor is None:
            self._executor = self._llg.LLExecutor(self._num_threads)
        pointer, row_bytes = bitmask_row_pointer(bitmask, 0)
        rows = range(len(states)) if indices is None else indices
        self._executor.unsafe_compute_mask_ptr([(s.matcher, int(r)) for s, r in zip(states, rows)],
                                               pointer, row_bytes, bitmask.shape[0])
