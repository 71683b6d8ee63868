"""What compiling a structural tag adds to a compile: its marker tokens, its masks at compile time.

The tag itself is read and lowered to IR by :mod:`leapgen.grammar.structural`;
:meth:`~leapgen.GrammarCompiler.compile_structural_tag` compiles that IR as
any other, with these two steps around it.
"""

from __future__ import annotations

import numpy as np

from leapgen.compiler.compiled import WIDE_STATE_BYTES, CompiledGrammar
from leapgen.compiler.token_index import TokenIndex
from leapgen.grammar.structural import StructuralTag, free_text_stops
from leapgen.vocab import TokenizerInfo

#: Free-text states whose masks a structural tag's compile computes where it does not compute every
#: state's (see CompiledGrammar.prepare_free_text).
EAGER_FREE_TEXT_STATES = 64
#: A structural tag compiled to one DFA of at most this many states gets every state's mask at
#: compile time (RegularGrammar.precompute_rows: ~20 µs of CPU and ~1.5 KB a state with Llama-3;
#: 128 tools of Glaiveai2K make ~23,000 states).
EAGER_ROW_STATES = 50_000


def added_tokens(tokenizer_info: TokenizerInfo) -> dict[str, list[int]]:
    """Text -> ids of the vocabulary's special and added tokens that a tag's markers may be given
    as (stop tokens left out: they end generation instead). Pure."""
    stop = set(tokenizer_info.stop_token_ids)
    out: dict[str, list[int]] = {}
    for i, text in sorted(tokenizer_info.special_token_texts.items()):
        if i not in stop:
            out.setdefault(text, []).append(i)
    return out


def prepare_masks(compiled: CompiledGrammar, tag: StructuralTag, token_index: TokenIndex) -> None:
    """Give a tag's compiled grammar the token slice of the characters that complete none of its
    free text's patterns, then compute its masks: every state's where it is one DFA of at most
    :data:`EAGER_ROW_STATES` states (as xgrammar does at compile time: a first visit then costs
    what a cached one does), else its free-text states' (mutates its caches only)."""
    stops = free_text_stops(tag)
    if stops is not None:
        compiled.use_slices(token_index.with_free_text_slice(stops))
    if not compiled.is_regular:
        compiled.prepare_free_text(EAGER_FREE_TEXT_STATES)
    elif compiled.n_states <= EAGER_ROW_STATES:
        compiled.precompute_rows(np.arange(compiled.n_states))
    else:
        wide = np.flatnonzero((compiled.dfa.trans >= 0).sum(axis=1) >= WIDE_STATE_BYTES)
        compiled.precompute_rows(wide[:EAGER_FREE_TEXT_STATES])
