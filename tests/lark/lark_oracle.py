"""The ``lark`` package as the accept/reject oracle of leapgen's Lark front-end.

leapgen's semantics is that of Lark's Earley parser with the dynamic lexer
and complete lexing (``lexer="dynamic_complete"``): every split of the text
into terminals is tried (see ``leapgen/grammar/lark.py``). ``lexer="dynamic"``
tries only the one match ``re`` returns for each terminal at each position,
so it rejects some strings ``dynamic_complete`` accepts (``WORD "b"`` on
``"ab"``: ``WORD`` takes ``ab``); :func:`lark_accepts` can ask either.
"""

from __future__ import annotations

import functools

import pytest

lark = pytest.importorskip("lark", reason="the lark package (the oracle) is not installed: pip install lark")


@functools.lru_cache(maxsize=None)
def lark_parser(text: str, lexer: str = "dynamic_complete", start: str = "start"):
    return lark.Lark(text, parser="earley", lexer=lexer, start=start)


def lark_accepts(text: str, s: str, lexer: str = "dynamic_complete") -> bool:
    """Whether Lark's Earley parser accepts ``s`` in full."""
    try:
        lark_parser(text, lexer).parse(s)
        return True
    except lark.exceptions.LarkError:
        return False


def leapgen_accepts(compiled, s: str) -> bool:
    """Whether leapgen's compiled grammar accepts ``s`` in full (a walk of its bytes)."""
    state = compiled.walk(compiled.start_state, s.encode("utf-8"))
    return state is not None and compiled.is_accepting(state)
