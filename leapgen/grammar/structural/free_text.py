"""The free-text languages of structural tags, and markers given as one token.

Free text is scanned as xgrammar scans it (an Aho-Corasick automaton over the
*patterns*: the triggers, the excluded strings, the ends of the enclosing
tag). After each character:

- an excluded string ending there (any of them, a suffix of another
  included) rejects the text;
- else, when the scan's longest partial match is exactly a trigger, that
  trigger dispatches: a tag whose begin starts with it follows.

So a trigger that ends inside a longer pattern's prefix is not detected
there: with triggers ``<`` and ``y<a``, the ``<`` of ``y<x`` stays text, and
``y<a`` dispatches on ``y<a`` alone. As languages over text ``Σ*`` (``S`` =
the prefixes of the patterns, ``E`` the excluded ones, ``t`` a trigger):

- ``t`` is detected at the end of ``Σ* t`` minus ``Σ* H_t``, ``H_t`` the strings
  of ``S`` longer than ``t`` that end with it (the partial matches hiding ``t``);
- an *event* is an excluded string's end or a detection; free text is ``Σ*``
  minus every string with an event at some position;
- the texts dispatching on ``t`` are those whose first event is ``t``'s
  detection at their end; those without the trigger (their right quotient by
  ``t``) are followed by ``t`` spelled out or by the trigger's one added token,
  with the same text.

:class:`Markers` lets a begin, end, trigger, separator or constant string be
given in part as one special or added token (``<tool_call>`` in Qwen's
vocabulary): each occurrence of such a token's text becomes the text *or* the
token's :func:`~leapgen.grammar.ir.token_literal`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from leapgen.grammar import ir

ANY_TEXT = ir.star(ir.ANY_CHAR)
"""Any UTF-8 text (no token literal: those start with a byte UTF-8 never holds)."""


def _one_of(strings: Iterable[str]) -> ir.Node:
    return ir.alt(*(ir.lit(s) for s in sorted(set(strings))))


class FreeText:
    """The scan of one free-text region (see the module docstring).

    Parameters
    ----------
    triggers : sequence of str
        Non-empty strings, none a prefix of another.
    excludes : sequence of str
        Non-empty strings the text never holds (the enclosing tag's ends among them).
    """

    def __init__(self, triggers: Sequence[str], excludes: Sequence[str]):
        self.triggers = tuple(dict.fromkeys(triggers))
        self.excludes = frozenset(excludes)
        patterns = set(self.triggers) | self.excludes
        self._prefixes = {p[:k] for p in patterns for k in range(1, len(p) + 1)}
        ends = [ir.seq(ANY_TEXT, _one_of(self.excludes))] if self.excludes else []
        self._events = ir.alt(*ends, *(self._detected(t) for t in self.triggers))

    def _detected(self, trigger: str) -> ir.Node:
        """The texts at whose end ``trigger`` is detected."""
        hiding = {s for s in self._prefixes if len(s) > len(trigger) and s.endswith(trigger)}
        at_end = ir.seq(ANY_TEXT, ir.lit(trigger))
        return ir.diff(at_end, ir.seq(ANY_TEXT, _one_of(hiding))) if hiding else at_end

    def text(self) -> ir.Node:
        """Free text: no event anywhere."""
        if not self.triggers and not self.excludes:
            return ANY_TEXT
        return ir.diff(ANY_TEXT, ir.seq(self._events, ANY_TEXT))

    def before(self, trigger: str) -> ir.Node:
        """The texts after which ``trigger`` (spelled out or as its token) dispatches: free text up to
        the trigger's start, whose first event is then the trigger's detection at its end."""
        dispatching = ir.diff(self._detected(trigger), ir.seq(ANY_TEXT, _one_of(self.excludes))
                              ) if self.excludes else self._detected(trigger)
        first = ir.diff(dispatching, ir.seq(self._events, ir.plus(ir.ANY_CHAR)))
        return ir.quotient(first, trigger)


class Markers:
    """Marker strings that may be given as one special or added token.

    Parameters
    ----------
    added_tokens : mapping of str to sequence of int, or None
        Token text -> the ids of the tokens with that text (the
        vocabulary's special and added tokens, stop tokens aside). None or
        empty: strings are text only.
    """

    def __init__(self, added_tokens: Mapping[str, Sequence[int]] | None):
        self.by_text: dict[str, tuple[int, ...]] = {t: tuple(ids) for t, ids in (added_tokens or {}).items()
                                                    if t and ids}
        self.ids = frozenset(i for ids in self.by_text.values() for i in ids)
        by_first: dict[str, list[str]] = {}
        for text in self.by_text:
            by_first.setdefault(text[0], []).append(text)
        self._by_first = {c: sorted(ts, key=len, reverse=True) for c, ts in by_first.items()}

    def tokens(self, ids: Iterable[int]) -> ir.Node:
        """Any one of the tokens ``ids`` (as token literals)."""
        return ir.alt(*(ir.token_literal(i) for i in sorted(set(ids))))

    def text(self, s: str) -> ir.Node:
        """``s``, where each occurrence of an added token's text (leftmost, longest first, as Hugging
        Face tokenizers split them out) may also be that token."""
        if not self._by_first:
            return ir.lit(s)
        pieces: list[ir.Node] = []
        i = run = 0
        while i < len(s):
            for cand in self._by_first.get(s[i], ()):
                if s.startswith(cand, i):
                    pieces.append(ir.lit(s[run:i]))
                    pieces.append(ir.alt(ir.lit(cand), self.tokens(self.by_text[cand])))
                    i = run = i + len(cand)
                    break
            else:
                i += 1
        pieces.append(ir.lit(s[run:]))
        return ir.seq(*pieces)
