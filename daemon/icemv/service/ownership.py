"""Which replica refreshes which MV: pure bookkeeping, no Kafka calls.

Replicas in one consumer group split the MVs by the partitions of one topic, the
*ownership topic* (the first of `kafka.topics`): MV `m` belongs to the partition
`owner_partition(m, count)`, a stable hash of its name (not Python's salted `hash()`), and
the replica holding that partition owns `m`. The group coordinator hands partitions out and
moves them when a replica leaves or dies, so ownership moves with them: the assignment is
the lease. Refresh requests for an MV another replica owns are published to its partition
(`RefreshRequestHint`), so whichever replica holds that partition then, even one that took
it over from a dead one, gets them.

Without Kafka one replica owns everything. With Kafka, a replica that has been cut off from
its broker for longer than the fallback (the group's session timeout) owns everything
too: its partitions have been handed to others or nobody holds any, and refreshing an MV
twice is safe (the storage commit is a compare-and-swap), while not refreshing it is not.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from icemv.identifiers import Identifier


def owner_partition(mv: Identifier, partitions: int) -> int:
    """The partition (of `partitions`) that owns `mv`: the same on every replica and run."""
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    key = "\x00".join(mv.as_tuple()).encode("utf-8")
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


@dataclass(frozen=True)
class Split:
    """MVs this replica refreshes itself, and the others by the partition that owns them."""

    mine: tuple[Identifier, ...]
    elsewhere: dict[int, tuple[Identifier, ...]]


class Ownership:
    """This replica's share of the MVs; thread-safe (the consumer thread updates it, poll and
    refresh threads ask).

    `Ownership.everything()` is poll-only mode. Otherwise it starts owning nothing (not
    joined yet) and follows `assign` / `revoke`; `connected(False)` for longer than
    `fallback_seconds` (a broker unreachable since start-up, or lost) makes it own
    everything until it is connected again or assigned partitions.
    """

    def __init__(
        self,
        topic: str | None,
        fallback_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topic = topic
        self._fallback_seconds = fallback_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._partitions: frozenset[int] = frozenset()
        self._count = 0
        # Since when the consumer reports its broker unreachable (None: reachable or unknown).
        self._offline_since: float | None = None

    @classmethod
    def everything(cls) -> Ownership:
        return cls(None)

    def assign(self, partitions: Iterable[int], count: int) -> None:
        """This replica now holds `partitions` of the ownership topic's `count`."""
        with self._lock:
            self._partitions = frozenset(partitions)
            self._count = count
            self._offline_since = None

    def revoke(self) -> None:
        """A rebalance took the partitions away (new ones follow with `assign`)."""
        with self._lock:
            self._partitions = frozenset()

    def connected(self, connected: bool) -> None:
        """The consumer's link to its group: lost since when, if lost."""
        if self.topic is None:
            return
        with self._lock:
            if connected:
                self._offline_since = None
            elif self._offline_since is None:
                self._offline_since = self._clock()

    def owns_everything(self) -> bool:
        with self._lock:
            return self._owns_everything()

    def _owns_everything(self) -> bool:
        if self.topic is None:
            return True
        since = self._offline_since
        return since is not None and self._clock() - since >= self._fallback_seconds

    def known(self) -> bool:
        """Whether `owns` answers from an assignment (or from owning everything) rather
        than from not knowing yet."""
        with self._lock:
            return self._owns_everything() or self._count > 0

    def owns(self, mv: Identifier) -> bool:
        with self._lock:
            if self._owns_everything():
                return True
            return self._count > 0 and owner_partition(mv, self._count) in self._partitions

    def split(self, mvs: Iterable[Identifier]) -> Split:
        """`mvs` by owner; everything is mine while no partition count is known."""
        with self._lock:
            if self._owns_everything() or self._count == 0:
                return Split(tuple(mvs), {})
            mine: list[Identifier] = []
            elsewhere: dict[int, list[Identifier]] = {}
            for mv in mvs:
                partition = owner_partition(mv, self._count)
                if partition in self._partitions:
                    mine.append(mv)
                else:
                    elsewhere.setdefault(partition, []).append(mv)
            return Split(tuple(mine), {p: tuple(m) for p, m in sorted(elsewhere.items())})
