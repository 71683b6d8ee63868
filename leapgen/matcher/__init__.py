"""Per-request matching: GrammarMatcher, and BatchGrammarMatcher for many at once."""

from leapgen.matcher.batch import BatchGrammarMatcher
from leapgen.matcher.matcher import GrammarMatcher

__all__ = ["BatchGrammarMatcher", "GrammarMatcher"]
