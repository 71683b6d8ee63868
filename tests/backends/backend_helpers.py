"""Helpers shared by the backend suites."""

from __future__ import annotations

import numpy as np


def allowed_ids(bitmask: np.ndarray, row: int = 0) -> np.ndarray:
    """Token ids whose bit is set in ``bitmask[row]``."""
    return np.flatnonzero(np.unpackbits(np.ascontiguousarray(bitmask[row]).view(np.uint8), bitorder="little"))


def mask_of(backend, state) -> np.ndarray:
    """The allowed ids of a state (a fresh one-row bitmask)."""
    bitmask = backend.allocate_bitmask(1)
    bitmask[:] = 0
    state.fill_next_token_bitmask(bitmask, 0)
    return allowed_ids(bitmask)
