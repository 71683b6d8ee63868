"""The outlines-core backend (``pip install outlines-core``), imported only when used.

outlines-core compiles a regex into an ``Index`` (state -> token -> state)
over a ``Vocabulary`` of token bytes, built here from
``tokenizer_info.token_bytes`` (so no Hugging Face tokenizer is needed). It
has one end-of-sequence token: the first of ``tokenizer_info.stop_token_ids``
(the others are never allowed). JSON Schemas become a regex
(``build_regex_from_schema``), which admits no unlisted property whatever
``strict_mode`` says. It has no context-free grammars, no jump-forward and no
string acceptance; those raise.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from leapgen.backends.base import GrammarBackend, GrammarState, bitmask_row_pointer, fill_empty_row
from leapgen.errors import GrammarError, SchemaError
from leapgen.vocab import TokenizerInfo

_ADVANCE, _STOP = 0, 1


class OutlinesCoreState(GrammarState):
    """An ``outlines_core.Guide`` as a :class:`GrammarState`.

    The Guide has no transition on its end-of-sequence token, so accepting a
    stop token in a final state is recorded here, not in the Guide.
    """

    can_jump_forward = False
    can_accept_string = False

    def __init__(self, guide, stop_id: int):
        self.guide = guide
        self._stop_id = stop_id
        self._history: list[int] = []

    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> bool:
        if self.is_terminated():
            fill_empty_row(bitmask, index)
        else:
            pointer, nbytes = bitmask_row_pointer(bitmask, index)
            self.guide.write_mask_into(pointer, nbytes // 4, 4)
        return True

    def accept_token(self, token_id: int) -> bool:
        if self.is_terminated():
            return False
        if token_id == self._stop_id:
            if not self.guide.is_finished():
                return False
            self._history.append(_STOP)
            return True
        try:
            self.guide.advance(token_id, return_tokens=False)
        except ValueError:
            return False
        self._history.append(_ADVANCE)
        return True

    def rollback(self, num_tokens: int = 1) -> None:
        if num_tokens < 0 or num_tokens > len(self._history):
            raise ValueError(f"cannot roll back {num_tokens} tokens; {len(self._history)} in history")
        undone = self._history[len(self._history) - num_tokens:]
        del self._history[len(self._history) - num_tokens:]
        advances = undone.count(_ADVANCE)
        if advances:
            self.guide.rollback_state(advances)

    def is_terminated(self) -> bool:
        return bool(self._history) and self._history[-1] == _STOP

    def is_completed(self) -> bool:
        return self.is_terminated() or self.guide.is_finished()

    def fork(self) -> "OutlinesCoreState":
        other = OutlinesCoreState(copy.copy(self.guide), self._stop_id)
        other._history = list(self._history)
        return other


class OutlinesCoreBackend(GrammarBackend):
    """outlines-core 0.2 behind the backend interface.

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
    hf_tokenizer : optional
        Not needed.
    max_rollback : int, default 4096
        History each ``Guide`` keeps for rollback.
    """

    name = "outlines-core"

    def __init__(self, tokenizer_info: TokenizerInfo, *, hf_tokenizer: Any = None, max_rollback: int = 4096):
        super().__init__(tokenizer_info, hf_tokenizer=hf_tokenizer)
        import outlines_core

        self._oc = outlines_core
        if not tokenizer_info.stop_token_ids:
            raise ValueError("outlines-core needs a stop token; the vocabulary has none")
        self._stop_id = tokenizer_info.stop_token_ids[0]
        by_bytes: dict[bytes, list[int]] = {}
        for token_id, data in enumerate(tokenizer_info.token_bytes):
            if data:
                by_bytes.setdefault(data, []).append(token_id)
        self.vocabulary = outlines_core.Vocabulary(self._stop_id, by_bytes)
        self.max_rollback = max_rollback

    def _index(self, regex: str, error_type):
        try:
            return self._oc.Index(regex, self.vocabulary)
        except (ValueError, RuntimeError) as e:
            if error_type is SchemaError:
                raise SchemaError(f"outlines-core: {e}", pointer="") from None
            raise GrammarError(f"outlines-core: {e}") from None

    def compile_regex(self, pattern: str):
        return self._index(pattern, GrammarError)

    def compile_json_schema(self, schema, *, any_whitespace: bool = True, strict_mode: bool = True,
                            any_order: bool = False):
        if any_order:
            raise GrammarError("outlines-core: no any_order option (properties in any order); use the leapgen backend")
        from outlines_core.json_schema import build_regex_from_schema

        text = schema if isinstance(schema, str) else json.dumps(schema)
        try:
            regex = build_regex_from_schema(text, whitespace_pattern=None if any_whitespace else "")
        except (ValueError, RuntimeError, TypeError) as e:
            raise SchemaError(f"outlines-core: {e}", pointer="") from None
        return self._index(regex, SchemaError)

    def compile_grammar(self, ebnf: str, *, root_rule_name: str = "root"):
        raise GrammarError("outlines-core compiles regular languages only, not EBNF grammars")

    def compile_builtin_json(self):
        raise GrammarError("outlines-core has no grammar of arbitrary (nested) JSON")

    def new_state(self, compiled) -> OutlinesCoreState:
        return OutlinesCoreState(self._oc.Guide(compiled, max_rollback=self.max_rollback), self._stop_id)
