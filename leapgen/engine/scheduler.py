"""Admission control for continuous batching: :class:`Scheduler`.

One responsibility: which requests run. Requests wait in FIFO order and are
admitted between steps while two limits hold: the number of running requests
(``max_running``) and a KV token budget. Each admitted request reserves
``prompt tokens + max_tokens`` KV entries up front (its worst case), so a
running request never has to be preempted; a request larger than the whole
budget is admitted alone rather than never. Finished requests leave between
steps and free their reservation.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable

from leapgen.engine.request import Request


class Scheduler:
    """Waiting and running requests.

    Parameters
    ----------
    max_running : int, default 16
        Most requests in the running batch (>= 1).
    kv_token_budget : int, default 65536
        Most KV tokens reserved by running requests together (>= 1).

    Raises
    ------
    ValueError
        If a limit is < 1.
    """

    def __init__(self, max_running: int = 16, kv_token_budget: int = 65536):
        if max_running < 1 or kv_token_budget < 1:
            raise ValueError(f"max_running and kv_token_budget must be >= 1, got {max_running}, {kv_token_budget}")
        self.max_running = max_running
        self.kv_token_budget = kv_token_budget
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.num_reserved = 0

    @staticmethod
    def reservation(req: Request) -> int:
        """KV tokens ``req`` may need at most."""
        return len(req.prompt_ids) + req.params.max_tokens

    def add(self, req: Request) -> None:
        """Queue ``req`` (mutates ``waiting``)."""
        self.waiting.append(req)

    def admit(self) -> list[Request]:
        """Move waiting requests into the running batch, in order, while the
        limits allow. Returns the admitted ones (mutates both queues)."""
        admitted = []
        while self.waiting and len(self.running) < self.max_running:
            need = self.reservation(self.waiting[0])
            if self.running and self.num_reserved + need > self.kv_token_budget:
                break
            req = self.waiting.popleft()
            self.running.append(req)
            self.num_reserved += need
            admitted.append(req)
        return admitted

    def remove(self, requests: Iterable[Request]) -> None:
        """Drop ``requests`` from either queue, freeing their reservations."""
        drop = {id(r) for r in requests}
        if not drop:
            return
        for req in self.running:
            if id(req) in drop:
                self.num_reserved -= self.reservation(req)
        self.running = [r for r in self.running if id(r) not in drop]
        self.waiting = deque(r for r in self.waiting if id(r) not in drop)

    def __len__(self) -> int:
        return len(self.waiting) + len(self.running)
