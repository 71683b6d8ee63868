"""leapgen's SGLang classes: ``BaseGrammarBackend`` (compiles, on SGLang's executor) and
``BaseGrammarObject`` (a request's grammar: masks, accept, rollback, jump-forward).

SGLang's ``GrammarManager`` drives them: ``get_cached_or_future_value`` ->
``dispatch_*`` on its thread pool -> ``copy()`` of the cached object for each
request; each decode step ``allocate_vocab_mask`` / ``fill_vocab_mask`` (per
row) / ``move_vocab_mask`` / ``apply_vocab_mask``; ``accept_token`` after
sampling (a ``ValueError`` there aborts that request); ``rollback`` in its
draft-tree traversal. Jump-forward is SGLang's: ``try_jump_forward`` gives the
forced text, SGLang retokenizes the output with it, and
``jump_and_retokenize`` moves the grammar onto the new tokens.

Imports SGLang: load only where it is installed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any, List, Optional, Tuple

import torch
from sglang.srt.constrained.base_grammar_backend import (BaseGrammarBackend, BaseGrammarObject, GrammarStats,
                                                         InvalidGrammarObject)
from sglang.srt.constrained.torch_ops.token_filter_torch_ops import set_token_filter_torch

from leapgen.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace, reset_token_bitmask
from leapgen.compiler import CompiledGrammar, GrammarCompiler
from leapgen.errors import LeapgenError, StackDepthError
from leapgen.matcher import GrammarMatcher
from leapgen.vocab import TokenizerInfo

logger = logging.getLogger(__name__)

MAX_ROLLBACK_TOKENS = 200
"""History a request's matcher keeps for ``rollback`` (SGLang's xgrammar backend keeps 200)."""

class LeapgenGrammar(BaseGrammarObject):
    """A request's grammar in SGLang, on a :class:`~leapgen.GrammarMatcher`.

    Parameters
    ----------
    compiled : CompiledGrammar
        Shared by every copy, never mutated.
    stop_token_ids : list of int or None
        The model's EOS ids (None: the vocabulary's stop tokens).
    key_string : str, optional
        The grammar as the request gave it (for error messages).
    grammar_stats : GrammarStats, optional
        SGLang's per-request compile statistics.
    """

    def __init__(self, compiled: CompiledGrammar, stop_token_ids: Optional[List[int]], key_string: str = "",
                 grammar_stats: Optional[GrammarStats] = None):
        super().__init__()
        self.compiled = compiled
        self.stop_token_ids = stop_token_ids
        self.key_string = key_string
        self.grammar_stats = grammar_stats
        self.matcher = GrammarMatcher(compiled, stop_token_ids=stop_token_ids, max_rollback_tokens=MAX_ROLLBACK_TOKENS)

    def _advance(self, token: int) -> bool:
        try:
            return self.matcher.accept_token(token)
        except StackDepthError:
            return False

    def accept_token(self, token: int) -> None:
        """Advance by ``token`` (mutates); ignored once terminated.

        Raises
        ------
        ValueError
            The grammar rejects the token (SGLang aborts that request).
        """
        if self.matcher.is_terminated():
            return
        self.current_token = token
        if not self._advance(token):
            raise ValueError(f"leapgen: token {token} is not accepted by the grammar {self.key_string[:200]!r}")

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (mutates; at most ``MAX_ROLLBACK_TOKENS``)."""
        self.matcher.rollback(k)

    def is_terminated(self) -> bool:
        """Whether a stop token was accepted."""
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device) -> torch.Tensor:
        """A CPU int32 bitmask ``(batch_size, ceil(vocab_size / 32))``, every token allowed."""
        return LeapgenGrammarBackend.allocate_vocab_mask(vocab_size, batch_size, device)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        """Write this request's allowed tokens into row ``idx`` (that row only; the state is unchanged)."""
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        """Every token allowed again (mutates ``vocab_mask``)."""
        reset_token_bitmask(vocab_mask)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device) -> torch.Tensor:
        """``vocab_mask`` on ``device`` (an asynchronous copy from pinned memory on CUDA)."""
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        """Set the logits of disallowed tokens to -inf, in place (CPU, or CUDA through Triton)."""
        apply_token_bitmask_inplace(logits, vocab_mask)

    def copy(self) -> "LeapgenGrammar":
        """A fresh request on the same compiled grammar (at its start), as SGLang's cache hands out."""
        stats = self.grammar_stats
        if stats is not None:
            stats = dataclasses.replace(stats, is_cache_hit=True, tree_traversal_time=[])
        return LeapgenGrammar(self.compiled, self.stop_token_ids, self.key_string, stats)

    # -- jump-forward (SGLang's call sequence) -----------------------------------------------------

    def try_jump_forward(self, tokenizer) -> Optional[Tuple[List[int], str]]:
        """The text the grammar forces from here, as SGLang's helper ``([], text)``; None if nothing is forced.

        The suffix ids are empty: leapgen's forced text never splits a UTF-8
        character, so no continuation bytes must be sampled as tokens first.
        Does not mutate.
        """
        text = self.matcher.find_jump_forward_string()
        return ([], text) if text else None

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        """``(forced text, -1)``: leapgen keeps no separate state number (see :meth:`jump_and_retokenize`)."""
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int], next_state: int) -> None:
        """Move onto the retokenized output: roll back to the longest common prefix of the old
        and new ids, then accept the new ids after it (mutates).

        Raises
        ------
        ValueError
            The grammar rejects a new id; the grammar is then back on ``old_output_ids``.
        """
        k = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            k += 1
        undone = len(old_output_ids) - k
        if undone:
            self.matcher.rollback(undone)
        for i, token in enumerate(new_output_ids[k:]):
            if not self._advance(token):
                if i:
                    self.matcher.rollback(i)
                for old in old_output_ids[k:]:
                    self._advance(old)
                raise ValueError(f"leapgen: retokenized output id {token} at position {k + i} is not accepted "
                                 f"by the grammar {self.key_string[:200]!r}")

    def __repr__(self) -> str:
        return f"LeapgenGrammar(key_string={self.key_string[:80]!r}, accepted={self.matcher.num_accepted_tokens})"


class LeapgenGrammarBackend(BaseGrammarBackend):
    """SGLang's grammar backend on :class:`~leapgen.GrammarCompiler` (one per scheduler).

    Parameters
    ----------
    tokenizer : Hugging Face tokenizer
    vocab_size : int
        The model's logits width.
    eos_token_ids : list of int, optional
        Stop tokens of every grammar (default: the tokenizer's).
    any_whitespace : bool, default True
        JSON layout; False is ``--constrained-json-disable-any-whitespace``.
    max_whitespace : int, optional
        Longest whitespace run in JSON (``--constrained-json-max-whitespace-cnt``).

    Raises
    ------
    leapgen.errors.TokenizerError
        The tokenizer's token -> bytes mapping cannot be read.
    """

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: Optional[List[int]] = None, *,
                 any_whitespace: bool = True, max_whitespace: Optional[int] = None):
        super().__init__()
        self.tokenizer_info = TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size,
                                                             stop_token_ids=eos_token_ids)
        self.compiler = GrammarCompiler(self.tokenizer_info)
        self.vocab_size = vocab_size
        self.stop_token_ids = eos_token_ids
        self.json_options = {"any_whitespace": any_whitespace}
        if max_whitespace is not None:
            self.json_options["max_whitespace"] = max_whitespace

    @property
    def is_support_token_filter(self) -> bool:
        """True: :meth:`set_token_filter` works (SGLang's strict thinking needs it)."""
        return True

    @staticmethod
    def set_token_filter(vocab_mask, token_ids, batch_idx, is_allowed=True, reset_vocab_mask=True) -> None:
        """Allow only (``is_allowed``) or forbid ``token_ids`` in row ``batch_idx`` (SGLang's torch op)."""
        set_token_filter_torch(vocab_mask, token_ids, batch_idx, is_allowed=is_allowed,
                               reset_vocab_mask=reset_vocab_mask)

    @staticmethod
    def allocate_vocab_mask(vocab_size: int, batch_size: int, device) -> torch.Tensor:
        """A CPU int32 bitmask ``(batch_size, ceil(vocab_size / 32))``, every token allowed; pinned
        where CUDA is, so :meth:`LeapgenGrammar.move_vocab_mask` copies asynchronously."""
        bitmask = allocate_token_bitmask(batch_size, vocab_size)
        return bitmask.pin_memory() if torch.cuda.is_available() else bitmask

    move_vocab_mask = staticmethod(LeapgenGrammar.move_vocab_mask)
    apply_vocab_mask = staticmethod(LeapgenGrammar.apply_vocab_mask)

    def _grammar(self, kind: str, key_string: str, compile_it) -> BaseGrammarObject:
        try:
            compiled = compile_it()
        except (LeapgenError, json.JSONDecodeError, RecursionError) as exc:
            logger.error("leapgen: invalid %s: %s", kind, exc)
            return InvalidGrammarObject(str(exc))
        return LeapgenGrammar(compiled, self.stop_token_ids, key_string, GrammarStats(dispatch_type=kind))

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        """A JSON Schema's text; ``"$$ANY$$"`` is any JSON value."""
        if key_string == "$$ANY$$":
            return self._grammar("json", key_string, self.compiler.compile_builtin_json_grammar)
        return self._grammar("json", key_string,
                             lambda: self.compiler.compile_json_schema(key_string, **self.json_options))

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        """An ECMAScript regex, matched in full."""
        return self._grammar("regex", key_string, lambda: self.compiler.compile_regex(key_string))

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        """A GBNF grammar with a ``root`` rule."""
        return self._grammar("ebnf", key_string, lambda: self.compiler.compile_grammar(key_string))

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        """xgrammar's structural tag (both forms), through ``GrammarCompiler.compile_structural_tag``."""
        return self._grammar("structural_tag", key_string, lambda: self.compiler.compile_structural_tag(
            key_string, any_whitespace=self.json_options["any_whitespace"]))

    def reset(self) -> None:
        """Drop SGLang's cache of grammar objects and leapgen's compiled grammars."""
        super().reset()
        self.compiler.clear_cache()
