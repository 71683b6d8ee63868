"""leapgen: structured generation for LLMs.

Regexes, JSON Schemas and grammars become byte-level automata with exact
token masks over a real vocabulary; forced text is jumped over instead of
sampled. Public nouns (as in xgrammar): :class:`TokenizerInfo`,
:class:`GrammarCompiler` -> :class:`CompiledGrammar`, :class:`GrammarMatcher`,
and the packed int32 token bitmask helpers.
"""

from leapgen.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from leapgen.compiler import CompiledGrammar, GrammarCompiler
from leapgen.errors import (CompileLimitError, GrammarError, LeapgenError, RegexError, SchemaError, StackDepthError,
                            StructuralTagError, TokenizerError)
from leapgen.matcher import BatchGrammarMatcher, GrammarMatcher
from leapgen.version import __version__
from leapgen.vocab import TokenizerInfo, VocabType


def __getattr__(name: str):
    # The engine needs torch and transformers: import it only when asked for.
    if name in ("LLM", "SamplingParams"):
        from leapgen import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'leapgen' has no attribute {name!r}")


__all__ = [
    "BatchGrammarMatcher", "CompileLimitError", "CompiledGrammar", "GrammarCompiler", "GrammarError", "GrammarMatcher", "LLM",
    "LeapgenError", "RegexError", "SamplingParams", "SchemaError", "StackDepthError", "StructuralTagError",
    "TokenizerError", "TokenizerInfo",
    "VocabType", "allocate_token_bitmask", "apply_token_bitmask_inplace", "__version__",
]
