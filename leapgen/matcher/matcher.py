"""GrammarMatcher: the per-request cursor over a compiled grammar.

The verbs are xgrammar's, so engines can swap leapgen in:
``fill_next_token_bitmask``, ``accept_token``, ``accept_string``,
``is_completed``, ``is_terminated``, ``rollback``, ``reset``, ``fork``,
``find_jump_forward_string``.
"""

from __future__ import annotations

import math
import warnings
from typing import Iterable

import numpy as np

from leapgen.bitmask.cpu import numpy_view
from leapgen.compiler.compiled import CompiledGrammar
from leapgen.errors import StackDepthError
from leapgen.grammar.ir import TOKEN_LEAD
from leapgen.matcher.draft_tree import traverse_draft_tree


_INT32 = np.dtype(np.int32)


def _require_int(value, what: str) -> None:
    """Raise TypeError unless ``value`` is an int or numpy integer (not a bool)."""
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, np.integer)):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")


def _check_temperature(value, what: str) -> float | None:
    """``value`` as a float, checked finite and >= 0 (None passes)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{what} must be a number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite non-negative number, got {value}")
    return value


def _utf8_whole_prefix(data: bytes) -> bytes:
    """The longest prefix of ``data`` that ends on a UTF-8 character boundary."""
    end = len(data)
    i = end - 1
    while i >= 0 and i > end - 4 and 0x80 <= data[i] < 0xC0:
        i -= 1
    if i >= 0 and data[i] >= 0xC0:
        need = 2 if data[i] < 0xE0 else 3 if data[i] < 0xF0 else 4
        if end - i < need:
            return data[:i]
    return data


class GrammarMatcher:
    """Matches a token stream against a compiled grammar, one request each.

    Parameters
    ----------
    compiled_grammar : CompiledGrammar
        Shared and never mutated by the matcher.
    stop_token_ids : iterable of int, optional
        Stop tokens (default: the vocabulary's). A stop token is allowed
        exactly when the grammar may end; accepting one terminates the matcher.
    max_rollback_tokens : int, default -1
        History kept for :meth:`rollback`; -1 keeps it all.
    default_temperature : float, optional
        The sampling temperature where no active grammar rule sets one (see
        :attr:`temperature`); a finite non-negative number.

    Raises
    ------
    TypeError
        ``compiled_grammar`` is not a CompiledGrammar.
    ValueError
        A stop id out of range, a negative or non-finite ``default_temperature``.

    Notes
    -----
    Not thread-safe: one matcher belongs to one request. A rejected token or
    string leaves the matcher unchanged.
    """

    def __init__(self, compiled_grammar: CompiledGrammar, *, stop_token_ids: Iterable[int] | None = None,
                 max_rollback_tokens: int = -1, default_temperature: float | None = None):
        if not isinstance(compiled_grammar, CompiledGrammar):
            raise TypeError(f"GrammarMatcher needs a CompiledGrammar, got {type(compiled_grammar).__name__}")
        self.default_temperature = _check_temperature(default_temperature, "default_temperature")
        self._warned_temperature = False
        self.compiled_grammar = compiled_grammar
        info = compiled_grammar.tokenizer_info
        self._vocab_size = info.vocab_size
        self._token_bytes = info.token_bytes
        # a structural tag's markers as one token (see leapgen.compiler.token_literals)
        self._literals = compiled_grammar.token_literals
        if stop_token_ids is None:
            self._stop_ids = frozenset(info.stop_token_ids)
            self._custom_stop = None
        else:
            self._stop_ids = frozenset(int(t) for t in stop_token_ids)
            bad = [t for t in self._stop_ids if not 0 <= t < self._vocab_size]
            if bad:
                raise ValueError(f"stop token ids out of range [0, {self._vocab_size}): {sorted(bad)}")
            self._custom_stop = np.array(sorted(self._stop_ids), np.int64)
        # Regular grammars walk their DFA inline (the hot path); others go through the grammar.
        self._trans = memoryview(compiled_grammar.trans_flat) if compiled_grammar.is_regular else None
        self._start = compiled_grammar.start_state
        self.max_rollback_tokens = max_rollback_tokens
        self.reset()

    # -- state ------------------------------------------------------------------------------

    def reset(self) -> None:
        """Back to the start of the grammar (mutates)."""
        self._state = self._start
        self._terminated = False
        self._history: list[tuple[int, bool]] = []

    @property
    def num_accepted_tokens(self) -> int:
        """Tokens (and strings) accepted and not rolled back, as far as history is kept."""
        return len(self._history)

    @property
    def state(self):
        """The current state: a DFA state (int) for regular grammars, a
        configuration of parse stacks otherwise (for tools and tests)."""
        return self._state

    def is_completed(self) -> bool:
        """Whether what was accepted is a complete match (the grammar may end here)."""
        return self._terminated or self.compiled_grammar.is_accepting(self._state)

    def is_terminated(self) -> bool:
        """Whether a stop token was accepted."""
        return self._terminated

    @property
    def temperature(self) -> float | None:
        """The sampling temperature for the next token: the active grammar rule's
        (EBNF ``name[temperature=t] ::= ...``; an inner rule's overrides an
        outer one's; where parse paths disagree, their maximum, with a warning
        once per grammar), else :attr:`default_temperature`, else None. Pure."""
        if not self._terminated:
            temps = self.compiled_grammar.rule_temperatures(self._state)
            if len(temps) > 1 and not self._warned_temperature:
                self._warned_temperature = True
                warnings.warn(f"parse paths of this grammar set different temperatures {list(temps)} here; using "
                              f"the maximum, {temps[-1]} (warned once per matcher)", stacklevel=2)
            if temps:
                return temps[-1]
        return self.default_temperature

    def fork(self) -> "GrammarMatcher":
        """An independent copy with the same state and history (the grammar is shared)."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._history = list(self._history)
        return other

    # -- masks ------------------------------------------------------------------------------

    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> bool:
        """Write the allowed next tokens into row ``index`` of ``bitmask``.

        Parameters
        ----------
        bitmask : torch.Tensor or numpy.ndarray
            int32, shape ``(batch, ceil(vocab_size / 32))``; bit 1 = allowed.
            A CPU tensor is written through a shared numpy view; a CUDA tensor
            through a host-to-device copy.
        index : int, default 0
            The row to fill.

        Returns
        -------
        bool
            need_apply: False when every token is allowed (the engine may skip
            applying the mask).

        Raises
        ------
        TypeError
            ``bitmask`` is not int32, or ``index`` is not an int.
        ValueError
            ``bitmask`` is not ``(batch, ceil(vocab_size / 32))``.
        IndexError
            ``index`` outside ``[0, batch)``.

        Notes
        -----
        Mutates ``bitmask[index]`` only; the matcher's state is unchanged.
        After termination nothing is allowed (an all-zero row): the request
        is over and the engine must stop.
        """
        arr = numpy_view(bitmask)
        self._check_bitmask(bitmask if arr is None else arr, index, self.compiled_grammar.token_index.bitmask_words)
        if self._terminated:
            row, need_apply = self.compiled_grammar.token_index.empty_words().view(np.int32), True
        elif arr is not None and self._custom_stop is None and arr[index].flags.c_contiguous:
            return self.compiled_grammar.write_row(self._state, arr[index])
        else:
            row, need_apply = self.compiled_grammar.bitmask_row(self._state)
            if self._custom_stop is not None:
                row = self._with_stop(row, self.compiled_grammar.is_accepting(self._state))
                need_apply = True
        if arr is not None:
            arr[index, :] = row
        else:
            import torch

            bitmask[index].copy_(torch.from_numpy(np.array(row)), non_blocking=True)
        return need_apply

    @staticmethod
    def _check_bitmask(bitmask, index, words: int) -> None:
        """Refuse a bitmask a row cannot be written into as it would be read
        (xgrammar's contract: int32, 2-D, ``ceil(vocab_size / 32)`` words a
        row). Cheap on the hot path: a numpy view is checked by attribute."""
        _require_int(index, "index")
        if isinstance(bitmask, np.ndarray):
            if bitmask.dtype != _INT32:
                raise TypeError(f"bitmask must be an int32 numpy array or torch tensor, got {bitmask.dtype}")
        else:
            dtype = str(getattr(bitmask, "dtype", type(bitmask).__name__))
            if not hasattr(bitmask, "shape") or dtype != "torch.int32":
                raise TypeError(f"bitmask must be an int32 numpy array or torch tensor, got {dtype}")
        shape = bitmask.shape
        if len(shape) != 2 or shape[1] != words:
            raise ValueError(f"bitmask must have shape (batch, {words}) for this vocabulary, got {tuple(shape)}")
        if not 0 <= index < shape[0]:
            raise IndexError(f"bitmask row {index} outside [0, {shape[0]})")

    def _with_stop(self, row: np.ndarray, allow: bool) -> np.ndarray:
        """A copy of ``row`` with this matcher's stop tokens (not the vocabulary's) allowed iff ``allow``."""
        words = np.array(row).view(np.uint32)
        self.compiled_grammar.token_index.set_stop_bits(words, False)
        if allow:
            ids = self._custom_stop if self._custom_stop is not None else self.compiled_grammar.token_index.stop_token_ids
            for t in ids.tolist():
                words[t >> 5] |= np.uint32(1 << (t & 31))
        return words.view(np.int32)

    # -- accepting ----------------------------------------------------------------------------

    def _walk(self, data: bytes, token: bool):
        """The state after ``data`` (a token or a string), or None if rejected."""
        t = self._trans
        if t is None:
            return self.compiled_grammar.advance(self._state, data, token=token)
        s = self._state
        for b in data:
            s = t[(s << 8) | b]
            if s < 0:
                return None
        return s

    def _push(self, new_state, terminated: bool) -> None:
        self._history.append((self._state, self._terminated))
        if 0 <= self.max_rollback_tokens < len(self._history):
            del self._history[0]
        self._state = new_state
        self._terminated = terminated
        if self._trans is None:
            self.compiled_grammar.accepted(new_state)

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token if the grammar allows it.

        Parameters
        ----------
        token_id : int
            In ``[0, vocab_size)``.

        Returns
        -------
        bool
            True if accepted (state advanced); False if rejected (unchanged).

        Raises
        ------
        TypeError
            ``token_id`` is not an int.
        ValueError
            ``token_id`` outside ``[0, vocab_size)``.
        StackDepthError
            The token is rejected only because it would nest deeper than the
            grammar's ``max_stack_depth`` (the mask never allows it).
        """
        _require_int(token_id, "token id")
        if not 0 <= token_id < self._vocab_size:
            raise ValueError(f"token id {token_id} outside [0, {self._vocab_size})")
        if self._terminated:
            return False
        if token_id in self._stop_ids:
            if not self.compiled_grammar.is_accepting(self._state):
                return False
            self._push(self._state, True)
            return True
        data = self._token_bytes[token_id]
        if not data:
            data = self._literals.get(token_id)
            if data is None:
                return False  # special or padding token
        elif self._literals and TOKEN_LEAD in data:
            return False  # could start a token literal's path: no grammar text holds this byte
        s = self._walk(data, True)
        if s is None:
            self._refuse_depth(data, True)
            return False
        self._push(s, False)
        return True

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by a whole string (one history step) if the grammar allows it.

        Returns True if accepted; False leaves the matcher unchanged. A string
        may end inside a UTF-8 character only when given as ``bytes``.

        Raises
        ------
        TypeError
            ``text`` is neither ``str`` nor bytes-like.
        StackDepthError
            The string is rejected only because it would nest deeper than the
            grammar's ``max_stack_depth``.
        """
        if not isinstance(text, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"accept_string takes a str or bytes, got {type(text).__name__}")
        if self._terminated:
            return False
        try:
            data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        except UnicodeEncodeError:
            return False  # a lone surrogate has no UTF-8 form: no grammar text can hold it
        if self._literals and TOKEN_LEAD in data:
            return False  # text never holds a token literal's lead byte
        s = self._walk(data, False)
        if s is None:
            self._refuse_depth(data, False)
            return False
        self._push(s, False)
        return True

    def _refuse_depth(self, data: bytes, token: bool) -> None:
        """Raise :class:`StackDepthError` when ``data`` was rejected only for the stack depth bound."""
        compiled = self.compiled_grammar
        if not compiled.is_regular and compiled.rejected_for_depth(self._state, data, token=token):
            raise StackDepthError(f"this input nests deeper than max_stack_depth={compiled.pda.max_stack_depth}; "
                                  "compile with a larger GrammarCompiler(max_stack_depth=...)")

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens/strings (mutates).

        Raises
        ------
        TypeError
            ``num_tokens`` is not an int.
        ValueError
            ``num_tokens`` is negative or more than the history holds.
        """
        _require_int(num_tokens, "num_tokens")
        if num_tokens < 0 or num_tokens > len(self._history):
            raise ValueError(f"cannot roll back {num_tokens} tokens; {len(self._history)} in history")
        if num_tokens == 0:
            return
        self._state, self._terminated = self._history[-num_tokens]
        del self._history[-num_tokens:]

    # -- speculative decoding -------------------------------------------------------------------

    def traverse_draft_tree(self, retrieve_next_token, retrieve_next_sibling, draft_tokens, bitmask,
                            time_threshold: float = -1.0, temperatures=None) -> bool:
        """Fill one bitmask row per node of a draft-token tree (xgrammar's API).

        Parameters
        ----------
        retrieve_next_token : torch.Tensor, numpy.ndarray or list of int
            Shape ``(num_nodes,)``: each node's first child, -1 for none.
        retrieve_next_sibling : same
            Shape ``(num_nodes,)``: each node's next sibling, -1 for none.
        draft_tokens : same
            Shape ``(num_nodes,)``: each node's token; node 0 is the root, whose
            token this matcher has already accepted.
        bitmask : torch.Tensor or numpy.ndarray
            int32, shape ``(>= num_nodes, ceil(vocab_size / 32))``. Row ``i``
            receives the tokens allowed after the path root..i; rows of nodes
            the grammar rejects (and their subtrees), of nodes after a stop
            token, and of nodes not reached in time are all zero.
        time_threshold : float, default -1.0
            Seconds the traversal may take; <= 0 means no limit.
        temperatures : torch.Tensor or numpy.ndarray, optional
            float32 CPU, ``(>= num_nodes,)``: receives each visited node's
            :attr:`temperature` (after its path), -1 where there is none and
            for nodes not visited or rejected.

        Returns
        -------
        bool
            False when the time threshold ran out (rows not reached are zero;
            the root's row is always filled).

        Raises
        ------
        ValueError
            Arrays of different lengths, links outside the tree, a sibling of
            the root, a cycle, or a bitmask that is not two-dimensional or has
            too few rows.

        Notes
        -----
        Mutates ``bitmask[:num_nodes]`` (and ``temperatures[:num_nodes]``) only;
        works on a fork, so this matcher's state is unchanged.
        """
        return traverse_draft_tree(self, retrieve_next_token, retrieve_next_sibling, draft_tokens, bitmask,
                                   time_threshold, temperatures)

    # -- jump-forward ---------------------------------------------------------------------------

    def find_jump_forward_bytes(self) -> bytes:
        """The bytes the grammar forces next (may end inside a UTF-8 character).

        Stops before any state where the grammar may end (EOS is then an
        alternative) or where more than one byte may follow. Does not mutate.
        """
        if self._terminated:
            return b""
        return self.compiled_grammar.forced_bytes(self._state)

    def find_jump_forward_string(self) -> str:
        """The longest text the grammar forces from here, as whole characters.

        Returns ``""`` when nothing is forced or when the matcher stands inside
        a multi-byte character. Never splits a UTF-8 character; stops before
        any point where the grammar may end. Does not mutate.

        Source: the compressed FSM of SGLang (Zheng et al., 2024, section 4).
        """
        data = self.find_jump_forward_bytes()
        if not data or 0x80 <= data[0] < 0xC0:
            return ""
        return _utf8_whole_prefix(data).decode("utf-8")
