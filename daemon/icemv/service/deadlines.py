"""Callbacks run at their deadlines by one thread, unless cancelled before.

The HTTP server cuts off a request not read in full within its deadline. A
`threading.Timer` per request was a thread start per request, and under a burst each
start waits for the new thread to get the GIL; one thread keeps every deadline instead.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

import structlog

log = structlog.get_logger(__name__)


class Deadlines:
    def __init__(self, name: str) -> None:
        self._condition = threading.Condition()
        # (when, token); a cancelled token's entry stays until it comes up, then is dropped.
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._tokens = itertools.count()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._condition:
            self._stopping = True
            self._callbacks.clear()
            self._condition.notify()
        if self._thread.is_alive():
            self._thread.join(5.0)

    def add(self, seconds: float, callback: Callable[[], None]) -> int:
        """Run `callback` on this thread in `seconds`; returns a token for `cancel`."""
        with self._condition:
            token = next(self._tokens)
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            self._callbacks[token] = callback
            if self._heap[0][1] == token:  # sooner than what the thread waits for
                self._condition.notify()
        return token

    def cancel(self, token: int) -> None:
        with self._condition:
            self._callbacks.pop(token, None)

    def _due(self) -> Callable[[], None] | None:
        """The next callback once due; None when stopping."""
        with self._condition:
            while not self._stopping:
                while self._heap and self._heap[0][1] not in self._callbacks:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._condition.wait()
                    continue
                delay = self._heap[0][0] - time.monotonic()
                if delay <= 0:
                    _, token = heapq.heappop(self._heap)
                    return self._callbacks.pop(token)
                self._condition.wait(delay)
            return None

    def _run(self) -> None:
        while (callback := self._due()) is not None:
            try:
                callback()
            except Exception as exc:  # noqa: BLE001 (the other deadlines must still run)
                log.warning("deadline_callback_failed", error=type(exc).__name__)
