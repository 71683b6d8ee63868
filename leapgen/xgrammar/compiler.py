"""xgrammar's ``GrammarCompiler`` and ``CompiledGrammar`` over leapgen's compiler.

Every ``compile_*`` goes through a :class:`leapgen.GrammarCompiler` (its
thread-safe LRU cache, single flight and remembered failures), with
xgrammar's options translated (:func:`~leapgen.xgrammar.grammar.json_schema_options`).
A :class:`CompiledGrammar` serializes to JSON with its automaton, so reading
it back binds the automaton to the vocabulary without compiling again.
"""

from __future__ import annotations

import json

from leapgen.compiler import GrammarCompiler as NativeGrammarCompiler
from leapgen.errors import DeserializeFormatError, GrammarError
from leapgen.xgrammar import serialization as ser
from leapgen.xgrammar.config import get_max_recursion_depth
from leapgen.xgrammar.grammar import (XGRAMMAR_JSON_GBNF, Grammar, json_schema_options, refuse_named_grammars,
                                      schema_ir, schema_text, structural_tag_grammar, structural_tag_json)
from leapgen.xgrammar.tokenizer_info import TokenizerInfo


def _grammar_of(source: tuple) -> Grammar:
    """The :class:`Grammar` of a compile's source (built when first asked for)."""
    kind = source[0]
    if kind == "ebnf":
        return Grammar.from_ebnf(source[1], root_rule_name=source[2])
    if kind == "regex":
        return Grammar.from_regex(source[1])
    if kind == "lark":
        return Grammar.from_lark(source[1])
    if kind == "structural_tag":
        return structural_tag_grammar(json.loads(source[1]))
    node, warnings = schema_ir(source[1], source[2])
    return Grammar._make(node, source, warnings)


class CompiledGrammar:
    """A grammar compiled for one vocabulary (``xgrammar.CompiledGrammar``);
    immutable, shared by every matcher of the grammar. Made by
    :class:`GrammarCompiler` or :meth:`deserialize_json`.
    """

    __slots__ = ("_native", "_tokenizer_info", "_grammar", "_source")

    def __init__(self, *args, **kwargs):
        raise TypeError("CompiledGrammar is made by GrammarCompiler.compile_* or CompiledGrammar.deserialize_json")

    @classmethod
    def _make(cls, native, tokenizer_info: TokenizerInfo, *, grammar: Grammar | None = None,
              source: tuple | None = None) -> "CompiledGrammar":
        obj = object.__new__(cls)
        obj._native, obj._tokenizer_info, obj._grammar, obj._source = native, tokenizer_info, grammar, source
        return obj

    @property
    def native(self):
        """The :class:`leapgen.CompiledGrammar` underneath."""
        return self._native

    @property
    def grammar(self) -> Grammar:
        """The grammar that was compiled."""
        if self._grammar is None:
            self._grammar = _grammar_of(self._source)
        return self._grammar

    @property
    def tokenizer_info(self) -> TokenizerInfo:
        return self._tokenizer_info

    @property
    def memory_size_bytes(self) -> int:
        """Approximate bytes held (the automaton and the bitmask rows computed so far)."""
        return int(self._native.memory_size_bytes())

    def serialize_json(self) -> str:
        """The compiled grammar as versioned JSON text: its grammar, its automaton
        and the metadata of its vocabulary (not the vocabulary itself, which
        :meth:`deserialize_json` is given).

        Bitmask rows are not written: they are computed again on first use, and
        equal the original's (they depend on the automaton and vocabulary only).
        """
        from leapgen.xgrammar.serialization import dfa_to_json, pda_to_json

        native = self._native
        automaton = ({"regular": True, "dfa": dfa_to_json(native.dfa)} if native.is_regular
                     else {"regular": False, "pda": pda_to_json(native.pda)})
        doc = {"tokenizer_metadata": self._tokenizer_info._metadata(),
               "vocab_fingerprint": self._tokenizer_info.native.fingerprint,
               "grammar": self.grammar._to_doc(), "kind": native.kind, "warnings": list(native.warnings),
               "automaton": automaton}
        return ser.to_text(doc, "CompiledGrammar")

    @staticmethod
    def deserialize_json(json_str: str, tokenizer_info: TokenizerInfo) -> "CompiledGrammar":
        """Read :meth:`serialize_json`'s text for ``tokenizer_info``.

        Raises
        ------
        InvalidJSONError
            Not JSON.
        DeserializeFormatError
            Malformed, or written for a vocabulary other than ``tokenizer_info``
            (metadata or token bytes differ).
        DeserializeVersionError
            Another serialization version.
        """
        from leapgen.xgrammar.serialization import dfa_from_json, pda_from_json

        if not isinstance(tokenizer_info, TokenizerInfo):
            raise TypeError("deserialize_json needs the leapgen.xgrammar.TokenizerInfo the grammar was compiled for")
        doc = ser.load_document(json_str, "CompiledGrammar")
        meta = ser.field(doc, "tokenizer_metadata", dict, "CompiledGrammar")
        ours = tokenizer_info._metadata()
        for key in ours:
            if meta.get(key) != ours[key]:
                raise DeserializeFormatError(f"the compiled grammar was serialized for another vocabulary: "
                                             f"{key} {meta.get(key)!r} != {ours[key]!r}")
        if doc.get("vocab_fingerprint") != tokenizer_info.native.fingerprint:
            raise DeserializeFormatError("the compiled grammar was serialized for another vocabulary "
                                         "(the token bytes differ)")
        grammar = Grammar._from_doc(ser.field(doc, "grammar", dict, "CompiledGrammar"))
        kind = ser.field(doc, "kind", str, "CompiledGrammar")
        warnings = ser.field(doc, "warnings", list, "CompiledGrammar")
        automaton = ser.field(doc, "automaton", dict, "CompiledGrammar")
        regular = ser.field(automaton, "regular", bool, "CompiledGrammar automaton")
        built = dfa_from_json(automaton.get("dfa")) if regular else pda_from_json(automaton.get("pda"))
        native = tokenizer_info._binder().bind(built, kind=kind, warnings=[str(w) for w in warnings])
        return CompiledGrammar._make(native, tokenizer_info, grammar=grammar)

    def __repr__(self) -> str:
        return f"CompiledGrammar({self._native!r})"


class GrammarCompiler:
    """Compiles grammars for one vocabulary (``xgrammar.GrammarCompiler``);
    thread-safe, with a cache of compiled grammars.

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
        A :class:`leapgen.xgrammar.TokenizerInfo`.
    max_threads : int, default 8
        Kept for xgrammar's signature (:attr:`max_threads`): leapgen compiles
        on the calling thread; concurrent calls are safe.
    cache_enabled : bool, default True
        Keep compiled grammars (LRU); False compiles every call again.
    cache_limit_bytes : int, default -1
        Bound on the cache's ``memory_size_bytes``; -1 for none.
    enable_dynamic_compilation : bool, default False
        Accepted for xgrammar's signature: leapgen always computes a state's
        bitmask row on first use (small context-free grammars sort every
        frame at compile time); masks are the same either way.

    Notes
    -----
    Matchers follow nesting up to :func:`~leapgen.xgrammar.get_max_recursion_depth`
    as it was when the compiler was made.

    Raises
    ------
    ValueError
        ``tokenizer_info`` is not a :class:`leapgen.xgrammar.TokenizerInfo`.
    """

    def __init__(self, tokenizer_info: TokenizerInfo, *, max_threads: int = 8, cache_enabled: bool = True,
                 cache_limit_bytes: int = -1, enable_dynamic_compilation: bool = False):
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise ValueError("Please convert the tokenizer to TokenizerInfo before passing it to GrammarCompiler.")
        self.tokenizer_info = tokenizer_info
        self.max_threads = max_threads
        self.enable_dynamic_compilation = bool(enable_dynamic_compilation)
        self._limit = int(cache_limit_bytes)
        kwargs = {} if cache_enabled else {"cache_entries": 0}
        self._native = NativeGrammarCompiler(tokenizer_info.native, cache_bytes=None if self._limit < 0 else self._limit,
                                             max_stack_depth=get_max_recursion_depth(),
                                             token_index=tokenizer_info._token_index(),
                                             count_lengths=False,  # regular grammars stay one DFA: serializable
                                             **kwargs)

    @property
    def native(self) -> NativeGrammarCompiler:
        """The :class:`leapgen.GrammarCompiler` underneath."""
        return self._native

    def _wrap(self, native, source: tuple | None = None, grammar: Grammar | None = None) -> CompiledGrammar:
        return CompiledGrammar._make(native, self.tokenizer_info, grammar=grammar, source=source)

    def compile_json_schema(self, schema, *, any_whitespace: bool = True, indent: int | None = None,
                            separators: tuple[str, str] | None = None, strict_mode: bool = True,
                            max_whitespace_cnt: int | None = None, any_order: bool = False) -> CompiledGrammar:
        """Compile a JSON Schema (str, dict or pydantic model class) with
        xgrammar's layout options (see :meth:`Grammar.from_json_schema`).

        Raises
        ------
        SchemaError
            Malformed schema or unsupported keyword (with its JSON pointer).
        GrammarError
            ``any_order=True``, a bad ``max_whitespace_cnt``, a limit exceeded.
        """
        text = schema_text(schema)
        options = json_schema_options(any_whitespace, indent, separators, strict_mode, max_whitespace_cnt, any_order)
        return self._compile_schema(text, options)

    def _compile_schema(self, text: str, options: dict) -> CompiledGrammar:
        try:
            native = self._native.compile_json_schema(text, **options)
        except GrammarError:
            raise
        except ValueError as e:  # malformed layout options
            raise GrammarError(str(e)) from None
        return self._wrap(native, ("json_schema", text, options))

    def compile_builtin_json_grammar(self) -> CompiledGrammar:
        """Compile xgrammar's builtin JSON grammar (an object or array at the top)."""
        return self.compile_grammar(XGRAMMAR_JSON_GBNF)

    def compile_regex(self, regex: str) -> CompiledGrammar:
        """Compile an ECMAScript regex, matched in full.

        Raises
        ------
        RegexError
            Malformed or unsupported (with its offset).
        """
        return self._wrap(self._native.compile_regex(regex), ("regex", regex))

    def compile_lark(self, lark_string: str, *, named_grammars=None) -> CompiledGrammar:
        """Compile a Lark grammar with a ``start`` rule (see :meth:`Grammar.from_lark`).

        Raises
        ------
        GrammarError
            Syntax error or unsupported construct (line:column), ``named_grammars``.
        """
        refuse_named_grammars(named_grammars)
        return self._wrap(self._native.compile_lark(lark_string), ("lark", lark_string))

    def compile_structural_tag(self, *args, **kwargs) -> CompiledGrammar:
        """Compile a structural tag (``StructuralTag``, JSON text or dict, or the
        deprecated ``(tags, triggers)``) with :meth:`leapgen.GrammarCompiler.compile_structural_tag`
        (its docstring lists the format and its differences from xgrammar): a marker
        that is one added token of the vocabulary matches that token as well as its text.

        Raises
        ------
        InvalidJSONError
            Text that is not JSON.
        InvalidStructuralTagError
            A malformed tag or unsupported format, at its JSON pointer.
        TypeError
            Arguments of neither form.
        """
        return self._compile_tag(structural_tag_json(args, kwargs))

    def _compile_tag(self, tag: dict) -> CompiledGrammar:
        return self._wrap(self._native.compile_structural_tag(tag), ("structural_tag", json.dumps(tag)))

    def compile_grammar(self, grammar, *, root_rule_name: str = "root") -> CompiledGrammar:
        """Compile GBNF text or a :class:`Grammar`.

        Raises
        ------
        ValueError
            ``grammar`` is neither a str nor a Grammar.
        GrammarError
            A syntax error (``line:column``), an undefined rule, left
            recursion, a grammar that matches nothing, a limit exceeded.
        """
        if isinstance(grammar, str):
            return self._wrap(self._native.compile_grammar(grammar, root_rule_name=root_rule_name),
                              ("ebnf", grammar, root_rule_name))
        if not isinstance(grammar, Grammar):
            raise ValueError("Invalid grammar type. Please pass a string or a Grammar object.")
        kind = grammar.source[0]
        if kind == "ebnf":
            native = self._native.compile_grammar(grammar.source[1], root_rule_name=grammar.source[2])
        elif kind == "regex":
            native = self._native.compile_regex(grammar.source[1])
        elif kind == "json_schema":
            native = self._compile_schema(grammar.source[1], grammar.source[2]).native
        elif kind == "lark":
            native = self._native.compile_lark(grammar.source[1])
        elif kind == "structural_tag":
            native = self._compile_tag(json.loads(grammar.source[1])).native
        else:
            native = self._native.cache.get_or_compile(
                ("xgrammar-ir", grammar.ir),
                lambda: self._native.compile_ir(grammar.ir, kind="ebnf", warnings=grammar._warnings))
        return self._wrap(native, grammar=grammar)

    def clear_cache(self) -> None:
        """Drop every cached compiled grammar (mutates the compiler)."""
        self._native.clear_cache()

    def get_cache_size_bytes(self) -> int:
        """Approximate bytes held by the cached compiled grammars."""
        return int(self._native.cache.memory_size_bytes())

    @property
    def cache_limit_bytes(self) -> int:
        """The cache's byte bound; -1 for none."""
        return self._limit
