"""Which Kafka offsets may be committed: pure bookkeeping, no Kafka calls.

An event is done when every refresh it led to has finished. Per partition, the committable
offset is the end of the longest run of done events, so a slow MV holds back only the
offsets behind it, and after a crash every unfinished event is delivered again.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Partition:
    in_flight: deque[tuple[int, list[Future[Any]]]] = field(default_factory=deque)
    committable: int | None = None  # next offset to commit (last done + 1)


class OffsetTracker:
    """Per partition, the events in flight and the offset up to which all are done.

    Thread-safe: futures finish on refresh threads while the consumer thread asks.
    Partitions are any hashable (kafka-python's `TopicPartition` in the consumer).
    """

    def __init__(self) -> None:
        self._partitions: dict[Hashable, _Partition] = {}
        self._lock = threading.Lock()

    def add(self, partition: Hashable, offset: int, futures: Sequence[Future[Any]]) -> None:
        """Track the event at `offset`; it is done when all `futures` are (at once if none)."""
        with self._lock:
            self._partitions.setdefault(partition, _Partition()).in_flight.append(
                (offset, list(futures))
            )

    def advance(self) -> dict[Hashable, int]:
        """Offsets to commit now (next offset to read), for partitions that moved."""
        moved: dict[Hashable, int] = {}
        with self._lock:
            for partition, state in self._partitions.items():
                before = state.committable
                while state.in_flight and all(f.done() for f in state.in_flight[0][1]):
                    offset, _ = state.in_flight.popleft()
                    state.committable = offset + 1
                if state.committable is not None and state.committable != before:
                    moved[partition] = state.committable
        return moved

    def pending(self, partition: Hashable) -> int:
        with self._lock:
            state = self._partitions.get(partition)
            return len(state.in_flight) if state else 0

    def forget(self, partitions: Sequence[Hashable]) -> None:
        """Drop revoked partitions: their next owner starts from the committed offset."""
        with self._lock:
            for partition in partitions:
                self._partitions.pop(partition, None)
