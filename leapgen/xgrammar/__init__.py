r"""An xgrammar-compatible surface: ``import leapgen.xgrammar as xgr``.

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
Kept on purpose; each row is shown against the installed xgrammar by
``tests/xgrammar/test_differences.py`` (one test per row, named after it), and
the differential suites discount nothing else.

================  ==============================================  ==============================================
row               xgrammar 0.2                                    leapgen.xgrammar
================  ==============================================  ==============================================
special           ``from_huggingface`` finds no special tokens:   A tokenizer's special / control tokens never
                  control tokens (``<|im_start|>``, reserved      match text (only as stop tokens);
                  ids) match their spelling as text.              ``special_token_ids`` lists them.
pattern           JSON Schema ``pattern`` must match the whole    ``pattern`` is a search, as the specification
                  string.                                         says (anchor it: ``^...$``).
escapes           A string with ``minLength`` / ``maxLength``     Valid JSON strings only: escapes allowed, raw
                  allows raw control characters, no escapes.      control characters not.
unicode-escapes   Any ``\uXXXX`` escape, lone surrogates too.     Surrogate escapes only in valid pairs (a lone
                                                                  one is no Unicode scalar value).
numbers           Integers forbid ``-0``; bounded numbers also    Every valid instance is allowed.
                  forbid exponents.
ignored-keywords  Ignores keywords it does not enforce            Enforces each keyword it reads (``not``...)
                  (``not``...) and unknown formats.               and refuses what it cannot enforce, with its
                                                                  JSON pointer (unknown formats, strict mode).
unsatisfiable     Compiles schemas no value satisfies             Refuses them (SchemaError naming where).
                  (``{"anyOf": []}``, contradictory ``allOf``).
left-recursion    Left-recursive EBNF works (Earley parser).      Refused, naming the rule (use repetition).
lookahead         Regex lookahead refused; EBNF rule lookahead    Top-level regex lookahead compiled exactly
                  ``(= ...)`` accepted.                           (intersection / difference); EBNF ``(= ...)``
                                                                  refused with a clear error.
regex-dialect     Refuses ``a{,3}`` and ``[]``; accepts           ECMA-262: a ``{`` that starts no quantifier is
                  ``$`` before the end and counts above 10,000.   a literal, ``[]`` is empty; anchors only at
                                                                  the ends, counts up to 10,000.
ebnf-dialect      Refuses empty alternatives, ``'single'``        Accepts them (GBNF as llama.cpp reads it);
                  quotes, ``x{,n}``, ``"a"++``; has macros        its macros (``TagDispatch(...)``,
                  (``TagDispatch``, ``Regex``, ``Token``...).     ``Regex(...)``...) are refused by name.
self              Its masks sometimes forbid tokens its own       The mask is exact (every token the matcher
                  matcher accepts (``}]`` after ``[{"m":"x"`` in  accepts is allowed).
                  its JSON grammar; found in generated EBNF too).
loose             Its masks sometimes allow tokens its own        The mask is exact (every allowed token is
                  matcher rejects (``" \xe0"`` after ``A.`` for   accepted).
                  ``(?:[A-Z]\. )?[A-Z]``).
padding           An all-true row also sets the bits past         Bits past ``vocab_size`` are never set.
                  ``vocab_size`` in its last word.
lark              Its Lark dialect: ``%json``, ``@name``          Lark's own language (Earley, ``%import``);
                  grammars, special tokens, rule attributes;      xgrammar's extensions refused (GrammarError at
                  ``%ignore`` text not allowed before the first   line:column); ``%ignore`` text allowed at the
                  or after the last terminal.                     ends, as Lark's parser allows it.
any-order         ``any_order=True``.                             Refused (GrammarError).
structural-tag    Ignores fields a format does not have;          leapgen's structural tags (issue 17) refuse
                  compiles the token-level dispatch formats,      those at their JSON pointer (the list is in
                  ``any_text.max_tokens``, ``json_schema``        ``leapgen.GrammarCompiler.compile_structural_tag``);
                  styles; added tokens are text everywhere.       a marker that is one added token matches it.
tag-free-text     Free text allows any token, bytes that are      Free text is UTF-8 text (a stray continuation
                  no UTF-8 text included.                         byte is never allowed).
tag-json-space    A tag's JSON content: unbounded whitespace.     Runs bounded at 20 (unless the tag's
                                                                  ``max_whitespace_cnt`` says otherwise).
rule-options      EBNF ``capture``, ``lazy``, capture-suffix      Refused, naming the option (``get_captures``
                  options; ``max_tokens=0`` means no budget.      returns ``[]``); ``max_tokens`` must be >= 1.
zero-budget       Jump-forward ignores a ``max_chars=0`` rule     Jump-forward goes on past it (the rule can only
                  the forced text enters (stops at it).           be empty there).
draft-tree        ``traverse_draft_tree`` leaves the rows of      Those rows are zeroed (a node whose path the
                  nodes below a rejected node, and of nodes not   grammar rejects allows nothing).
                  reached in time, as they were (an allocated
                  bitmask: every token allowed).
bad-ids           Stop ids outside the vocabulary are kept;       Refused (TokenizerError, a RuntimeError);
                  ``rollback(-1)`` does nothing.                  ``rollback(-1)`` raises RuntimeError.
str               ``str(grammar)``: its normalized EBNF.          GBNF of leapgen's IR (another text of the same
                                                                  language); intersections / differences print
                                                                  as ``&`` / ``-``, which ``from_ebnf`` refuses.
tokenizers        ``from_huggingface`` also reads tiktoken and    Fast (``tokenizer.json``) tokenizers only;
                  slow SentencePiece tokenizers.                  build others with the constructor.
bitmask-device    ``fill_next_token_bitmask`` needs a CPU         A CUDA bitmask is filled by one host-to-device
                  bitmask.                                        copy.
missing           ``xgrammar.testing``, ``contrib``,              Not provided (AttributeError / ImportError).
                  ``kernels``, the builtin structural-tag
                  helpers.
================  ==============================================  ==============================================
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
        from leapgen.bitmask import bitmask_dtype

        return bitmask_dtype()
    raise AttributeError(f"module 'leapgen.xgrammar' has no attribute {name!r}")


__all__ = [
    "BatchGrammarMatcher", "CompiledGrammar", "DeserializeFormatError", "DeserializeVersionError", "Grammar",
    "GrammarCompiler", "GrammarMatcher", "InvalidJSONError", "InvalidStructuralTagError", "StructuralTag",
    "StructuralTagItem", "TokenizerInfo", "VocabType", "allocate_token_bitmask", "apply_token_bitmask_inplace",
    "bitmask_dtype", "get_bitmask_shape", "get_max_recursion_depth", "get_serialization_version",
    "max_recursion_depth", "reset_token_bitmask", "set_max_recursion_depth",
]
