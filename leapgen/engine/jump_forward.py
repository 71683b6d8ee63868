"""Jump-forward: append the text a grammar forces, retokenized, without
sampling it (the *compressed FSM* of SGLang, Zheng et al. 2024, section 4).

One responsibility: given a matcher that has accepted the output so far,
compute the new output ids and move the matcher onto them. The engine then
crops the KV cache to the common prefix and feeds the new tokens in one
forward pass (see ``LLM.step``).

Why retokenize: the forced string (``", "age": ``) is appended as *text*; its
tokens, and sometimes the last output tokens before it, are re-encoded the way
the tokenizer would encode the whole output (``"`` + ``name":`` becomes
``"name`` + ``":``), so the model sees the tokenization it was trained on.
Only the token ids past the longest common prefix with the current ids change.

The output is retokenized alone (``tokenizer.encode(output_text,
add_special_tokens=False)``), not together with the prompt: exact for
byte-level BPE tokenizers whose pre-tokenizer splits after the chat template's
``"\\n"`` (SmolLM2, GPT-2, Llama-3, Qwen); a SentencePiece tokenizer would add
a prefix space here (not handled yet).

Token healing (``healing=``): the last forced token is held back when the
grammar allows a longer vocabulary token that starts with it, so the model
picks the token that crosses the end of the forced text itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from leapgen.engine.token_healing import TokenHealing
from leapgen.errors import LeapgenError, StackDepthError


@dataclass(frozen=True)
class JumpForward:
    """The result of one jump-forward.

    Attributes
    ----------
    forced_text : str
        The string the grammar forced.
    new_ids : list of int
        The whole new output (retokenized), accepted by the matcher.
    common_prefix : int
        Length of the longest common prefix of the old and new output ids.
    """

    forced_text: str
    new_ids: list[int]
    common_prefix: int


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def try_jump_forward(
    matcher: Any,
    output_ids: Sequence[int],
    output_text: str,
    encode: Callable[[str], list[int]],
    *,
    max_tokens: int,
    healing: TokenHealing | None = None,
    min_chars: int = 1,
    text: str | None = None,
) -> JumpForward | None:
    """Append the grammar's forced continuation to the output, if any.

    Parameters
    ----------
    matcher : GrammarMatcher
        Has accepted exactly ``output_ids``. Mutated on success: rolled back
        to the common prefix and moved forward over the new ids. Left in its
        original state when this returns None.
    output_ids : sequence of int
        The current output ids. Not mutated.
    output_text : str
        Their decoded text (whole UTF-8 characters only).
    encode : callable
        ``encode(text) -> list[int]``: the tokenizer, without special tokens.
    max_tokens : int
        The new output is cut to this many tokens.
    healing : TokenHealing or None, default None
        When given, the last new token is held back (not appended) if it lies
        wholly inside the forced text and the grammar allows a longer token
        starting with its bytes (see :mod:`leapgen.engine.token_healing`).
    min_chars : int, default 1
        Forced text shorter than this many characters is not jumped (sampled
        instead; SGLang skips jumps of one character). See
        :data:`leapgen.engine.llm_engine.JUMP_FORWARD_MIN_CHARS`.
    text : str or None, default None
        Append this text instead of the grammar's forced string (the engine
        ending a reasoning model's thinking); no healing then. The matcher
        must accept it.

    Returns
    -------
    JumpForward or None
        None when nothing (or less than ``min_chars``) is forced, when the retokenization adds no token,
        when the matcher rejects the new ids, or when healing holds back the
        only forced token (then nothing changed and the engine samples this
        step as usual).

    Raises
    ------
    leapgen.errors.LeapgenError
        If the matcher cannot be restored to ``output_ids`` after a rejected
        retokenization (its state is then unknown; the engine fails the
        request).
    """
    forced = matcher.find_jump_forward_string() if text is None else text
    if not forced or (text is None and len(forced) < min_chars):
        return None
    if text is not None:
        healing = None
    old = list(output_ids)
    encoded = list(encode(output_text + forced))
    new = encoded[:max_tokens]
    p = common_prefix_length(old, new)
    if len(new) <= p:
        return None
    try:
        matcher.rollback(len(old) - p)
    except (LeapgenError, ValueError, RuntimeError):
        # Past the matcher's rollback window: skip this jump (state unchanged).
        return None
    if not _accept_all(matcher, new[p:]):
        _restore(matcher, old[p:])
        return None
    if healing is not None and len(new) == len(encoded):  # (not when cut by max_tokens)
        kept_bytes = sum(len(healing.token_bytes[t]) for t in new[:-1])
        output_bytes = len(output_text.encode("utf-8"))
        if kept_bytes >= output_bytes:  # the last token is forced text only
            matcher.rollback(1)
            if healing.allows_longer_token(matcher, new[-1]):
                new = new[:-1]
                if kept_bytes == output_bytes:  # nothing forced is left to append
                    if len(new) > p:
                        matcher.rollback(len(new) - p)
                    _restore(matcher, old[p:])
                    return None
                return JumpForward(forced_text=forced, new_ids=new, common_prefix=p)
            matcher.accept_token(new[-1])
    return JumpForward(forced_text=forced, new_ids=new, common_prefix=p)


def _restore(matcher: Any, old_tail: Sequence[int]) -> None:
    """Re-accept the old ids past the common prefix (the matcher stands at it).

    Raises
    ------
    leapgen.errors.LeapgenError
        If the matcher rejects its own previous tokens (its state is lost).
    """
    if not _accept_all(matcher, old_tail):
        raise LeapgenError(
            "jump-forward: the matcher rejected the retokenized output and then its own "
            "previous tokens; its state is lost"
        )


def _accept_all(matcher: Any, ids: Sequence[int]) -> bool:
    """Accept ``ids`` in order; on a rejection roll back the ones accepted and
    return False (the matcher is then where it started)."""
    for k, token in enumerate(ids):
        try:
            accepted = matcher.accept_token(token)
        except StackDepthError:
            accepted = False
        if not accepted:
            if k:
                matcher.rollback(k)
            return False
    return True
