"""What compiling a structural tag adds to a compile: its marker tokens, its free text's masks.

The tag itself is read and lowered to IR by :mod:`leapgen.grammar.structural`;
:meth:`~leapgen.GrammarCompiler.compile_structural_tag` compiles that IR as
any other, with these two steps around it.
"""

from __future__ import annotations

from leapgen.compiler.compiled import CompiledGrammar
from leapgen.compiler.token_index import TokenIndex
from leapgen.grammar.structural import StructuralTag, free_text_stops
from leapgen.vocab import TokenizerInfo

#: Free-text states whose masks a structural tag's compile computes (see CompiledGrammar.prepare_free_text).
EAGER_FREE_TEXT_STATES = 64


def added_tokens(tokenizer_info: TokenizerInfo) -> dict[str, list[int]]:
    """Text -> ids of the vocabulary's special and added tokens that a tag's markers may be given
    as (stop tokens left out: they end generation instead). Pure."""
    stop = set(tokenizer_info.stop_token_ids)
    out: dict[str, list[int]] = {}
    for i, text in sorted(tokenizer_info.special_token_texts.items()):
        if i not in stop:
            out.setdefault(text, []).append(i)
    return out


def prepare_free_text(compiled: CompiledGrammar, tag: StructuralTag, token_index: TokenIndex) -> None:
    """Give a tag's compiled grammar the token slice of the characters that complete none of its
    free text's patterns, then compute its free-text states' masks (mutates its caches only)."""
    stops = free_text_stops(tag)
    if stops is not None:
        compiled.use_slices(token_index.with_free_text_slice(stops))
    compiled.prepare_free_text(EAGER_FREE_TEXT_STATES)
