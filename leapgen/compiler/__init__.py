"""Grammar compilation: grammar source -> CompiledGrammar for one vocabulary."""

from leapgen.compiler.compiled import CompiledGrammar
from leapgen.compiler.compiler import GrammarCompiler, canonical_schema
from leapgen.compiler.token_index import TokenIndex

__all__ = ["CompiledGrammar", "GrammarCompiler", "TokenIndex", "canonical_schema"]
