"""Consume catalog commit events as a consumer group, committing offsets only when done.

An event is done when every refresh it led to has committed or was found unnecessary
(`OffsetTracker`). A record whose handling fails is sorted into one of two kinds:

- retryable (the catalog database or a broker is unreachable): its offset is held, its
  partition paused and read again from that record after a back-off;
- poison (anything else: a bad event, a name no catalog holds, a handler bug): it is counted,
  logged once, copied to the dead-letter topic when one is configured, and its offset is
  committed like a done event's, so one record can never wedge its partition.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import structlog

from icemv.config import KafkaConfig
from icemv.errors import BadEventError
from icemv.events.kafka import kafka_client_kwargs
from icemv.service.dead_letter import DeadLetterPublisher, KafkaRecord
from icemv.service.offsets import OffsetTracker

log = structlog.get_logger(__name__)

# How many unfinished events a partition may hold before it is paused.
MAX_IN_FLIGHT = 10_000
# Back-off of a partition whose record hit a retryable failure: doubles up to the maximum.
RETRY_INITIAL_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0
# Heartbeats every second (at most a third of the session timeout); a coordinator that has
# answered none for this long counts as gone (see `kafka_connected`).
HEARTBEAT_INTERVAL_MS = 1000
HEARTBEAT_SILENCE_SECONDS = 5.0
# The reason code of a record whose handler raised something other than BadEventError.
HANDLER_ERROR = "handler-error"

# OSErrors that say a peer is unreachable (others, like a missing file, are not transient).
_UNREACHABLE = frozenset(
    {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EHOSTDOWN, errno.ETIMEDOUT}
)

RecordHandler = Callable[[Any], Sequence[Future[Any]]]
# The partitions this member holds now, as (topic, partition), and each topic's count.
AssignmentListener = Callable[[Sequence[tuple[str, int]], Mapping[str, int]], None]


def retryable(error: BaseException) -> bool:
    """Whether a failure may go away by itself (a peer unreachable), so the record is held.

    Everything else is taken to be about the record itself (or about state no retry changes,
    such as a table's missing metadata file): retrying it would fail forever.
    """
    import sqlalchemy.exc
    from kafka.errors import KafkaError

    transient: tuple[type[BaseException], ...] = (
        ConnectionError,  # refused, reset, aborted, broken pipe
        TimeoutError,
        socket.gaierror,  # DNS
        KafkaError,  # the dead-letter topic not reachable
        # The catalog database (SQLAlchemy wraps the driver's errors).
        sqlalchemy.exc.OperationalError,
        sqlalchemy.exc.InterfaceError,
        sqlalchemy.exc.DisconnectionError,
        sqlalchemy.exc.TimeoutError,
    )
    if isinstance(error, transient):
        return True
    return isinstance(error, OSError) and error.errno in _UNREACHABLE


class _Retry(Exception):
    """Internal: the record must be read again later."""


class EventConsumer:
    """The consumer thread: poll, hand each record to `handle`, commit what is done."""

    def __init__(
        self,
        config: KafkaConfig,
        handle: RecordHandler,
        on_lag: Callable[[str, int, int], None] | None = None,
        on_connected: Callable[[bool], None] | None = None,
        on_rejected: Callable[[str, bool], None] | None = None,
        on_assigned: AssignmentListener | None = None,
    ) -> None:
        """`on_rejected(reason, dead_lettered)` is called once per poison record;
        `on_assigned` after every rebalance, and with nothing when the member leaves."""
        self._config = config
        self._handle = handle
        self._on_lag = on_lag
        self._on_connected = on_connected
        self._on_rejected = on_rejected
        self._on_assigned = on_assigned
        self._tracker = OffsetTracker()
        self._dead_letters = (
            DeadLetterPublisher(config, config.dead_letter_topic)
            if config.dead_letter_topic
            else None
        )
        self._backoff: dict[Hashable, tuple[float, float]] = {}  # partition: (until, delay)
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
        try:
            while not self._stop.is_set():
                try:
                    self._consume()
                except Exception as exc:  # noqa: BLE001 (broker gone at start-up, bad credentials, ...)
                    self._set_connected(False)
                    log.warning("kafka_consumer_error", error=f"{type(exc).__name__}: {exc}")
                    self._stop.wait(5.0)
        finally:
            if self._dead_letters is not None:
                self._dead_letters.close()

    def _consume(self) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener

        tracker = self._tracker
        backoff = self._backoff
        consumer_ref: list[Any] = []
        announce = self._announce

        class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                if consumer_ref:
                    _commit(consumer_ref[0], tracker.advance())
                tracker.forget(list(revoked))
                for partition in revoked:
                    backoff.pop(partition, None)
                announce(None, ())

            def on_partitions_assigned(self, assigned: Any) -> None:
                log.info(
                    "kafka_partitions_assigned",
                    partitions=[f"{p.topic}:{p.partition}" for p in assigned],
                )
                announce(consumer_ref[0] if consumer_ref else None, assigned)

        consumer = KafkaConsumer(
            group_id=self._config.group_id,
            enable_auto_commit=False,
            auto_offset_reset=self._config.auto_offset_reset,
            session_timeout_ms=self._config.session_timeout_ms,
            max_poll_interval_ms=self._config.max_poll_interval_ms,
            heartbeat_interval_ms=min(HEARTBEAT_INTERVAL_MS, self._config.session_timeout_ms // 3),
            **kafka_client_kwargs(self._config),
        )
        consumer_ref.append(consumer)
        self._consumer = consumer
        consumer.subscribe(self._config.topics, listener=_Rebalance())
        try:
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=500, max_records=500)
                self._set_connected(kafka_connected(consumer))
                for partition, records in batches.items():
                    self._take(consumer, partition, records)
                    if tracker.pending(partition) > MAX_IN_FLIGHT:
                        consumer.pause(partition)
                _commit(consumer, tracker.advance())
                self._resume(consumer)
                self._report_lag(consumer)
        finally:
            _commit(consumer, tracker.advance())
            consumer.close(autocommit=False)
            self._announce(None, ())  # out of the group: its partitions go to others
            self._set_connected(False)

    def _announce(self, consumer: Any, assigned: Any) -> None:
        if self._on_assigned is None:
            return
        counts: dict[str, int] = {}
        for topic in {p.topic for p in assigned}:
            partitions = consumer.partitions_for_topic(topic) if consumer is not None else None
            counts[topic] = len(partitions or ())
        try:
            self._on_assigned([(p.topic, p.partition) for p in assigned], counts)
        except Exception:  # a listener's bug must not break the rebalance
            log.exception("kafka_assignment_listener_failed")

    def _take(self, consumer: Any, partition: Any, records: Sequence[KafkaRecord]) -> None:
        """Hand a partition's records over in order; stop at one that must be retried."""
        for record in records:
            try:
                futures = self._process(record)
            except _Retry:
                consumer.seek(partition, record.offset)  # read it again after the back-off
                consumer.pause(partition)
                _, delay = self._backoff.get(partition, (0.0, RETRY_INITIAL_SECONDS / 2))
                delay = min(RETRY_MAX_SECONDS, delay * 2)
                self._backoff[partition] = (time.monotonic() + delay, delay)
                return
            self._backoff.pop(partition, None)
            self._tracker.add(partition, record.offset, futures)

    def _process(self, record: KafkaRecord) -> Sequence[Future[Any]]:
        """The record's refresh futures; [] for a poison record, which is dealt with here."""
        try:
            return self._handle(record)
        except Exception as exc:
            if retryable(exc):
                self._log_retry(record, exc)
                raise _Retry from exc
            self._reject(record, exc)
            return []

    def _reject(self, record: KafkaRecord, error: Exception) -> None:
        reason = error.reason if isinstance(error, BadEventError) else HANDLER_ERROR
        dead_lettered = False
        if self._dead_letters is not None:
            try:
                self._dead_letters.publish(record, reason, error)
            except Exception as exc:  # the topic will be reachable again: hold the offset
                self._log_retry(record, exc)
                raise _Retry from exc
            dead_lettered = True
        if self._on_rejected is not None:
            self._on_rejected(reason, dead_lettered)
        log.warning(
            "event_rejected",
            reason=reason,
            error=f"{type(error).__name__}: {error}",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            dead_letter_topic=self._dead_letters.topic
            if dead_lettered and self._dead_letters
            else None,
        )

    def _log_retry(self, record: KafkaRecord, error: BaseException) -> None:
        log.warning(
            "event_retry",
            error=f"{type(error).__name__}: {error}",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
        )

    def _resume(self, consumer: Any) -> None:
        """Resume partitions whose back-off is over and whose backlog has drained."""
        now = time.monotonic()
        for partition in list(consumer.paused()):
            until, _ = self._backoff.get(partition, (0.0, 0.0))
            if now >= until and self._tracker.pending(partition) < MAX_IN_FLIGHT // 2:
                consumer.resume(partition)

    def _report_lag(self, consumer: Any) -> None:
        if self._on_lag is None:
            return
        assigned = list(consumer.assignment())
        if not assigned:
            return
        try:
            ends = consumer.end_offsets(assigned)
        except Exception:  # noqa: BLE001 (lag is best effort; the next poll tries again)
            return
        for partition in assigned:
            position = consumer.position(partition)
            self._on_lag(partition.topic, partition.partition, max(0, ends[partition] - position))

    def _set_connected(self, connected: bool) -> None:
        self.connected = connected
        if self._on_connected is not None:
            self._on_connected(connected)


def kafka_connected(consumer: Any) -> bool:
    """Whether the consumer's link to its group coordinator works, right now.

    `poll()` just returns nothing while the broker is away, and kafka-python declares the
    coordinator dead only after a request times out (~30 s; never, for a broker that hangs
    without closing its sockets). So this reads two things: the coordinator socket's state
    (a crashed broker shows at once), and, in a stable group, how long ago a heartbeat was
    last answered (a hung or unreachable broker shows after `HEARTBEAT_SILENCE_SECONDS`).

    The one place icemv reaches into kafka-python internals (3.0.x): `_coordinator`
    (`coordinator_id`, `stable()`, `heartbeat.last_receive` / `last_reset`) and
    `_client.connected(node_id)`. If they move, fall back to the public bootstrap check
    (slower to notice an outage, never wrong about a live one).
    """
    try:
        coordinator = consumer._coordinator  # noqa: SLF001 (fenced here, see docstring)
        node_id = coordinator.coordinator_id
        if node_id is None or not consumer._client.connected(node_id):  # noqa: SLF001
            return False
        if not coordinator.stable():  # joining: no heartbeats yet
            return True
        heartbeat = coordinator.heartbeat
        answered = max(heartbeat.last_receive, heartbeat.last_reset)
        return bool(time.monotonic() - answered < HEARTBEAT_SILENCE_SECONDS)
    except AttributeError:
        return bool(consumer.bootstrap_connected())


def _commit(consumer: Any, offsets: dict[Any, int]) -> None:
    if not offsets:
        return
    from kafka.structs import OffsetAndMetadata

    try:
        consumer.commit({p: OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    except Exception as exc:  # noqa: BLE001 (rebalance in progress: the events will be redelivered, harmless)
        log.warning("kafka_commit_failed", error=f"{type(exc).__name__}: {exc}")
