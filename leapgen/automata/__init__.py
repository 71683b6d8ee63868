"""Byte-level automata: grammar IR -> minimized, trimmed DFAs."""

from leapgen.automata.dfa import DEFAULT_MAX_STATES, EMPTY_DFA, Dfa, compile_dfa, minimize, product, trim

__all__ = ["DEFAULT_MAX_STATES", "EMPTY_DFA", "Dfa", "compile_dfa", "minimize", "product", "trim"]
