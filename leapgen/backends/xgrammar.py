"""The xgrammar backend (``pip install xgrammar``), imported only when used.

xgrammar builds its vocabulary from the Hugging Face tokenizer; the stop
tokens are leapgen's (``tokenizer_info.stop_token_ids``) so that masks
compare bit for bit. Its errors (``RuntimeError`` from C++) become
:class:`~leapgen.errors.GrammarError` subclasses.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from leapgen.backends.base import GrammarBackend, GrammarState, fill_empty_row
from leapgen.errors import GrammarError, SchemaError
from leapgen.vocab import TokenizerInfo


class XgrammarState(GrammarState):
    """An ``xgrammar.GrammarMatcher`` as a :class:`GrammarState`."""

    def __init__(self, matcher):
        self.matcher = matcher

    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> bool:
        if self.matcher.is_terminated():  # xgrammar raises here; leapgen allows nothing
            fill_empty_row(bitmask, index)
            return True
        return self.matcher.fill_next_token_bitmask(bitmask, index)

    def accept_token(self, token_id: int) -> bool:
        return self.matcher.accept_token(token_id)

    def accept_string(self, text: str | bytes) -> bool:
        return self.matcher.accept_string(text)

    def rollback(self, num_tokens: int = 1) -> None:
        try:
            self.matcher.rollback(num_tokens)
        except RuntimeError as e:  # more than the history holds
            raise ValueError(f"cannot roll back {num_tokens} tokens: {e}") from None

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def is_completed(self) -> bool:
        return self.matcher.is_completed()

    def find_jump_forward_string(self) -> str:
        return self.matcher.find_jump_forward_string()

    def fork(self) -> "XgrammarState":
        return XgrammarState(self.matcher.fork())


class XgrammarBackend(GrammarBackend):
    """xgrammar 0.2 behind the backend interface.

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
    hf_tokenizer : transformers.PreTrainedTokenizerFast
        Required.
    max_threads : int, default 8
        xgrammar's compile threads.
    cache_enabled : bool, default True
        xgrammar's compiled-grammar cache.
    """

    name = "xgrammar"

    def __init__(self, tokenizer_info: TokenizerInfo, *, hf_tokenizer: Any = None, max_threads: int = 8,
                 cache_enabled: bool = True):
        super().__init__(tokenizer_info, hf_tokenizer=hf_tokenizer)
        import xgrammar

        self._xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(
            self._require_hf_tokenizer(), vocab_size=tokenizer_info.vocab_size,
            stop_token_ids=list(tokenizer_info.stop_token_ids))
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=max_threads, cache_enabled=cache_enabled)
        self._batch = None

    def _compile(self, error_type, call, *args, **kw):
        try:
            return call(*args, **kw)
        except (RuntimeError, ValueError, TypeError) as e:
            # drop the "[hh:mm:ss] /project/cpp/file.cc:94: " prefix of C++ errors
            text = re.sub(r"^\[[0-9:]+\] \S+:\d+: ", "", str(e).strip()) or type(e).__name__
            message = f"xgrammar: {' '.join(text.split())[:500]}"
            if error_type is SchemaError:
                raise SchemaError(message, pointer="") from None
            raise GrammarError(message) from None

    def compile_regex(self, pattern: str):
        return self._compile(GrammarError, self.compiler.compile_regex, pattern)

    def compile_json_schema(self, schema, *, any_whitespace: bool = True, strict_mode: bool = True,
                            any_order: bool = False):
        text = schema if isinstance(schema, str) else json.dumps(schema)
        separators = None if any_whitespace else (",", ":")
        extra = {"any_order": True} if any_order else {}  # xgrammar >= 0.2.9 (keys may repeat or be missing)
        return self._compile(SchemaError, self.compiler.compile_json_schema, text, any_whitespace=any_whitespace,
                             separators=separators, strict_mode=strict_mode, **extra)

    def compile_grammar(self, ebnf: str, *, root_rule_name: str = "root"):
        return self._compile(GrammarError, self.compiler.compile_grammar, ebnf, root_rule_name=root_rule_name)

    def compile_builtin_json(self):
        return self._compile(GrammarError, self.compiler.compile_builtin_json_grammar)

    def compile_structural_tag(self, tag: dict | str):
        text = tag if isinstance(tag, str) else json.dumps(tag)
        if isinstance(tag, dict) and "format" not in tag and "structures" in tag:  # the legacy form
            items = [self._xgr.StructuralTagItem(begin=s["begin"], schema=s["schema"], end=s["end"])
                     for s in tag["structures"]]
            return self._compile(GrammarError, self.compiler.compile_structural_tag, items, tag["triggers"])
        return self._compile(GrammarError, self.compiler.compile_structural_tag, text)

    def new_state(self, compiled) -> XgrammarState:
        return XgrammarState(self._xgr.GrammarMatcher(compiled))

    def batch_fill_next_token_bitmask(self, states: Sequence[GrammarState], bitmask,
                                      indices: Sequence[int] | None = None) -> None:
        if self._batch is None:
            self._batch = self._xgr.BatchGrammarMatcher()
        self._batch.batch_fill_next_token_bitmask([s.matcher for s in states], bitmask,
                                                  None if indices is None else list(indices))
