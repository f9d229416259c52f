"""Consume catalog commit events as a consumer group, committing offsets only when done.

An event is done when every refresh it led to has committed or was found unnecessary.
Per partition, the committed offset is the end of the longest run of done events, so a
slow or failing MV holds back only the offsets behind it, never other MVs' refreshes,
and after a crash every unfinished event is delivered again (refreshes are idempotent).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import structlog

from icemv.config import KafkaConfig
from icemv.events.publisher import kafka_client_kwargs

log = structlog.get_logger(__name__)

# How many unfinished events a partition may hold before it is paused.
MAX_IN_FLIGHT = 10_000


@dataclass
class _Partition:
    in_flight: deque[tuple[int, list[Future[Any]]]] = field(default_factory=deque)
    committable: int | None = None  # next offset to commit (last done + 1)


class OffsetTracker:
    """Which offsets may be committed; pure bookkeeping, no Kafka calls."""

    def __init__(self) -> None:
        self._partitions: dict[Any, _Partition] = {}
        self._lock = threading.Lock()

    def add(self, partition: Any, offset: int, futures: Sequence[Future[Any]]) -> None:
        with self._lock:
            self._partitions.setdefault(partition, _Partition()).in_flight.append(
                (offset, list(futures))
            )

    def advance(self) -> dict[Any, int]:
        """Offsets to commit now (next offset to read), for partitions that moved."""
        moved: dict[Any, int] = {}
        with self._lock:
            for partition, state in self._partitions.items():
                before = state.committable
                while state.in_flight and all(f.done() for f in state.in_flight[0][1]):
                    offset, _ = state.in_flight.popleft()
                    state.committable = offset + 1
                if state.committable is not None and state.committable != before:
                    moved[partition] = state.committable
        return moved

    def pending(self, partition: Any) -> int:
        with self._lock:
            state = self._partitions.get(partition)
            return len(state.in_flight) if state else 0

    def forget(self, partitions: Sequence[Any]) -> None:
        with self._lock:
            for partition in partitions:
                self._partitions.pop(partition, None)


RecordHandler = Callable[[Any], Sequence[Future[Any]]]


class EventConsumer:
    """The consumer thread: poll, hand each record to `handle`, commit what is done."""

    def __init__(
        self,
        config: KafkaConfig,
        handle: RecordHandler,
        on_lag: Callable[[str, int, int], None] | None = None,
        on_connected: Callable[[bool], None] | None = None,
    ) -> None:
        self._config = config
        self._handle = handle
        self._on_lag = on_lag
        self._on_connected = on_connected
        self._tracker = OffsetTracker()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Any = None
        self.connected = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="icemv-kafka", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop intake; the thread commits what is done and leaves the group."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def assigned(self) -> bool:
        """Whether this member owns partitions (it has joined its group)."""
        consumer = self._consumer
        return consumer is not None and bool(consumer.assignment())

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._consume()
            except Exception as exc:  # broker gone at start-up, bad credentials, ...
                self._set_connected(False)
                log.warning("kafka_consumer_error", error=f"{type(exc).__name__}: {exc}")
                self._stop.wait(5.0)

    def _consume(self) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener

        tracker = self._tracker
        consumer_ref: list[Any] = []

        class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                if consumer_ref:
                    _commit(consumer_ref[0], tracker.advance())
                tracker.forget(list(revoked))

            def on_partitions_assigned(self, assigned: Any) -> None:
                log.info(
                    "kafka_partitions_assigned",
                    partitions=[f"{p.topic}:{p.partition}" for p in assigned],
                )

        consumer = KafkaConsumer(
            group_id=self._config.group_id,
            enable_auto_commit=False,
            auto_offset_reset=self._config.auto_offset_reset,
            session_timeout_ms=self._config.session_timeout_ms,
            max_poll_interval_ms=self._config.max_poll_interval_ms,
            **kafka_client_kwargs(self._config),
        )
        consumer_ref.append(consumer)
        self._consumer = consumer
        consumer.subscribe(self._config.topics, listener=_Rebalance())
        try:
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=500, max_records=500)
                self._set_connected(_group_coordinator_alive(consumer))
                for partition, records in batches.items():
                    for record in records:
                        tracker.add(partition, record.offset, self._handle(record))
                    if tracker.pending(partition) > MAX_IN_FLIGHT:
                        consumer.pause(partition)
                _commit(consumer, tracker.advance())
                self._resume_drained(consumer)
                self._report_lag(consumer)
        finally:
            _commit(consumer, tracker.advance())
            consumer.close(autocommit=False)
            self._set_connected(False)

    def _resume_drained(self, consumer: Any) -> None:
        for partition in list(consumer.paused()):
            if self._tracker.pending(partition) < MAX_IN_FLIGHT // 2:
                consumer.resume(partition)

    def _report_lag(self, consumer: Any) -> None:
        if self._on_lag is None:
            return
        assigned = list(consumer.assignment())
        if not assigned:
            return
        try:
            ends = consumer.end_offsets(assigned)
        except Exception:  # lag is best effort; the next poll tries again
            return
        for partition in assigned:
            position = consumer.position(partition)
            self._on_lag(partition.topic, partition.partition, max(0, ends[partition] - position))

    def _set_connected(self, connected: bool) -> None:
        self.connected = connected
        if self._on_connected is not None:
            self._on_connected(connected)


def _group_coordinator_alive(consumer: Any) -> bool:
    """Connected to the group coordinator (poll() itself just returns nothing when not)."""
    coordinator = getattr(consumer, "_coordinator", None)
    if coordinator is None:  # kafka-python internals moved: fall back to the bootstrap link
        return bool(consumer.bootstrap_connected())
    return not coordinator.coordinator_unknown()


def _commit(consumer: Any, offsets: dict[Any, int]) -> None:
    if not offsets:
        return
    from kafka.structs import OffsetAndMetadata

    try:
        consumer.commit({p: OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    except Exception as exc:  # rebalance in progress: the events will be redelivered, harmless
        log.warning("kafka_commit_failed", error=f"{type(exc).__name__}: {exc}")
