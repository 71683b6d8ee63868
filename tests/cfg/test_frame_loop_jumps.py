"""Frame sorts of string states that a token slice covers through its memo (the states an UNBOUNDED
check met): the first character's state, which jumps to the body's LOOP state, and the states of a
body of two alternating states, which are no LOOP. Masks against a hand-written recognizer of the
grammars' prefixes that shares nothing with leapgen."""

from __future__ import annotations

import codecs

import numpy as np
import pytest

from leapgen import GrammarMatcher

# Nested lists of strings: context-free, so masks come from frame sorts. After an opening quote every
# character of the slice lives (UNBOUNDED), and the first one leads to the body's loop.
NESTED_STRINGS_GBNF = r"""
root ::= list
list ::= "[" item ( "," item )* "]"
item ::= list | "\"" [^"\\] [^"\\]* "\""
"""

# The same with strings of an even length: the body alternates between two states, neither a LOOP.
NESTED_EVEN_STRINGS_GBNF = r"""
root ::= list
list ::= "[" item ( "," item )* "]"
item ::= list | "\"" ( [^"\\] [^"\\] )* "\""
"""


def _is_prefix(text: bytes, even: bool) -> bool:
    """Whether ``text`` starts some string of the grammar (NESTED_EVEN_STRINGS_GBNF where ``even``,
    else NESTED_STRINGS_GBNF): a character-level state machine; a trailing incomplete UTF-8 character
    counts where a string character may follow."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        chars = decoder.decode(text, final=False)
    except UnicodeDecodeError:
        return False
    state, depth, length = "root", 0, 0
    for c in chars:
        if state in ("root", "item") and c == "[":
            state, depth = "item", depth + 1
        elif state == "item" and c == '"':
            state, length = "string", 0
        elif state == "string" and c not in '"\\':
            length += 1
        elif state == "string" and c == '"' and (length % 2 == 0 if even else length > 0):
            state = "after"
        elif state == "after" and c == ",":
            state = "item"
        elif state == "after" and c == "]":
            depth -= 1
            state = "done" if depth == 0 else "after"
        else:
            return False
    pending = decoder.getstate()[0]
    return not pending or state == "string"


@pytest.mark.parametrize("even", [False, True], ids=["first character, then a loop", "two alternating states"])
def test_string_masks_from_slice_memo_states_match_the_recognizer(grammar_compiler, even):
    compiled = grammar_compiler("llama3").compile_grammar(NESTED_EVEN_STRINGS_GBNF if even else NESTED_STRINGS_GBNF)
    info = compiled.tokenizer_info
    ordinary = [t for t in range(info.vocab_size) if t not in info.special_token_ids and info.token_bytes[t]]
    words = (info.vocab_size + 31) // 32
    for prefix in ('["', '[["xy",["', '["ab', '["abc', '["日', '[["éa","', '["x'):
        m = GrammarMatcher(compiled)
        assert m.accept_string(prefix)
        bitmask = np.zeros((1, words), np.int32)
        m.fill_next_token_bitmask(bitmask)
        bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")
        got = {t for t in ordinary if bits[t]}
        want = {t for t in ordinary if _is_prefix(prefix.encode() + info.token_bytes[t], even)}
        assert got == want, (prefix, sorted(got ^ want)[:10])
    inner = getattr(compiled, "compiled", compiled)
    if not even:
        assert any(q >= 0 for q in inner._loops.target.values())  # some sort jumped to the body's LOOP state
