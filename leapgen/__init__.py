"""leapgen: structured generation for LLMs.

Regexes, JSON Schemas and grammars become byte-level automata with exact
token masks over a real vocabulary; forced text is jumped over instead of
sampled. Public nouns (as in xgrammar): :class:`TokenizerInfo`,
:class:`GrammarCompiler` -> :class:`CompiledGrammar`, :class:`GrammarMatcher`,
and the packed int32 token bitmask helpers.

The names are imported on first use (PEP 562), so that importing a submodule
(``leapgen.integrations.vllm``, which vLLM loads in every process as a plugin)
runs no compiler code: importing the compiler loads numba, and vLLM's CPU
worker start fails when llvmlite is already loaded (see
``leapgen/integrations/vllm.py``).
"""

import importlib

from leapgen.version import __version__

_EXPORTS = {
    "allocate_token_bitmask": "leapgen.bitmask", "apply_token_bitmask_inplace": "leapgen.bitmask",
    "CompiledGrammar": "leapgen.compiler", "GrammarCompiler": "leapgen.compiler",
    "AmbiguityLimitError": "leapgen.errors", "CompileLimitError": "leapgen.errors", "GrammarError": "leapgen.errors",
    "LeapgenError": "leapgen.errors",
    "RegexError": "leapgen.errors", "SchemaError": "leapgen.errors", "StackDepthError": "leapgen.errors",
    "StructuralTagError": "leapgen.errors", "TokenizerError": "leapgen.errors",
    "BatchGrammarMatcher": "leapgen.matcher", "GrammarMatcher": "leapgen.matcher",
    "TokenizerInfo": "leapgen.vocab", "VocabType": "leapgen.vocab",
    # The engine needs torch and transformers.
    "LLM": "leapgen.engine", "SamplingParams": "leapgen.engine",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leapgen' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = sorted(_EXPORTS) + ["__version__"]
