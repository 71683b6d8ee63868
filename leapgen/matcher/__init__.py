"""Per-request matching: GrammarMatcher."""

from leapgen.matcher.matcher import GrammarMatcher

__all__ = ["GrammarMatcher"]
