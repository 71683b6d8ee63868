"""Load the grammar layer's kernels in the background before any vocabulary is known.

One responsibility. In a new process the first compile pays numba's set-up
(its typing and target registries, ~0.3 s of CPU) and the loading of each
cached kernel it calls (~15-30 ms each), on top of the compile itself
(``benchmarks/bench_cold_start.py``). numba specializes a kernel on its
arguments' types only, never on their sizes, so a :class:`GrammarCompiler`
over a toy vocabulary (every byte and a few longer tokens) loads the very
specializations a real vocabulary's regular grammars call, and its
:meth:`~GrammarCompiler.warm_up` compile also fills the process-wide fragment
caches (strings, numbers, formats). :func:`warm_up_in_background` does that on
a thread while the caller loads its model (``LLM(warm_up_grammar=True)``;
numba's loading runs partly outside the GIL). This module imports neither
numba nor the compiler, so a process that never asks for a grammar never pays
for them (``LLM`` imports them on its own thread before it starts this one); :func:`wait_for_warm_up` is
called by the first compile's set-up, inside its timed region. The pushdown
kernels still load on the first context-free grammar
(:meth:`TokenIndex.warm_up_pushdown`).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from leapgen.vocab import TokenizerInfo

logger = logging.getLogger("leapgen.compiler")
_lock = threading.Lock()
_thread: threading.Thread | None = None


def toy_vocabulary() -> TokenizerInfo:
    """A 260-token byte-level vocabulary: the 256 bytes, three longer tokens and a stop token (id 259)."""
    from leapgen.vocab import TokenizerInfo

    return TokenizerInfo([bytes([b]) for b in range(256)] + [b'{"', b"ab", b"  ", b""], vocab_size=260,
                         stop_token_ids=[259])


def warm_up_kernels() -> None:
    """Load the kernels of regular grammars' compiles and masks, and fill the fragment caches, now
    (a :class:`GrammarCompiler` over :func:`toy_vocabulary`, its warm-up compile included;
    ~0.5 s of CPU in a new process, milliseconds once loaded; the compiler's modules and numba are
    imported here, not with this module). Mutates only process-wide caches."""
    from leapgen.compiler.compiler import GrammarCompiler

    GrammarCompiler(toy_vocabulary(), warm_up=True)


def _run() -> None:
    try:
        warm_up_kernels()
    except Exception:  # noqa: BLE001 - a failed warm-up costs the first compile its loads, nothing else
        logger.warning("the grammar layer's background warm-up failed; the first compile loads its kernels",
                       exc_info=True)


def warm_up_in_background() -> threading.Thread:
    """Start :func:`warm_up_kernels` on a daemon thread (once per process; later calls return the
    same thread).

    Returns
    -------
    threading.Thread
        The warm-up thread (it may have finished).
    """
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_run, name="leapgen-warm-up", daemon=True)
            _thread.start()
        return _thread


def wait_for_warm_up(timeout: float | None = None) -> bool:
    """Wait for the background warm-up, if one was started (no-op otherwise).

    Parameters
    ----------
    timeout : float or None, default None
        Seconds to wait at most; None: until it ends.

    Returns
    -------
    bool
        True if no warm-up runs any more (never started, or finished).
    """
    thread = _thread
    if thread is None:
        return True
    thread.join(timeout)
    return not thread.is_alive()
