"""Publishes icemv's own table-commit events to Kafka.

Events are hints that consumers deduplicate, so the producer favours getting a record out
over exactly-once: no idempotence (its producer ids do not survive a broker that loses
state), unbounded retries within `timeout_seconds`, and a flush per event so a returned
`publish` means the broker has it.
"""

from __future__ import annotations

from types import TracebackType

import structlog

from icemv.config import KafkaConfig
from icemv.events.formats.icemv import IcemvCommitEvent
from icemv.events.kafka import acked_producer

log = structlog.get_logger(__name__)


class CommitEventPublisher:
    """One KafkaProducer that sends icemv table-commit events to one topic."""

    def __init__(self, config: KafkaConfig, topic: str, *, timeout_seconds: float = 30.0) -> None:
        self._topic = topic
        self._timeout_seconds = timeout_seconds
        self._producer = acked_producer(config, timeout_seconds)
        log.info(
            "commit_event_publisher_started",
            topic=topic,
            bootstrap_servers=config.bootstrap_servers,
            security_protocol=config.security_protocol,
        )

    def publish(self, event: IcemvCommitEvent) -> None:
        """Send one event and wait until the broker acknowledged it (raises KafkaError if not)."""
        key, value = event.encode()
        future = self._producer.send(self._topic, value=value, key=key)
        self._producer.flush(timeout=self._timeout_seconds)
        metadata = future.get(timeout=self._timeout_seconds)
        log.debug(
            "commit_event_published",
            topic=self._topic,
            key=key.decode("utf-8"),
            snapshot_id=event.snapshot_id,
            partition=metadata.partition,
            offset=metadata.offset,
        )

    def close(self) -> None:
        self._producer.close(timeout=self._timeout_seconds)

    def __enter__(self) -> CommitEventPublisher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CommitEventPublisher(topic={self._topic!r})"


def publish_commit_event(
    producer_config: KafkaConfig,
    topic: str,
    event: IcemvCommitEvent,
    *,
    timeout_seconds: float = 30.0,
) -> None:
    """Publish one event with a short-lived producer (for the CLI and tests; the daemon keeps
    a `CommitEventPublisher`)."""
    with CommitEventPublisher(producer_config, topic, timeout_seconds=timeout_seconds) as publisher:
        publisher.publish(event)
