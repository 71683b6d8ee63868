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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from leapgen.errors import LeapgenError


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

    Returns
    -------
    JumpForward or None
        None when nothing is forced, when the retokenization adds no token, or
        when the matcher rejects the new ids (then nothing changed and the
        engine samples this step as usual).

    Raises
    ------
    leapgen.errors.LeapgenError
        If the matcher cannot be restored to ``output_ids`` after a rejected
        retokenization (its state is then unknown; the engine fails the
        request).
    """
    forced = matcher.find_jump_forward_string()
    if not forced:
        return None
    old = list(output_ids)
    new = list(encode(output_text + forced))[:max_tokens]
    p = common_prefix_length(old, new)
    if len(new) <= p:
        return None
    try:
        matcher.rollback(len(old) - p)
    except (LeapgenError, ValueError, RuntimeError):
        # Past the matcher's rollback window: skip this jump (state unchanged).
        return None
    if _accept_all(matcher, new[p:]):
        return JumpForward(forced_text=forced, new_ids=new, common_prefix=p)
    # Restore: the matcher is at the common prefix again; re-accept the old ids.
    if not _accept_all(matcher, old[p:]):
        raise LeapgenError(
            "jump-forward: the matcher rejected the retokenized output and then its own "
            "previous tokens; its state is lost"
        )
    return None


def _accept_all(matcher: Any, ids: Sequence[int]) -> bool:
    """Accept ``ids`` in order; on a rejection roll back the ones accepted and
    return False (the matcher is then where it started)."""
    for k, token in enumerate(ids):
        if not matcher.accept_token(token):
            if k:
                matcher.rollback(k)
            return False
    return True
