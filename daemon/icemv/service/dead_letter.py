"""The dead-letter topic: records the daemon gave up on, kept verbatim with the reason why.

A record goes here when handling it failed for a reason no retry can fix (not JSON, a name
no catalog can hold, a handler bug). Its key, value and headers are copied unchanged, and
`icemv-dead-letter-*` headers say where it came from and why, so an operator can inspect
or replay it. `publish` returns only once the broker has the record: the caller commits
the original offset after that, never before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from icemv.config import KafkaConfig
from icemv.events.kafka import acked_producer

log = structlog.get_logger(__name__)

HEADER_PREFIX = "icemv-dead-letter-"
# Bound the detail header: it is for a human, and a record must stay well under size limits.
MAX_DETAIL_BYTES = 1000
# A producer's own limit is 1 MB by default; dead letters carry the original record, so more.
MAX_REQUEST_BYTES = 16 * 1024 * 1024


class KafkaRecord(Protocol):
    """The parts of kafka-python's `ConsumerRecord` that icemv reads."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]] | None: ...


def dead_letter_headers(
    record: KafkaRecord, reason: str, error: BaseException
) -> list[tuple[str, bytes]]:
    """The original headers, then where the record came from and why it was given up."""
    detail = f"{type(error).__name__}: {error}".encode("utf-8", errors="replace")
    headers = [(name, value or b"") for name, value in record.headers or ()]
    headers += [
        (HEADER_PREFIX + "reason", reason.encode()),
        (HEADER_PREFIX + "error", type(error).__name__.encode()),
        (HEADER_PREFIX + "detail", detail[:MAX_DETAIL_BYTES]),
        (HEADER_PREFIX + "topic", record.topic.encode("utf-8", errors="replace")),
        (HEADER_PREFIX + "partition", str(record.partition).encode()),
        (HEADER_PREFIX + "offset", str(record.offset).encode()),
    ]
    return headers


class DeadLetterPublisher:
    """A producer for the dead-letter topic, created on first use (the broker may be away at
    start-up). Not thread-safe: the consumer thread owns it."""

    def __init__(self, config: KafkaConfig, topic: str, *, timeout_seconds: float = 10.0) -> None:
        self._config = config
        self.topic = topic
        self._timeout_seconds = timeout_seconds
        self._producer: Any = None

    def publish(self, record: KafkaRecord, reason: str, error: BaseException) -> None:
        """Send the dead letter and wait for the broker; raises KafkaError if it did not take it.

        A record too big for the broker is sent without its value (a header says how big it
        was) rather than blocking its partition forever.
        """
        from kafka.errors import MessageSizeTooLargeError

        headers = dead_letter_headers(record, reason, error)
        try:
            self._send(record.key, record.value, headers)
        except MessageSizeTooLargeError:
            size = str(len(record.value or b"")).encode()
            self._send(record.key, None, [*headers, (HEADER_PREFIX + "value-dropped", size)])

    def _send(
        self, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]
    ) -> None:
        producer = self._connect()
        future = producer.send(self.topic, key=key, value=value, headers=headers)
        producer.flush(timeout=self._timeout_seconds)
        future.get(timeout=self._timeout_seconds)

    def _connect(self) -> Any:
        if self._producer is None:
            self._producer = acked_producer(
                self._config, self._timeout_seconds, max_request_size=MAX_REQUEST_BYTES
            )
        return self._producer

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(timeout=self._timeout_seconds)
