"""An xgrammar-compatible surface: ``import leapgen.xgrammar as xgr``.

Code written against xgrammar 0.2 (the xgrammar backends of vLLM and SGLang,
for instance) runs on leapgen with the import changed: the same nouns
(:class:`TokenizerInfo`, :class:`Grammar`, :class:`GrammarCompiler` ->
:class:`CompiledGrammar`, :class:`GrammarMatcher`, :class:`BatchGrammarMatcher`),
verbs, keyword names, defaults and error classes; the bitmask is the same
packed int32 layout. Underneath, leapgen's own compiler and matcher do the
work; leapgen's native API (``import leapgen``) keeps its own defaults, and
where the two must differ this module follows xgrammar.

Errors: an invalid grammar, regex or schema raises a
:class:`~leapgen.errors.GrammarError` subclass, which is a ``RuntimeError``
(what xgrammar raises and engines catch) and a ``ValueError``;
deserialization raises :class:`InvalidJSONError`,
:class:`DeserializeFormatError` or :class:`DeserializeVersionError`.

Serialization (``serialize_json`` / ``deserialize_json`` of
:class:`TokenizerInfo`, :class:`Grammar` and :class:`CompiledGrammar`) is
leapgen's own JSON data format (:mod:`leapgen.xgrammar.serialization`), never
pickle, version-checked: it round-trips within leapgen, not with xgrammar's
files.

Differences from xgrammar
-------------------------
Kept on purpose; each is found by the differential tests against the installed
xgrammar (``tests/xgrammar/``) and discounted there by its name.

===================  ===============================================  ===============================================
name                 xgrammar                                         leapgen.xgrammar
===================  ===============================================  ===============================================
special              ``from_huggingface`` finds no special tokens:    A tokenizer's special / control tokens never
                     control tokens (``<|im_start|>``, Llama-3's      match text (masked off everywhere except as
                     reserved ids) match their spelling as text.      stop tokens); ``special_token_ids`` lists them.
pattern              JSON Schema ``pattern`` must match the whole     ``pattern`` is a search, as the JSON Schema
                     string.                                          specification says (anchor it with ``^...$``).
prefixItems          An array with ``prefixItems`` and no             The specification's meaning: ``items`` decides
                     ``items`` has exactly that many items.           what may follow (strict mode: nothing, as
                                                                      xgrammar; ``strict_mode=False``: any items).
escapes              A string with ``minLength`` / ``maxLength``      Valid JSON strings only: escapes allowed, raw
                     allows raw control characters and forbids        control characters not (xgrammar's bug).
                     escapes.
numbers              Bounded numbers (``minimum``...) forbid ``-0``   Every valid instance is allowed (``-0``,
                     and exponents; integers forbid ``-0``.           exponents).
left-recursion       Left-recursive EBNF is accepted (Earley).        Refused with a GrammarError naming the rule
                                                                      (rewrite it with repetition).
lookahead            EBNF lookahead ``(= ...)`` is a hint; regex      Regex lookahead at the top level is compiled
                     lookahead is refused.                            exactly (intersection / difference); EBNF
                                                                      lookahead is a syntax error.
self                 Its builtin JSON mask forbids some tokens its    The mask is exact (every token a matcher
                     own matcher accepts after nested values          accepts is allowed).
                     (``}]`` after ``[{"m":"x"``).
padding              An all-true row also sets the bits of ids past   Ids past ``vocab_size`` are never set.
                     ``vocab_size`` in its last word.
lark                 ``from_lark`` / ``compile_lark``.                Refused with a GrammarError (no Lark front-end).
any_order            ``any_order=True`` lets object properties come   Refused with a GrammarError.
                     in any order.
structural-tag       ``from_structural_tag`` / ``compile_structural_  Raise a GrammarError until leapgen's structural
                     tag``.                                           tag compiler (issue 17) is wired in
                                                                      (:func:`~leapgen.xgrammar.grammar.structural_tag_grammar`).
rule-options         EBNF rule options ``capture``, ``lazy`` and the  Refused at parse time, naming the option;
                     capture-suffix options; ``get_captures``.        ``get_captures`` returns ``[]``.
bad-ids              Stop ids outside the vocabulary are kept;        Refused (TokenizerError, a RuntimeError);
                     ``rollback(-1)`` does nothing.                   ``rollback(-1)`` raises RuntimeError.
str                  ``str(grammar)`` is xgrammar's normalized EBNF.  GBNF of leapgen's IR (another text for the same
                                                                      language); intersections / differences print as
                                                                      ``&`` / ``-``, which ``from_ebnf`` refuses.
tokenizers           ``from_huggingface`` also reads tiktoken and     Fast (``tokenizer.json``) tokenizers only; build
                     SentencePiece (slow) tokenizers.                 others with the constructor.
bitmask-device       ``fill_next_token_bitmask`` needs a CPU          A CUDA bitmask is filled by a host-to-device
                     bitmask.                                         copy.
===================  ===============================================  ===============================================
"""

from leapgen.errors import DeserializeFormatError, DeserializeVersionError, InvalidJSONError
from leapgen.xgrammar.compiler import CompiledGrammar, GrammarCompiler
from leapgen.xgrammar.config import (get_max_recursion_depth, get_serialization_version, max_recursion_depth,
                                     set_max_recursion_depth)
from leapgen.xgrammar.grammar import Grammar, InvalidStructuralTagError, StructuralTag, StructuralTagItem
from leapgen.xgrammar.matcher import (BatchGrammarMatcher, GrammarMatcher, allocate_token_bitmask,
                                      apply_token_bitmask_inplace, get_bitmask_shape, reset_token_bitmask)
from leapgen.xgrammar.tokenizer_info import TokenizerInfo, VocabType


def __getattr__(name: str):
    # torch is imported only when asked for (``import leapgen.xgrammar`` needs numpy alone).
    if name == "bitmask_dtype":
        import torch

        return torch.int32
    raise AttributeError(f"module 'leapgen.xgrammar' has no attribute {name!r}")


__all__ = [
    "BatchGrammarMatcher", "CompiledGrammar", "DeserializeFormatError", "DeserializeVersionError", "Grammar",
    "GrammarCompiler", "GrammarMatcher", "InvalidJSONError", "InvalidStructuralTagError", "StructuralTag",
    "StructuralTagItem", "TokenizerInfo", "VocabType", "allocate_token_bitmask", "apply_token_bitmask_inplace",
    "bitmask_dtype", "get_bitmask_shape", "get_max_recursion_depth", "get_serialization_version",
    "max_recursion_depth", "reset_token_bitmask", "set_max_recursion_depth",
]
