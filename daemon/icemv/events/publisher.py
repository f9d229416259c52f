"""Publishes icemv's own table-commit events to Kafka, and the client settings shared with the
consumer.

Events are hints that consumers deduplicate, so the producer favours getting a record out
over exactly-once: no idempotence (its producer ids do not survive a broker that loses
state), unbounded retries within `timeout_seconds`, and a flush per event so a returned
`publish` means the broker has it.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

import structlog
from kafka import KafkaProducer

from icemv.config import KafkaConfig
from icemv.events.parse import encode_icemv_event

log = structlog.get_logger(__name__)


def kafka_client_kwargs(config: KafkaConfig) -> dict[str, Any]:
    """kafka-python keyword arguments for connection and security, for producers and consumers.

    The result holds the SASL password in clear text: pass it to the client, never log it.
    """
    if not config.bootstrap_servers:
        raise ValueError("kafka.bootstrap_servers is empty")
    kwargs: dict[str, Any] = {
        "bootstrap_servers": list(config.bootstrap_servers),
        "security_protocol": config.security_protocol,
    }
    optional = {
        "sasl_mechanism": config.sasl_mechanism,
        "sasl_plain_username": config.sasl_username,
        "sasl_plain_password": (
            config.sasl_password.get_secret_value() if config.sasl_password else None
        ),
        "ssl_cafile": config.ssl_cafile,
        "ssl_certfile": config.ssl_certfile,
        "ssl_keyfile": config.ssl_keyfile,
    }
    kwargs.update({name: value for name, value in optional.items() if value is not None})
    return kwargs


class CommitEventPublisher:
    """One KafkaProducer that sends icemv table-commit events to one topic."""

    def __init__(self, config: KafkaConfig, topic: str, *, timeout_seconds: float = 30.0) -> None:
        self._topic = topic
        self._timeout_seconds = timeout_seconds
        timeout_ms = int(timeout_seconds * 1000)
        self._producer = KafkaProducer(
            **kafka_client_kwargs(config),
            acks="all",
            enable_idempotence=False,
            bootstrap_timeout_ms=timeout_ms,
            max_block_ms=timeout_ms,
            request_timeout_ms=timeout_ms,
            delivery_timeout_ms=timeout_ms,
            linger_ms=0,
        )
        log.info(
            "commit event publisher started",
            topic=topic,
            bootstrap_servers=config.bootstrap_servers,
            security_protocol=config.security_protocol,
        )

    def publish(
        self,
        namespace: str | Sequence[str],
        name: str,
        *,
        catalog: str | None = None,
        table_uuid: str | None = None,
        snapshot_id: int | None = None,
        parent_snapshot_id: int | None = None,
        sequence_number: int | None = None,
        operation: str | None = None,
        timestamp_ms: int | None = None,
        metadata_location: str | None = None,
    ) -> None:
        """Send one event and wait until the broker acknowledged it (raises KafkaError if not)."""
        key, value = encode_icemv_event(
            namespace,
            name,
            catalog=catalog,
            table_uuid=table_uuid,
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent_snapshot_id,
            sequence_number=sequence_number,
            operation=operation,
            timestamp_ms=timestamp_ms,
            metadata_location=metadata_location,
        )
        future = self._producer.send(self._topic, value=value, key=key)
        self._producer.flush(timeout=self._timeout_seconds)
        metadata = future.get(timeout=self._timeout_seconds)
        log.debug(
            "commit event published",
            topic=self._topic,
            key=key.decode("utf-8"),
            snapshot_id=snapshot_id,
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
    namespace: str | Sequence[str],
    name: str,
    *,
    catalog: str | None = None,
    table_uuid: str | None = None,
    snapshot_id: int | None = None,
    parent_snapshot_id: int | None = None,
    sequence_number: int | None = None,
    operation: str | None = None,
    timestamp_ms: int | None = None,
    metadata_location: str | None = None,
    timeout_seconds: float = 30.0,
) -> None:
    """Publish one event with a short-lived producer (for the CLI and tests; the daemon keeps
    a `CommitEventPublisher`)."""
    with CommitEventPublisher(producer_config, topic, timeout_seconds=timeout_seconds) as publisher:
        publisher.publish(
            namespace,
            name,
            catalog=catalog,
            table_uuid=table_uuid,
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent_snapshot_id,
            sequence_number=sequence_number,
            operation=operation,
            timestamp_ms=timestamp_ms,
            metadata_location=metadata_location,
        )
