"""The backend interface: one API over leapgen and the peer engines.

A :class:`GrammarBackend` is built once per model (it holds the vocabulary in
the engine's own form) and compiles grammars into opaque *compiled handles*,
shared by requests; :meth:`GrammarBackend.new_state` makes the per-request
:class:`GrammarState` cursor. The verbs are xgrammar's, so the engine and the
benchmarks speak to every engine the same way (the design of SGLang's
``BaseGrammarBackend`` / ``BaseGrammarObject``).

Bitmasks are the packed int32 layout every engine shares: shape
``(batch, ceil(vocab_size / 32))``, bit ``i % 32`` of word ``i // 32`` set when
token ``i`` is allowed; a C-contiguous ``numpy.ndarray`` or a CPU
``torch.Tensor``.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any, Sequence

import numpy as np

from leapgen.errors import GrammarError
from leapgen.vocab import TokenizerInfo


def bitmask_row_pointer(bitmask, index: int) -> tuple[int, int]:
    """Address and size of one row of a CPU bitmask, for engines that write
    through a raw pointer.

    Parameters
    ----------
    bitmask : numpy.ndarray or torch.Tensor
        int32, shape ``(batch, W)``, C-contiguous, on the CPU.
    index : int
        The row.

    Returns
    -------
    pointer : int
        Address of ``bitmask[index, 0]``.
    nbytes : int
        ``4 * W``.

    Raises
    ------
    ValueError
        Not a 2-D contiguous int32 CPU array, or ``index`` out of range.
    """
    if hasattr(bitmask, "ctypes"):  # numpy
        ok = bitmask.dtype.name == "int32" and bitmask.ndim == 2 and bitmask.flags["C_CONTIGUOUS"]
        pointer = bitmask.ctypes.data if ok else 0
    else:  # torch
        ok = (str(bitmask.dtype) == "torch.int32" and bitmask.dim() == 2 and bitmask.is_contiguous()
              and bitmask.device.type == "cpu")
        pointer = bitmask.data_ptr() if ok else 0
    if not ok:
        raise ValueError("bitmask must be a C-contiguous 2-D int32 array or tensor on the CPU")
    batch, words = bitmask.shape
    if not 0 <= index < batch:
        raise ValueError(f"bitmask row {index} outside [0, {batch})")
    return pointer + 4 * words * index, 4 * words


def fill_empty_row(bitmask, index: int) -> None:
    """Write an all-zero row: a terminated state allows nothing (leapgen's convention).

    Mutates ``bitmask[index]`` (numpy array or CPU tensor, int32).
    """
    np.asarray(bitmask[index])[:] = 0


class GrammarState(ABC):
    """One request's cursor over a compiled grammar (not thread-safe).

    A rejected token or string leaves the state unchanged. Capabilities an
    engine lacks raise :class:`NotImplementedError`; the class attributes say
    which are there.

    Attributes
    ----------
    can_fork, can_jump_forward, can_accept_string : bool
        Whether :meth:`fork`, :meth:`find_jump_forward_string` and
        :meth:`accept_string` are supported.
    """

    can_fork = True
    can_jump_forward = True
    can_accept_string = True

    @abstractmethod
    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> bool:
        """Write the allowed next tokens into row ``index`` of ``bitmask``.

        Parameters
        ----------
        bitmask : numpy.ndarray or torch.Tensor
            int32, shape ``(batch, ceil(vocab_size / 32))``, on the CPU.
        index : int, default 0

        Returns
        -------
        bool
            need_apply: False when every token is allowed.

        Mutates ``bitmask[index]`` only. After a stop token the row is all
        zero in every backend (the request is over).
        """

    @abstractmethod
    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) if the grammar rejects it."""

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by a whole string as one history step; False if rejected."""
        raise NotImplementedError(f"{type(self).__name__} cannot accept strings")

    @abstractmethod
    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens (mutates).

        Raises
        ------
        ValueError
            More than the history holds.
        """

    @abstractmethod
    def is_terminated(self) -> bool:
        """Whether a stop token was accepted."""

    @abstractmethod
    def is_completed(self) -> bool:
        """Whether the input so far is a complete match."""

    def find_jump_forward_string(self) -> str:
        """The text the grammar forces next (whole characters), or ``""``."""
        return ""

    @property
    def temperature(self) -> float | None:
        """The sampling temperature the grammar sets here (a rule's option), or
        None: leave the request's. None for engines without rule temperatures."""
        return None

    def fork(self) -> "GrammarState":
        """An independent copy of this state."""
        raise NotImplementedError(f"{type(self).__name__} cannot fork")


#: Characters with a meaning in a regex outside a class (ECMAScript and Rust's ``regex`` alike).
_REGEX_SPECIAL = re.compile(r"([.*+?^${}()|\[\]\\/])")


def choice_regex(choices: Sequence[str]) -> str:
    """The regex matching exactly one of ``choices`` (each escaped, joined by ``|``).

    Raises
    ------
    GrammarError
        ``choices`` is empty or not a list of str.
    """
    if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence) or not choices:
        raise GrammarError("choice needs a non-empty list of str")
    if not all(isinstance(c, str) for c in choices):
        raise GrammarError("choice must be a list of str")
    return "(" + "|".join(_REGEX_SPECIAL.sub(r"\\\1", c) for c in choices) + ")"


class GrammarBackend(ABC):
    """A structured-generation engine behind one interface, per vocabulary.

    Parameters
    ----------
    tokenizer_info : TokenizerInfo
        The vocabulary; its ``vocab_size`` is the bitmask width and its
        ``stop_token_ids`` are every engine's stop tokens.
    hf_tokenizer : transformers.PreTrainedTokenizerFast, optional
        Needed by the peer engines, which build their vocabulary from it.

    Attributes
    ----------
    name : str
        The registry name.

    Notes
    -----
    Compile methods raise :class:`~leapgen.errors.GrammarError` (or its
    subclasses :class:`~leapgen.errors.RegexError`,
    :class:`~leapgen.errors.SchemaError`,
    :class:`~leapgen.errors.CompileLimitError`) for a grammar the engine
    rejects or does not support, whatever the engine raised.
    """

    name = "abstract"

    def __init__(self, tokenizer_info: TokenizerInfo, *, hf_tokenizer: Any = None):
        self.tokenizer_info = tokenizer_info
        self.hf_tokenizer = hf_tokenizer

    @property
    def vocab_size(self) -> int:
        """Width of the bitmask in tokens."""
        return self.tokenizer_info.vocab_size

    def _require_hf_tokenizer(self) -> Any:
        if self.hf_tokenizer is None:
            raise ValueError(f"the {self.name} backend needs the Hugging Face tokenizer: "
                             f"get_backend({self.name!r}, info, hf_tokenizer=...)")
        return self.hf_tokenizer

    @abstractmethod
    def compile_regex(self, pattern: str) -> Any:
        """Compile a regex matched in full; returns a compiled handle."""

    @abstractmethod
    def compile_json_schema(self, schema: dict | bool | str, *, any_whitespace: bool = True,
                            strict_mode: bool = True, any_order: bool = False) -> Any:
        """Compile a JSON Schema.

        ``any_whitespace=False`` is the compact layout of
        ``json.dumps(separators=(",", ":"))``. ``strict_mode=True`` admits no
        property a schema does not list unless ``additionalProperties`` says
        so (xgrammar's and OpenAI's reading); False is the specification's.
        Engines without the choice document the one they make.
        ``any_order=True``: an object's properties in any order (leapgen:
        each at most once, required ones present; xgrammar's own option checks
        neither); an engine without it raises GrammarError.
        """

    @abstractmethod
    def compile_grammar(self, ebnf: str, *, root_rule_name: str = "root") -> Any:
        """Compile an EBNF (GBNF) grammar."""

    def compile_lark(self, lark_text: str, *, start: str = "start") -> Any:
        """Compile a Lark grammar. Engines without a Lark front-end refuse it.

        Raises
        ------
        GrammarError
            Always, here: the engine has no Lark front-end.
        """
        raise GrammarError(f"the {self.name} backend has no Lark front-end (use the leapgen backend)")

    @abstractmethod
    def compile_builtin_json(self) -> Any:
        """Compile the engine's builtin JSON grammar (xgrammar's and
        leapgen's: an object or an array at the root; llguidance's: any JSON
        value)."""

    def compile_choice(self, choices: Sequence[str]) -> Any:
        """Compile "exactly one of these strings" (vLLM's ``choice``).

        The default compiles :func:`choice_regex`, the alternation vLLM
        hands to xgrammar and llguidance; engines with a better way override it.
        """
        return self.compile_regex(choice_regex(choices))

    def compile_structural_tag(self, tag: dict | str) -> Any:
        """Compile a structural tag (xgrammar's format, see
        :meth:`leapgen.GrammarCompiler.compile_structural_tag`).

        Raises
        ------
        GrammarError
            The tag is malformed, or this engine has no structural tags.
        """
        raise GrammarError(f"the {self.name} backend has no structural tags")

    @abstractmethod
    def new_state(self, compiled: Any) -> GrammarState:
        """A fresh cursor at the start of a compiled grammar."""

    def batch_fill_next_token_bitmask(self, states: Sequence[GrammarState], bitmask,
                                      indices: Sequence[int] | None = None) -> None:
        """Fill row ``indices[i]`` (default ``i``) of ``bitmask`` for ``states[i]``.

        The default fills one row after another; engines with a parallel
        batch fill override it. Mutates ``bitmask`` only.
        """
        rows = range(len(states)) if indices is None else indices
        for state, row in zip(states, rows):
            state.fill_next_token_bitmask(bitmask, row)

    def allocate_bitmask(self, batch_size: int = 1):
        """A numpy int32 bitmask of shape ``(batch_size, ceil(vocab_size / 32))``, all allowed."""
        return np.full((batch_size, (self.vocab_size + 31) // 32), -1, np.int32)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"
