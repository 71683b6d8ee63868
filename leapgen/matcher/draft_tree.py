"""Bitmasks for a tree of draft tokens (speculative decoding), in one call.

The tree is xgrammar's (and SGLang's EAGLE) encoding: per node its first
child and its next sibling (-1 for none) and its draft token. Node 0 is the
root, whose token the matcher has already accepted. Row ``i`` of the bitmask
receives the tokens allowed after the path root..i; nodes whose token the
parent's row forbids, nodes below them, nodes after a stop token and nodes
left when time runs out get an all-zero row (time is checked from the
first node below the root on, so the root's row is always filled, as in xgrammar).

The walk is a depth-first search on a fork of the matcher, rolled back to the
parent's depth before each sibling, so the caller's matcher never changes.
"""

from __future__ import annotations

import time

import numpy as np

from leapgen.bitmask.cpu import numpy_view


def temperature_array(temperatures, need: int, what: str) -> np.ndarray:
    """A writable float32 numpy view of a 1-D CPU tensor or array of at least ``need`` entries.

    Raises
    ------
    ValueError
        Not float32, not one-dimensional, not on the CPU, or too short.
    """
    if isinstance(temperatures, np.ndarray):
        arr = temperatures
    elif getattr(temperatures, "device", None) is not None and temperatures.device.type == "cpu":
        arr = temperatures.numpy()
    else:
        raise ValueError(f"the {what} tensor must be a float32 CPU tensor or numpy array")
    if arr.dtype != np.float32 or arr.ndim != 1 or arr.shape[0] < need:
        raise ValueError(f"the {what} tensor must be one-dimensional float32 with at least {need} entries, got "
                         f"{arr.dtype} {tuple(arr.shape)}")
    return arr


def _as_ints(values, what: str) -> list[int]:
    out = values.tolist() if hasattr(values, "tolist") else list(values)
    if any(isinstance(v, list) for v in out):
        raise ValueError(f"{what} must be one-dimensional")
    return [int(v) for v in out]


def traverse_draft_tree(matcher, retrieve_next_token, retrieve_next_sibling, draft_tokens, bitmask,
                        time_threshold: float = -1.0, temperatures=None) -> bool:
    """Fill one bitmask row per draft-tree node (and, when given, each node's
    temperature); see :meth:`GrammarMatcher.traverse_draft_tree`."""
    first_child = _as_ints(retrieve_next_token, "retrieve_next_token")
    next_sibling = _as_ints(retrieve_next_sibling, "retrieve_next_sibling")
    tokens = _as_ints(draft_tokens, "draft_tokens")
    n = len(tokens)
    if not (len(first_child) == len(next_sibling) == n) or n == 0:
        raise ValueError(f"the tree arrays must have one equal, positive length; got {len(first_child)}, "
                         f"{len(next_sibling)}, {n}")
    for what, links in (("retrieve_next_token", first_child), ("retrieve_next_sibling", next_sibling)):
        bad = [v for v in links if not -1 <= v < n or v == 0]
        if bad:
            raise ValueError(f"{what} holds {bad[0]}; entries are node indices in [1, {n}) or -1")
    if next_sibling[0] != -1:
        raise ValueError(f"retrieve_next_sibling[0] is {next_sibling[0]}; the root (node 0) has no sibling")
    if len(bitmask.shape) != 2:
        raise ValueError(f"bitmask must be two-dimensional (one row per node), got shape {tuple(bitmask.shape)}")
    arr = numpy_view(bitmask)
    rows = arr if arr is not None else np.zeros((n, bitmask.shape[1]), np.int32)
    if rows.shape[0] < n:
        raise ValueError(f"bitmask has {rows.shape[0]} rows for {n} draft nodes")
    rows[:n] = 0
    temps = None
    if temperatures is not None:
        temps = temperature_array(temperatures, n, "temperatures")
        temps[:n] = -1.0
    deadline = time.perf_counter() + time_threshold if time_threshold > 0 else None
    work = matcher.fork()
    work.max_rollback_tokens = -1
    base = work.num_accepted_tokens
    stack = [(0, -1, base)]  # (node, parent node, history depth of the parent's path)
    completed = True
    visits = 0
    while stack:
        node, parent, depth = stack.pop()
        visits += 1
        if visits > n:
            raise ValueError("the draft tree has a cycle")
        if node != 0 and deadline is not None and time.perf_counter() > deadline:  # the root's row always
            completed = False
            break
        work.rollback(work.num_accepted_tokens - depth)
        if next_sibling[node] != -1:
            stack.append((next_sibling[node], parent, depth))
        if node != 0:
            token = tokens[node]
            words = rows[parent].view(np.uint32)
            if not 0 <= token < work._vocab_size or not (int(words[token >> 5]) >> (token & 31)) & 1:
                continue
            if not work.accept_token(token):
                continue
        if temps is not None:
            t = work.temperature
            temps[node] = -1.0 if t is None else t
        if work.is_terminated():
            continue
        work.fill_next_token_bitmask(rows, node)
        if first_child[node] != -1:
            stack.append((first_child[node], node, work.num_accepted_tokens))
    if arr is None:
        import torch

        bitmask[:n].copy_(torch.from_numpy(rows).to(bitmask.device))
    return completed
