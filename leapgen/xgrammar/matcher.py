"""xgrammar's ``GrammarMatcher``, ``BatchGrammarMatcher`` and bitmask functions.

Each matcher wraps a :class:`leapgen.GrammarMatcher`; what differs from
leapgen's own verbs follows xgrammar: an out-of-range token is rejected
(``False``), not an error; filling a mask after the stop token raises
``RuntimeError``; ``terminate_without_stop_token``; ``max_rollback_tokens`` is
deprecated (history is unlimited); misuse (a bad bitmask, rolling back too
far) raises ``RuntimeError``. ``apply_token_bitmask_inplace`` leaves logits
past the bitmask's width unmasked, as xgrammar does (leapgen masks them off).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from leapgen import bitmask as native_bitmask
from leapgen.matcher import BatchGrammarMatcher as NativeBatchGrammarMatcher
from leapgen.matcher import GrammarMatcher as NativeGrammarMatcher
from leapgen.xgrammar.compiler import CompiledGrammar


def get_bitmask_shape(batch_size: int, vocab_size: int) -> tuple[int, int]:
    """The bitmask's shape: ``(batch_size, ceil(vocab_size / 32))``."""
    return (batch_size, math.ceil(vocab_size / 32))


def allocate_token_bitmask(batch_size: int, vocab_size: int):
    """A CPU bitmask with every token allowed (:func:`leapgen.bitmask.allocate_token_bitmask`).

    Returns
    -------
    torch.Tensor
        int32, shape ``(batch_size, ceil(vocab_size / 32))``, all bits 1.

    Raises
    ------
    ValueError
        Non-positive sizes.
    """
    return native_bitmask.allocate_token_bitmask(batch_size, vocab_size)


def reset_token_bitmask(bitmask) -> None:
    """Set every bit of ``bitmask`` to 1 (mutates it)."""
    native_bitmask.reset_token_bitmask(bitmask)


_BACKENDS = ("auto", "cpu", "cuda", "triton", "torch_compile", "torch_native")


def apply_token_bitmask_inplace(logits, bitmask, *, vocab_size: int | None = None, indices=None,
                                backend: str = "auto") -> None:
    """Set ``logits`` of disallowed tokens to ``-inf``, in place (xgrammar's contract).

    Parameters
    ----------
    logits : torch.Tensor
        float32 / bfloat16 / float16, ``(batch, V)`` or ``(V,)``; mutated.
    bitmask : torch.Tensor
        int32, ``(batch, W)`` or ``(W,)``, on the logits' device; not mutated.
    vocab_size : int, optional
        Columns masked: ``logits[..., :vocab_size]``. Default
        ``min(logits.shape[-1], 32 * W)``: logits wider than the bitmask keep
        their trailing columns (a warning says so), as in xgrammar.
    indices : list of int or torch.Tensor, optional
        Rows masked (logits row ``i`` with bitmask row ``i``); default all.
    backend : str, default "auto"
        One of xgrammar's names; leapgen has one CPU path (vectorized torch)
        and one CUDA path (Triton when installed), chosen by the logits' device.

    Raises
    ------
    ValueError
        Logits and bitmask on different devices, an unknown ``backend``, a
        bitmask that is not int32, shapes that do not fit.
    """
    if backend not in _BACKENDS:
        raise ValueError(f"Unknown backend: {backend}. The value should be one of them: {list(_BACKENDS)}")
    if bitmask.device != logits.device:
        raise ValueError("logits and bitmask should be on the same device. "
                         f"But got logits.device: {logits.device}, bitmask.device: {bitmask.device}")
    if str(bitmask.dtype) != "torch.int32":
        raise ValueError("bitmask must be of type int32")
    if logits.dim() not in (1, 2) or bitmask.dim() not in (1, 2):
        raise ValueError(f"logits and bitmask should be 1D or 2D, got {logits.dim()}D and {bitmask.dim()}D")
    if vocab_size is None:
        vocab_size = min(logits.shape[-1], bitmask.shape[-1] * 32)
        if vocab_size < logits.shape[-1]:
            warnings.warn(f"The bitmask covers only {vocab_size} tokens but logits have {logits.shape[-1]}, so "
                          f"logits[..., {vocab_size}:] are left unmasked. Allocate the bitmask with the full vocab "
                          "size, or pass vocab_size explicitly.", stacklevel=2)
    if indices is not None and hasattr(indices, "tolist"):  # a tensor of row indices (vLLM passes one)
        indices = indices.tolist()
    native_bitmask.apply_token_bitmask_inplace(logits[..., :vocab_size], bitmask, indices=indices)


def _runtime_error(call, *args):
    """``call(*args)``, with leapgen's misuse errors raised as RuntimeError (xgrammar's class)."""
    try:
        return call(*args)
    except (TypeError, ValueError, IndexError) as e:
        raise RuntimeError(str(e)) from e


class GrammarMatcher:
    """Matches one request's output against a compiled grammar (``xgrammar.GrammarMatcher``).

    Parameters
    ----------
    compiled_grammar : CompiledGrammar
        A :class:`leapgen.xgrammar.CompiledGrammar` (shared, not mutated).
    override_stop_tokens : int or list of int, optional
        Stop tokens instead of the vocabulary's.
    terminate_without_stop_token : bool, default False
        True: no stop token is ever allowed, and the matcher counts as
        terminated as soon as the grammar may end (:meth:`is_terminated` is
        :meth:`is_completed`).
    max_rollback_tokens : int, default -1
        Deprecated (as in xgrammar): history is unlimited; any other value warns.
    default_temperature : float, optional
        The temperature where no active grammar rule sets one (:attr:`temperature`).

    Raises
    ------
    ValueError
        ``compiled_grammar`` is not a :class:`leapgen.xgrammar.CompiledGrammar`.

    Notes
    -----
    Not thread-safe: one matcher per request. A rejected token or string
    leaves the matcher unchanged.
    """

    def __init__(self, compiled_grammar: CompiledGrammar, *, override_stop_tokens=None,
                 terminate_without_stop_token: bool = False, max_rollback_tokens: int = -1,
                 default_temperature: float | None = None):
        if not isinstance(compiled_grammar, CompiledGrammar):
            raise ValueError("The grammar should be compiled before passing it to GrammarMatcher.")
        if max_rollback_tokens != -1:
            warnings.warn("max_rollback_tokens is deprecated. You don't need to set it and it's always "
                          "unlimited (-1).", DeprecationWarning, stacklevel=2)
        if isinstance(override_stop_tokens, int):
            override_stop_tokens = [override_stop_tokens]
        self._compiled = compiled_grammar
        self._stop = (list(compiled_grammar.tokenizer_info.stop_token_ids) if override_stop_tokens is None
                      else [int(t) for t in override_stop_tokens])
        self._without_stop = bool(terminate_without_stop_token)
        native_stop = [] if self._without_stop else override_stop_tokens
        self._m = _runtime_error(lambda: NativeGrammarMatcher(
            compiled_grammar.native, stop_token_ids=native_stop, default_temperature=default_temperature))
        self._vocab_size = compiled_grammar.tokenizer_info.vocab_size

    @property
    def native(self) -> NativeGrammarMatcher:
        """The :class:`leapgen.GrammarMatcher` underneath."""
        return self._m

    @property
    def compiled_grammar(self) -> CompiledGrammar:
        return self._compiled

    # -- accepting -------------------------------------------------------------------------------

    def accept_token(self, token_id: int, *, debug_print: bool = False) -> bool:
        """Advance by one token if the grammar allows it.

        Returns False (matcher unchanged) for a token the grammar rejects, an id
        outside ``[0, vocab_size)``, a special token, or after termination.

        Parameters
        ----------
        debug_print : bool, default False
            Print the token, the verdict and the matcher's state.
        """
        if not isinstance(token_id, (int, np.integer)) or isinstance(token_id, bool):
            raise TypeError(f"token id must be an int, got {type(token_id).__name__}")
        ok = 0 <= token_id < self._vocab_size and self._m.accept_token(int(token_id))
        if debug_print:
            print(f"accept_token({token_id}) -> {ok}; state: {self._debug_print_internal_state()}")
        return ok

    def accept_string(self, input_str: str | bytes, *, debug_print: bool = False) -> bool:
        """Advance by a whole string (one rollback step) if the grammar allows it."""
        ok = self._m.accept_string(input_str)
        if debug_print:
            print(f"accept_string({input_str!r}) -> {ok}; state: {self._debug_print_internal_state()}")
        return ok

    # -- masks -----------------------------------------------------------------------------------

    def fill_next_token_bitmask(self, bitmask, index: int = 0, *, debug_print: bool = False) -> bool:
        """Write the next token's allowed set into ``bitmask[index]``.

        Parameters
        ----------
        bitmask : torch.Tensor or numpy.ndarray
            int32, ``(batch, ceil(vocab_size / 32))``.
        index : int, default 0
        debug_print : bool, default False
            Print how many tokens the row allows.

        Returns
        -------
        bool
            need_apply: False when every token is allowed.

        Raises
        ------
        RuntimeError
            The matcher has accepted its stop token; the bitmask is not int32,
            has the wrong width, or ``index`` is outside it.

        Mutates ``bitmask[index]`` only.
        """
        if self._m.is_terminated():
            raise RuntimeError("GrammarMatcher has terminated after accepting the stop token, but is trying to "
                               "find the next token mask")
        need_apply = _runtime_error(self._m.fill_next_token_bitmask, bitmask, index)
        if debug_print:
            row = np.asarray(bitmask[index]).view(np.uint32)
            print(f"fill_next_token_bitmask: {int(np.unpackbits(row.view(np.uint8)).sum())} tokens allowed")
        return need_apply

    def traverse_draft_tree(self, retrieve_next_token, retrieve_next_sibling, draft_tokens, token_bitmask,
                            time_threshold: float = -1.0, temperatures=None) -> bool:
        """Fill one bitmask row per node of a draft-token tree (see
        :meth:`leapgen.GrammarMatcher.traverse_draft_tree`); ``temperatures``
        (float32 CPU, one per node) receives each visited node's temperature,
        -1 where there is none. Does not change this matcher's state.

        Returns
        -------
        bool
            False when ``time_threshold`` ran out.

        Raises
        ------
        RuntimeError
            A tree tensor that is not int64 (xgrammar's dtype), or what
            :meth:`leapgen.GrammarMatcher.traverse_draft_tree` refuses.
        """
        for what, links in (("retrieve_next_token", retrieve_next_token),
                            ("retrieve_next_sibling", retrieve_next_sibling), ("draft_tokens", draft_tokens)):
            dtype = getattr(links, "dtype", None)
            if dtype is not None and str(dtype) not in ("torch.int64", "int64"):
                raise RuntimeError(f"{what} must be int64, got {dtype}")
        return _runtime_error(lambda: self._m.traverse_draft_tree(
            retrieve_next_token, retrieve_next_sibling, draft_tokens, token_bitmask, time_threshold,
            temperatures=temperatures))

    def find_jump_forward_string(self) -> str:
        """The longest text the grammar forces from here (whole characters only;
        stops where the grammar may end). Does not mutate.

        Raises
        ------
        RuntimeError
            The matcher has accepted its stop token (as in xgrammar).
        """
        if self._m.is_terminated():
            raise RuntimeError("GrammarMatcher has terminated after accepting the stop token, but is trying to "
                               "get the jump forward string")
        return self._m.find_jump_forward_string()

    def find_jump_forward_tokens(self) -> list[int]:
        """Token ids covering the forced continuation (xgrammar's contract): at each
        position the longest ordinary token (not special, not a stop token)
        matching the forced bytes, until none does; the last one is left out when
        it is a strict prefix of a longer ordinary token (the model could still
        merge across it). Empty after termination. Does not mutate; accept the
        ids with :meth:`accept_token` (this tokenization may differ from the
        tokenizer's)."""
        if self._m.is_terminated():
            return []
        data = self._m.find_jump_forward_bytes()
        if not data:
            return []
        lookup, longest, is_strict_prefix = self._compiled.tokenizer_info._jump_tables()
        out, i = [], 0
        while i < len(data):
            for size in range(min(longest, len(data) - i), 0, -1):
                t = lookup.get(data[i:i + size])
                if t is not None:
                    out.append(t)
                    i += size
                    break
            else:
                break
        if out and is_strict_prefix(self._compiled.tokenizer_info.native.token_bytes[out[-1]]):
            out.pop()
        return out

    # -- state -----------------------------------------------------------------------------------

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens / strings.

        Raises
        ------
        RuntimeError
            More than were accepted, or a negative count.
        """
        _runtime_error(self._m.rollback, num_tokens)

    def get_captures(self, *, deduplicate: bool = True) -> list[tuple[str, bytes]]:
        """Captured rule spans: always empty, as leapgen's EBNF refuses the
        ``capture`` rule option (no rule can capture)."""
        return []

    def is_terminated(self) -> bool:
        """Whether the stop token was accepted (with ``terminate_without_stop_token``:
        whether the grammar may end here)."""
        return self._m.is_completed() if self._without_stop else self._m.is_terminated()

    def is_completed(self) -> bool:
        """Whether what was accepted is a complete match of the grammar."""
        return self._m.is_completed()

    def reset(self) -> None:
        """Back to the start (mutates)."""
        self._m.reset()

    def fork(self) -> "GrammarMatcher":
        """An independent copy with the same state and history (the grammar is shared)."""
        other = object.__new__(GrammarMatcher)
        other.__dict__.update(self.__dict__)
        other._m = self._m.fork()
        return other

    @property
    def max_rollback_tokens(self) -> int:
        """Always -1 (unlimited), as in xgrammar."""
        return -1

    @property
    def temperature(self) -> float | None:
        """The sampling temperature of the active grammar rule, else the matcher's
        ``default_temperature``, else None (rounded to float32, as xgrammar keeps it)."""
        t = self._m.temperature
        return None if t is None else float(np.float32(t))

    @property
    def stop_token_ids(self) -> list[int]:
        return list(self._stop)

    def _debug_print_internal_state(self) -> str:
        return f"{self._m.state!r} terminated={self._m.is_terminated()}"


class BatchGrammarMatcher:
    """Fill, accept and roll back many matchers at once (``xgrammar.BatchGrammarMatcher``).

    Parameters
    ----------
    max_threads : int or "auto", default "auto"
        See :class:`leapgen.BatchGrammarMatcher`.
    """

    def __init__(self, max_threads="auto"):
        self._b = NativeBatchGrammarMatcher(max_threads)

    def batch_fill_next_token_bitmask(self, matchers: list[GrammarMatcher], bitmask, indices=None,
                                      debug_print: bool = False) -> None:
        """Fill row ``indices[i]`` (default ``i``) of ``bitmask`` for ``matchers[i]``.

        Raises
        ------
        RuntimeError
            A matcher has terminated; a bad bitmask; lengths that differ.
        """
        for m in matchers:
            if m._m.is_terminated():
                raise RuntimeError("GrammarMatcher has terminated after accepting the stop token, but is trying "
                                   "to find the next token mask")
        _runtime_error(self._b.batch_fill_next_token_bitmask, [m._m for m in matchers], bitmask, indices)
        if debug_print:
            print(f"batch_fill_next_token_bitmask: {len(matchers)} rows")

    @staticmethod
    def batch_fill_temperature(matchers: list[GrammarMatcher], temperatures, indices=None) -> None:
        """Write each matcher's :attr:`GrammarMatcher.temperature` into
        ``temperatures`` (a 1-D float32 CPU tensor), -1 where there is none.

        Raises
        ------
        RuntimeError
            ``temperatures`` is not a 1-D float32 CPU tensor or is too short; lengths that differ.
        """
        _runtime_error(NativeBatchGrammarMatcher.batch_fill_temperature, [m._m for m in matchers], temperatures,
                       indices)

    @staticmethod
    def batch_accept_token(matchers: list[GrammarMatcher], tokens: list[int], debug_print: bool = False) -> list[bool]:
        """``matchers[i].accept_token(tokens[i])`` for each i.

        Raises
        ------
        RuntimeError
            Lengths differ.
        """
        if len(matchers) != len(tokens):
            raise RuntimeError(f"{len(matchers)} matchers but {len(tokens)} tokens")
        return [m.accept_token(int(t), debug_print=debug_print) for m, t in zip(matchers, tokens)]

    @staticmethod
    def batch_accept_string(matchers: list[GrammarMatcher], strings: list, debug_print: bool = False) -> list[bool]:
        """``matchers[i].accept_string(strings[i])`` for each i.

        Raises
        ------
        RuntimeError
            Lengths differ.
        """
        if len(matchers) != len(strings):
            raise RuntimeError(f"{len(matchers)} matchers but {len(strings)} strings")
        return [m.accept_string(s, debug_print=debug_print) for m, s in zip(matchers, strings)]

    @staticmethod
    def batch_rollback(matchers: list[GrammarMatcher], num_tokens=1) -> None:
        """Roll each matcher back by ``num_tokens`` (one count, or one per matcher).

        Raises
        ------
        RuntimeError
            Lengths differ, or a count exceeds a matcher's history.
        """
        counts = [num_tokens] * len(matchers) if isinstance(num_tokens, int) else list(num_tokens)
        if len(counts) != len(matchers):
            raise RuntimeError(f"{len(matchers)} matchers but {len(counts)} rollback counts")
        for m, n in zip(matchers, counts):
            m.rollback(n)
