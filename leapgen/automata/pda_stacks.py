"""Parse stacks interned as ints: the pushdown runtime's memory, with nothing for the garbage collector.

A stack is a top frame (a global state: the rule's state offset by the rule's
base, :attr:`Pda.state_base <leapgen.automata.pda.Pda.state_base>`) over the
stack below it. Every distinct stack gets one id, the first time it is met,
so stacks share their tails (persistent stacks, as xgrammar's, Dong et al.,
2024, section 3.3) and two stacks are equal exactly when their ids are; id
``0`` is the empty stack. A configuration is a sorted tuple of stack ids.

A frame may also carry *keys*, an int: the keys a keyed object has written so
far (:mod:`leapgen.automata.keyed`), 0 for every other frame. Keys are part
of the stack's identity (two stacks differing only in a frame's keys get two
ids) and are kept per id in :attr:`StackStore.keys`, only where nonzero, so
grammars without keyed objects pay nothing for them.

Why ints: the runtime makes stacks and configurations at every byte, and
caches keep many. As Python objects they were most of what a full
collection had to traverse (100-200 ms pauses); ints in ``array`` columns and
int-keyed dicts are not tracked by the collector at all, and tuples of ints
are untracked at their first collection.
"""

from __future__ import annotations

import threading
from array import array

from leapgen.errors import LeapgenError

#: The most stacks one grammar interns (about 130 bytes each: ~130 MiB at the bound).
MAX_STACKS = 1 << 20
EMPTY = 0


class StackStoreFullError(LeapgenError):
    """A grammar's parse-stack store reached :data:`MAX_STACKS` distinct stacks.

    Raised where a new stack is needed (accepting, filling a mask); the
    request that needs it fails alone. Compiling the grammar again gives an
    empty store.
    """


class StackStore:
    """Interned parse stacks (thread-safe; grows, never changes an id's meaning).

    Parameters
    ----------
    max_stacks : int
        The bound on distinct stacks (see :class:`StackStoreFullError`).

    Attributes
    ----------
    top, below, depth : array.array
        Per stack id: the global state of its top frame, the id of the stack
        below it (``EMPTY`` for none) and its number of frames. Read them,
        never write.
    keys : dict of int to int
        Stack id -> the keys of its top frame, for the ids whose top frame has
        nonzero keys (absent: 0). Read it, never write.
    """

    def __init__(self, max_stacks: int = MAX_STACKS):
        self.top = array("l", [-1])
        self.below = array("l", [EMPTY])
        self.depth = array("l", [0])
        self.keys: dict[int, int] = {}
        self._ids: dict = {}  # (below << 32) | top -> id; (below, top, keys) for a frame with keys
        self._max = max_stacks
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Stacks interned, the empty one included."""
        return len(self.top)

    def push(self, top: int, below: int, keys: int = 0) -> int:
        """The id of the stack with frame ``top`` (a global state, holding ``keys``: see the module
        docstring) over stack ``below``.

        Raises
        ------
        StackStoreFullError
            A new stack is needed and the store holds ``max_stacks``.
        """
        key = (below << 32) | top if not keys else (below, top, keys)
        got = self._ids.get(key)
        if got is None:
            with self._lock:
                got = self._ids.get(key)
                if got is None:
                    got = len(self.top)
                    if got >= self._max:
                        raise StackStoreFullError(
                            f"the grammar's parse-stack store is full ({self._max:,} distinct stacks); "
                            "compile the grammar again for a fresh one")
                    self.top.append(top)
                    self.below.append(below)
                    self.depth.append(self.depth[below] + 1)
                    if keys:
                        self.keys[got] = keys
                    self._ids[key] = got
        return got

    def frames(self, stack: int, n: int) -> list[int]:
        """The global states of the top ``n`` frames of ``stack``, top first (fewer where it is shorter)."""
        top, below, out = self.top, self.below, []
        while stack != EMPTY and len(out) < n:
            out.append(top[stack])
            stack = below[stack]
        return out

    def memory_bytes(self) -> int:
        """Approximate bytes held (columns and the intern table)."""
        return 3 * 8 * len(self.top) + 100 * len(self._ids) + 100 * len(self.keys)
