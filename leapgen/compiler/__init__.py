"""Grammar compilation: grammar source -> CompiledGrammar for one vocabulary."""

from leapgen.compiler.compiled import CompiledGrammar, RegularGrammar
from leapgen.compiler.compiled_cfg import ContextFreeGrammar
from leapgen.compiler.compiler import GrammarCompiler, canonical_schema
from leapgen.compiler.token_index import TokenIndex

__all__ = ["CompiledGrammar", "ContextFreeGrammar", "RegularGrammar", "GrammarCompiler", "TokenIndex", "canonical_schema"]
