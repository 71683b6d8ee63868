"""GrammarCompiler: grammar source -> CompiledGrammar, per vocabulary, cached."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from typing import Any

from leapgen.automata import DEFAULT_MAX_STATES, compile_dfa
from leapgen.automata.pda import DEFAULT_MAX_STACK_DEPTH, Pda
from leapgen.compiler.compiled import DEFAULT_MASK_CACHE_BYTES, CompiledGrammar, RegularGrammar
from leapgen.compiler.compiled_cfg import ContextFreeGrammar
from leapgen.compiler.token_index import TokenIndex
from leapgen.errors import GrammarError, SchemaError
from leapgen.grammar import ir
from leapgen.grammar.cfg import simplify_grammar
from leapgen.grammar.regex import parse_regex
from leapgen.vocab import TokenizerInfo

DEFAULT_CACHE_ENTRIES = 256


def canonical_schema(schema: Any) -> Any:
    """A canonical form of a JSON Schema for cache keys.

    Object keys are sorted, except the members of ``properties`` objects, whose
    order decides the order properties are generated in (so two schemas that
    list properties in different orders are different grammars).
    """
    if isinstance(schema, dict):
        out = {}
        for k in sorted(schema):
            v = schema[k]
            if k == "properties" and isinstance(v, dict):
                out[k] = [[pk, canonical_schema(pv)] for pk, pv in v.items()]
            else:
                out[k] = canonical_schema(v)
        return out
    if isinstance(schema, list):
        return [canonical_schema(v) for v in schema]
    return schema


class GrammarCompiler:
    """Compiles regexes and JSON Schemas for one vocabulary.

    Thread-safe. Compiled grammars are immutable and cached in a bounded LRU
    keyed by a canonical form of the grammar and its options; concurrent
    compiles of the same new grammar share one compile (single flight).

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
        The model's vocabulary.
    cache_entries : int, default 256
        Most compiled grammars kept (LRU).
    max_states : int, default 100_000
        Limit on automaton states per grammar.
    mask_cache_bytes : int, default 256 MiB
        Bound on each compiled grammar's cache of per-state bitmask rows.
    max_stack_depth : int, default 4096
        Deepest nesting a context-free grammar's matcher follows; tokens that
        would nest deeper are masked off.
    """

    def __init__(self, tokenizer_info: TokenizerInfo, *, cache_entries: int = DEFAULT_CACHE_ENTRIES,
                 max_states: int = DEFAULT_MAX_STATES, mask_cache_bytes: int = DEFAULT_MASK_CACHE_BYTES,
                 max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH):
        if cache_entries < 0:
            raise ValueError("cache_entries must be >= 0")
        self.tokenizer_info = tokenizer_info
        self.token_index = TokenIndex(tokenizer_info)
        self.cache_entries = cache_entries
        self.max_states = max_states
        self.mask_cache_bytes = mask_cache_bytes
        self.max_stack_depth = max_stack_depth
        self._cache: OrderedDict[tuple, CompiledGrammar] = OrderedDict()
        self._inflight: dict[tuple, threading.Event] = {}
        self._lock = threading.Lock()

    # -- public compile entry points ------------------------------------------------------

    def compile_regex(self, pattern: str) -> CompiledGrammar:
        """Compile an ECMAScript regex (matched in full) for this vocabulary.

        Parameters
        ----------
        pattern : str
            ECMA-262 syntax; see :mod:`leapgen.grammar.regex`.

        Returns
        -------
        CompiledGrammar

        Raises
        ------
        RegexError
            Malformed or unsupported construct (with its offset).
        GrammarError
            The regex matches nothing.
        CompileLimitError
            The automaton is too large.
        """
        if not isinstance(pattern, str):
            raise GrammarError(f"regex must be a str, got {type(pattern).__name__}")
        return self._cached(("regex", pattern), "regex", lambda: (parse_regex(pattern), ()))

    def compile_json_schema(self, schema: dict | bool | str, *, any_whitespace: bool = True,
                            indent: int | None = None, separators: tuple[str, str] | None = None,
                            strict_mode: bool = True, max_whitespace: int | None = None) -> CompiledGrammar:
        """Compile a JSON Schema for this vocabulary.

        Parameters
        ----------
        schema : dict, bool or str
            The schema, or its JSON text.
        any_whitespace : bool, default True
            Allow bounded insignificant whitespace wherever JSON allows it.
        indent : int or None
            With ``any_whitespace=False``: the exact layout of
            ``json.dumps(indent=indent)``.
        separators : (str, str) or None
            With ``any_whitespace=False``: item and key separators, default
            ``(",", ":")`` (``(",", ": ")`` with ``indent``).
        strict_mode : bool, default True
            True: an object without ``additionalProperties`` admits no other
            properties (as in xgrammar and OpenAI's strict mode). False: the
            JSON Schema specification's meaning (other properties allowed).
        max_whitespace : int or None
            Longest whitespace run with ``any_whitespace``; None for the
            default (see :mod:`leapgen.grammar.json_schema`).

        Returns
        -------
        CompiledGrammar
            ``warnings`` lists any place the grammar is looser than the schema.

        Raises
        ------
        SchemaError
            Malformed schema or unsupported keyword, with its JSON pointer.
        CompileLimitError
            The automaton is too large.
        """
        from leapgen.grammar.json_schema import json_schema_to_ir

        if isinstance(schema, (str, bytes)):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as e:
                raise SchemaError(f"schema is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}",
                                  pointer="") from None
        options = dict(any_whitespace=any_whitespace, indent=indent, separators=separators,
                       strict_mode=strict_mode)
        if max_whitespace is not None:
            options["max_whitespace"] = max_whitespace
        key = ("json_schema", json.dumps(canonical_schema(schema), sort_keys=False),
               tuple(sorted((k, repr(v)) for k, v in options.items())))
        return self._cached(key, "json_schema", lambda: json_schema_to_ir(schema, **options))

    def compile_grammar(self, ebnf_text: str, *, root_rule_name: str = "root") -> CompiledGrammar:
        """Compile an EBNF grammar (GBNF dialect; see :mod:`leapgen.grammar.ebnf`).

        Rules that are not recursive are inlined; a grammar without recursion
        compiles to one DFA (the fast path), otherwise to a pushdown grammar.

        Parameters
        ----------
        ebnf_text : str
        root_rule_name : str, default "root"

        Returns
        -------
        CompiledGrammar

        Raises
        ------
        GrammarError
            Syntax error (with line:column), undefined rule, left recursion,
            a grammar that matches nothing.
        CompileLimitError
            An automaton is too large.
        """
        from leapgen.grammar.ebnf import parse_ebnf

        return self._cached(("ebnf", ebnf_text, root_rule_name), "ebnf",
                            lambda: (parse_ebnf(ebnf_text, root_rule_name=root_rule_name), ()))

    def compile_builtin_json_grammar(self) -> CompiledGrammar:
        """Compile the grammar of any JSON value (RFC 8259), nested to any
        depth, with bounded whitespace (see :mod:`leapgen.grammar.builtin`)."""
        from leapgen.grammar.builtin import JSON_GBNF

        return self.compile_grammar(JSON_GBNF)

    def compile_ir(self, node: ir.Node | ir.Grammar, *, kind: str = "ir", warnings=()) -> CompiledGrammar:
        """Compile grammar IR (a regular node, or a grammar of rules) directly; not cached."""
        return self._build(kind, lambda: (node, tuple(warnings)))

    def clear_cache(self) -> None:
        """Drop every cached compiled grammar (mutates the compiler)."""
        with self._lock:
            self._cache.clear()

    # -- cache ----------------------------------------------------------------------------

    def _cached(self, key: tuple, kind: str, front_end) -> CompiledGrammar:
        while True:
            with self._lock:
                got = self._cache.get(key)
                if got is not None:
                    self._cache.move_to_end(key)
                    return got
                waiter = self._inflight.get(key)
                if waiter is None:
                    waiter = self._inflight[key] = threading.Event()
                    owner = True
                else:
                    owner = False
            if not owner:
                waiter.wait()
                continue  # the owner stored it, or failed and we compile ourselves
            try:
                compiled = self._build(kind, front_end)
                with self._lock:
                    if self.cache_entries:
                        self._cache[key] = compiled
                        while len(self._cache) > self.cache_entries:
                            self._cache.popitem(last=False)
                return compiled
            finally:
                with self._lock:
                    self._inflight.pop(key, None)
                waiter.set()

    def _build(self, kind: str, front_end) -> CompiledGrammar:
        t0 = time.perf_counter()
        node, warnings = front_end()
        if isinstance(node, ir.Grammar):
            node = simplify_grammar(node)
        common = dict(kind=kind, warnings=warnings, mask_cache_bytes=self.mask_cache_bytes)
        if isinstance(node, ir.Grammar):
            pda = Pda(node, max_states=self.max_states, max_stack_depth=self.max_stack_depth)
            compiled: CompiledGrammar = ContextFreeGrammar(pda, self.tokenizer_info, self.token_index, **common)
        else:
            dfa = compile_dfa(node, max_states=self.max_states)
            if dfa.is_empty:
                raise GrammarError(f"the {kind.replace('_', ' ')} matches no string at all")
            compiled = RegularGrammar(dfa, self.tokenizer_info, self.token_index, **common)
        compiled.compile_ms = (time.perf_counter() - t0) * 1e3
        return compiled
