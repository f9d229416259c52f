"""Refresh requests for MVs another replica owns, published to the partitions owning them.

The consumer thread forwards the MVs of a commit event before the event's offset may be
committed, and `forward` returns only once the broker has every request (or raises
`KafkaError`, which holds the event for a retry): a request is never lost between two
replicas, whichever of them dies. Refresh threads forward the readers of an MV they
refreshed; those are best effort (the owner's next poll would find them stale).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from icemv.config import KafkaConfig
from icemv.events.formats.refresh_request import MAX_MVS, encode_refresh_request
from icemv.events.kafka import acked_producer
from icemv.identifiers import Identifier

log = structlog.get_logger(__name__)


class RefreshForwarder:
    """One producer, created on first use (the broker may be away at start-up); thread-safe."""

    def __init__(
        self, config: KafkaConfig, topic: str, catalog: str, *, timeout_seconds: float = 10.0
    ) -> None:
        self._config = config
        self.topic = topic
        self._catalog = catalog
        self._timeout_seconds = timeout_seconds
        self._producer: Any = None
        self._lock = threading.Lock()

    def forward(self, by_partition: Mapping[int, Sequence[Identifier]], reason: str) -> int:
        """Publish one request per partition (chunks of `MAX_MVS`); the number of records."""
        records = [
            (partition, encode_refresh_request(
                [(mv.namespace, mv.name) for mv in mvs[start : start + MAX_MVS]],
                self._config.group_id,
                reason,
                self._catalog,
            ))
            for partition, mvs in by_partition.items()
            for start in range(0, len(mvs), MAX_MVS)
        ]  # fmt: skip
        if not records:
            return 0
        with self._lock:
            producer = self._connect()
            futures = [
                producer.send(self.topic, value=value, partition=partition)
                for partition, value in records
            ]
            producer.flush(timeout=self._timeout_seconds)
            for future in futures:
                future.get(timeout=self._timeout_seconds)
        log.debug(
            "refresh_requests_forwarded",
            topic=self.topic,
            reason=reason,
            partitions={p: [mv.dotted for mv in mvs] for p, mvs in by_partition.items()},
        )
        return len(records)

    def _connect(self) -> Any:
        if self._producer is None:
            self._producer = acked_producer(self._config, self._timeout_seconds)
        return self._producer

    def close(self) -> None:
        with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(timeout=self._timeout_seconds)
