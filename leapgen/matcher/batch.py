"""BatchGrammarMatcher: the verbs of :class:`GrammarMatcher` over a batch.

Filling a row whose state was seen before is a ~1-3 µs copy of a cached row;
a row seen for the first time is a walk of the vocabulary trie (~2 ms on a
128k vocabulary; the numba kernel releases the GIL) or, for a context-free
grammar, up to tens of ms of mostly Python work. Measured on the 2-core
benchmark machine (Llama-3, batch 64; ``benchmarks/README.md``): cached rows
take ~58 µs in a plain loop and more through any pool; 64 new rows took
73.2 ms serially and 70.6 ms on two threads (medians of 10 interleaved
trials, within the noise of a shared machine). Threads do not pay reliably,
so ``max_threads="auto"`` fills serially. An explicit ``max_threads > 1``
computes each *new* state's row once on a pool (matchers in the same state
share it) and then copies every row serially, for machines with more cores.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from leapgen.bitmask.cpu import numpy_view
from leapgen.matcher.matcher import GrammarMatcher


class BatchGrammarMatcher:
    """Fill, accept and roll back many matchers at once (xgrammar's API).

    Parameters
    ----------
    max_threads : int or "auto", default "auto"
        Threads that compute new bitmask rows; 1 (and ``"auto"``, see the
        module docstring) computes everything on the calling thread.

    Raises
    ------
    ValueError
        ``max_threads`` is neither ``"auto"`` nor a positive int.

    Notes
    -----
    The pool is created on first use and lives as long as the object. The
    matchers must not be used by another thread during a call.
    """

    def __init__(self, max_threads: int | str = "auto"):
        if max_threads == "auto":
            max_threads = 1  # measured: threads lose (module docstring)
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"max_threads must be 'auto' or a positive int, got {max_threads!r}")
        self.max_threads = max_threads
        self._pool: ThreadPoolExecutor | None = None

    def batch_fill_next_token_bitmask(self, matchers: Sequence[GrammarMatcher], bitmask,
                                      indices: Sequence[int] | None = None) -> None:
        """Fill row ``indices[i]`` (default ``i``) of ``bitmask`` for ``matchers[i]``.

        Parameters
        ----------
        matchers : sequence of GrammarMatcher
        bitmask : torch.Tensor or numpy.ndarray
            int32, shape ``(batch, ceil(vocab_size / 32))`` with
            ``batch >= len(matchers)``; a CUDA tensor is filled through one
            host-to-device copy of the rows.
        indices : sequence of int, optional
            The rows to fill, one per matcher.

        Raises
        ------
        ValueError
            ``indices`` of another length than ``matchers``.

        Mutates the chosen rows of ``bitmask`` only.
        """
        rows = list(range(len(matchers))) if indices is None else [int(i) for i in indices]
        if len(rows) != len(matchers):
            raise ValueError(f"{len(matchers)} matchers but {len(rows)} indices")
        self._compute_new_rows(matchers)
        arr = numpy_view(bitmask)
        if arr is not None:
            for matcher, row in zip(matchers, rows):
                matcher.fill_next_token_bitmask(arr, row)
            return
        import torch

        staging = np.empty((len(rows), bitmask.shape[1]), np.int32)
        for i, matcher in enumerate(matchers):
            matcher.fill_next_token_bitmask(staging, i)
        target = torch.as_tensor(rows, dtype=torch.long, device=bitmask.device)
        bitmask.index_copy_(0, target, torch.from_numpy(staging).to(bitmask.device, non_blocking=True))

    def _compute_new_rows(self, matchers: Sequence[GrammarMatcher]) -> None:
        """Compute, on the pool, the rows of states not yet cached (one per state)."""
        if self.max_threads < 2:
            return
        new = {}
        for m in matchers:
            grammar = m.compiled_grammar
            if not m.is_terminated() and not grammar.has_bitmask_row(m.state):
                new.setdefault((id(grammar), m.state), (grammar, m.state))
        if len(new) < 2:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_threads, thread_name_prefix="leapgen-batch")
        for _ in self._pool.map(lambda gs: gs[0].prepare_row(gs[1]), new.values()):
            pass

    @staticmethod
    def batch_fill_temperature(matchers: Sequence[GrammarMatcher], temperatures,
                               indices: Sequence[int] | None = None) -> None:
        """Write ``matchers[i].temperature`` into ``temperatures[indices[i]]``
        (default ``i``), -1 for a matcher without one (xgrammar's API).

        Parameters
        ----------
        matchers : sequence of GrammarMatcher
        temperatures : torch.Tensor or numpy.ndarray
            float32, one-dimensional, on the CPU, long enough for every index.
        indices : sequence of int, optional

        Raises
        ------
        ValueError
            ``indices`` of another length than ``matchers``, or a
            ``temperatures`` that is not a long enough 1-D float32 CPU array.

        Mutates the chosen entries of ``temperatures`` only.
        """
        from leapgen.matcher.draft_tree import temperature_array

        rows = list(range(len(matchers))) if indices is None else [int(i) for i in indices]
        if len(rows) != len(matchers):
            raise ValueError(f"{len(matchers)} matchers but {len(rows)} indices")
        if any(r < 0 for r in rows):
            raise ValueError("temperature indices must be >= 0")
        arr = temperature_array(temperatures, max(rows, default=-1) + 1, "temperatures")
        for matcher, row in zip(matchers, rows):
            t = matcher.temperature
            arr[row] = -1.0 if t is None else t

    @staticmethod
    def batch_accept_token(matchers: Sequence[GrammarMatcher], token_ids: Sequence[int]) -> list[bool]:
        """``matchers[i].accept_token(token_ids[i])`` for each i.

        Returns
        -------
        list of bool
            Whether each token was accepted (a rejected one leaves its matcher unchanged).

        Raises
        ------
        ValueError
            Lengths differ, or a token id is out of range.
        """
        if len(matchers) != len(token_ids):
            raise ValueError(f"{len(matchers)} matchers but {len(token_ids)} tokens")
        return [m.accept_token(int(t)) for m, t in zip(matchers, token_ids)]

    @staticmethod
    def batch_accept_string(matchers: Sequence[GrammarMatcher], strings: Sequence[str | bytes]) -> list[bool]:
        """``matchers[i].accept_string(strings[i])`` for each i; returns acceptance per matcher.

        Raises
        ------
        ValueError
            Lengths differ.
        """
        if len(matchers) != len(strings):
            raise ValueError(f"{len(matchers)} matchers but {len(strings)} strings")
        return [m.accept_string(s) for m, s in zip(matchers, strings)]

    @staticmethod
    def batch_rollback(matchers: Sequence[GrammarMatcher], num_tokens: int | Sequence[int] = 1) -> None:
        """Roll each matcher back by ``num_tokens`` (one count, or one per matcher).

        Raises
        ------
        ValueError
            Lengths differ, or a count exceeds a matcher's history (matchers
            before it are already rolled back).
        """
        counts = [num_tokens] * len(matchers) if isinstance(num_tokens, int) else list(num_tokens)
        if len(counts) != len(matchers):
            raise ValueError(f"{len(matchers)} matchers but {len(counts)} rollback counts")
        for m, n in zip(matchers, counts):
            m.rollback(n)
