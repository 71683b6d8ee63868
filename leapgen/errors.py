"""The one exception hierarchy of leapgen.

Library code raises these; the engine catches them, fails the one request
concerned and goes on.

A bad grammar, regex or schema (:class:`GrammarError` and its subclasses) and
a vocabulary that cannot be read (:class:`TokenizerError`) are both a
``ValueError`` (leapgen's own contract: bad input) and a ``RuntimeError``
(xgrammar's: its C++ checks raise ``RuntimeError``, and the xgrammar backends
of vLLM and SGLang catch ``except RuntimeError`` around a compile), so either
kind of caller catches them.
"""

from __future__ import annotations


class LeapgenError(Exception):
    """Base class of every error leapgen raises on purpose."""


class GrammarError(LeapgenError, ValueError, RuntimeError):
    """A grammar (regex, JSON Schema or EBNF) is malformed or uses a construct
    leapgen does not support. Also a ``ValueError`` and a ``RuntimeError``
    (see the module docstring).

    Attributes
    ----------
    where : str or None
        Where the problem is: ``"offset 7"`` in a regex, a JSON pointer such as
        ``"/properties/age/minimum"`` in a schema, ``"line 3:14"`` in EBNF.
    """

    def __init__(self, message: str, *, where: str | None = None):
        self.where = where
        super().__init__(f"{message} (at {where})" if where is not None else message)


class RegexError(GrammarError):
    """A regex is malformed or uses an unsupported construct; ``where`` is the
    character offset in the pattern."""

    def __init__(self, message: str, *, pattern: str, offset: int):
        self.pattern = pattern
        self.offset = offset
        super().__init__(f"{message} in regex {pattern!r}", where=f"offset {offset}")


class SchemaError(GrammarError):
    """A JSON Schema is malformed or uses a keyword leapgen cannot enforce;
    ``where`` is the JSON pointer (RFC 6901) of the offending keyword."""

    def __init__(self, message: str, *, pointer: str):
        self.pointer = pointer
        super().__init__(message, where=f"JSON pointer {pointer or '/'!s}")


class StructuralTagError(GrammarError):
    """A structural tag is malformed or uses a format leapgen does not support;
    ``where`` holds the JSON pointer (RFC 6901) into the tag, then the place
    inside a content (a regex offset, an EBNF line:column) when there is one."""

    def __init__(self, message: str, *, pointer: str, inner: str | None = None):
        self.pointer = pointer
        place = f"JSON pointer {pointer or '/'!s}"
        super().__init__(message, where=place if inner is None else f"{place}, {inner}")


class CompileLimitError(GrammarError):
    """Compiling would exceed a configured limit (automaton states, time)."""


class StackDepthError(LeapgenError, ValueError):
    """Input accepted by a context-free grammar would nest deeper than the
    compiler's ``max_stack_depth`` (see :mod:`leapgen.automata.pda`). Masks
    never allow such a token; accepting one (or such a string) raises this."""


class AmbiguityLimitError(LeapgenError, ValueError):
    """Input makes an ambiguous context-free grammar follow more parse stacks at
    once than the limit (:data:`leapgen.automata.pda.MAX_CONFIG_STACKS`). Some
    grammars (a rule that can recur in several ways over the same bytes,
    ``root ::= ([a-z]{1,3} root r1 | [a-z]){1,3}``) have a number of parses
    exponential in the input's length; the message names the rules on top of
    the stacks. Raised where a configuration is expanded (accepting, filling a
    mask); the request that needs it fails alone and the grammar stays usable."""


class TokenizerError(LeapgenError, ValueError, RuntimeError):
    """A tokenizer or vocabulary cannot be understood (also a ``ValueError``
    and a ``RuntimeError``, see the module docstring)."""


class DeserializeError(LeapgenError, ValueError, RuntimeError):
    """Serialized data (a grammar, a compiled grammar, a vocabulary) cannot be
    read back: base of the three cases below (xgrammar's names)."""


class InvalidJSONError(DeserializeError):
    """The text is not JSON at all."""


class DeserializeFormatError(DeserializeError):
    """The JSON does not follow the serialization format, or describes another
    vocabulary than the one it is read against."""


class DeserializeVersionError(DeserializeError):
    """The data was written by another serialization version."""
