"""From one Kafka record to the refreshes it calls for; every outcome is counted.

Events are hints: a named table is looked up in the catalog (never pasted into SQL), and
the refresh itself reloads the table's current snapshot, so lost, duplicated or reordered
events cost at most a no-op.

With several replicas, the readers of a table that another replica owns are forwarded to
the partition owning them (`RefreshForwarder`) before the record counts as handled, and a
forwarded `mv-refresh` request is refreshed here: the partition it came in on is ours.

A record that cannot be understood raises `BadEventError`, and a failed catalog look-up
raises what the catalog raised: the consumer decides between dead letter and retry. A hint
is remembered for deduplication only once it was routed, so a retried record is not taken
for its own duplicate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Protocol

import structlog

from icemv.errors import BadEventError, InvalidIdentifierError
from icemv.events.dedup import EventDeduplicator
from icemv.events.hints import EventHint, IgnoredEvent, RefreshRequestHint, ViewChangeHint
from icemv.events.parse import parse_event
from icemv.identifiers import Identifier
from icemv.refresh.result import RefreshResult
from icemv.service.dead_letter import KafkaRecord
from icemv.service.metrics import Metrics
from icemv.service.ownership import Ownership

# Publishes refresh requests by owning partition (RefreshForwarder.forward).
Forward = Callable[[Mapping[int, Sequence[Identifier]], str], object]

log = structlog.get_logger(__name__)


class ReadersIndex(Protocol):
    """Which MVs read a table (`SourceIndex`)."""

    def readers_of(self, table: Identifier) -> frozenset[Identifier]: ...


class EventRouter:
    def __init__(
        self,
        catalog_name: str,
        index: ReadersIndex,
        metrics: Metrics,
        table_exists: Callable[[Identifier], bool],
        request: Callable[[Identifier, str], Future[RefreshResult]],
        on_view_change: Callable[[], None],
        scope: Callable[[str | None, str | None], str | None] | None = None,
        *,
        ownership: Ownership | None = None,
        forward: Forward | None = None,
        group: str | None = None,
        is_mv: Callable[[Identifier], bool] | None = None,
    ) -> None:
        """Without `ownership` (or `forward`) this replica refreshes every reader itself;
        `is_mv(name)` says whether the index holds that MV (requests for others, a dropped
        MV say, are not refreshed: a refresh of nothing would retry forever)."""
        self._catalog_name = catalog_name
        # (catalog, warehouse) of an event -> skip reason; default: the catalog name only.
        self._scope = scope
        self._index = index
        self._metrics = metrics
        self._table_exists = table_exists
        self._request = request
        self._on_view_change = on_view_change
        self._dedup = EventDeduplicator()
        self._ownership = ownership
        self._forward = forward
        self._group = group
        self._is_mv = is_mv

    def handle(self, record: KafkaRecord) -> Sequence[Future[RefreshResult]]:
        """The refreshes `record` asks for; raises `BadEventError` for a record that is bad."""
        hints = parse_event(record.value, record.headers or (), record.key)
        futures: list[Future[RefreshResult]] = []
        for hint in hints:
            futures += self._route(hint, record)
        return futures

    def _route(self, hint: EventHint, record: KafkaRecord) -> list[Future[RefreshResult]]:
        if isinstance(hint, IgnoredEvent):
            self._metrics.record_event(hint.format, "ignored")
            return []
        if self._dedup.known(hint):
            self._dedup.remember(hint)  # most recently used
            self._metrics.record_event(hint.format, "duplicate")
            return []
        if isinstance(hint, RefreshRequestHint):
            return self._requested(hint)
        if isinstance(hint, ViewChangeHint):
            self._on_view_change()
            self._dedup.remember(hint)
            self._metrics.record_event(hint.format, "view-change")
            return []
        if self._scope is not None:
            skip = self._scope(hint.catalog, hint.warehouse)
        else:
            skip = "other-catalog" if hint.catalog not in (None, self._catalog_name) else None
        if skip is not None:
            self._dedup.remember(hint)
            self._metrics.record_event(hint.format, skip)
            return []
        try:
            table = Identifier(tuple(hint.namespace), hint.name)
        except InvalidIdentifierError as exc:
            raise BadEventError("bad-identifier", str(exc)) from None
        readers = self._index.readers_of(table)
        if not readers:
            outcome = "no-dependents" if self._table_exists(table) else "unknown-table"
            self._dedup.remember(hint)
            self._metrics.record_event(hint.format, outcome)
            if outcome == "unknown-table":
                log.info(
                    "event_unknown_table",
                    table=table.dotted,
                    topic=record.topic,
                    partition=record.partition,
                    offset=record.offset,
                )
            return []
        mine = sorted(readers)
        if self._ownership is not None and self._forward is not None:
            split = self._ownership.split(mine)
            if split.elsewhere:  # first: if the broker fails, nothing was requested yet
                self._forward(split.elsewhere, "event")
                self._metrics.record_forwarded(sum(len(m) for m in split.elsewhere.values()))
            mine = list(split.mine)
        futures = [self._request(mv, "event") for mv in mine]
        self._dedup.remember(hint)
        self._metrics.record_event(hint.format, "routed")
        return futures

    def _requested(self, hint: RefreshRequestHint) -> list[Future[RefreshResult]]:
        """Another replica's request: refresh the MVs here (our partition owns them)."""
        if hint.group != self._group:
            self._metrics.record_event(hint.format, "other-group")
            return []
        if hint.catalog not in (None, self._catalog_name):
            self._metrics.record_event(hint.format, "other-catalog")
            return []
        try:
            mvs = [Identifier(namespace, name) for namespace, name in hint.mvs]
        except InvalidIdentifierError as exc:
            raise BadEventError("bad-identifier", str(exc)) from None
        is_mv = self._is_mv
        if is_mv is not None and not all(is_mv(mv) for mv in mvs):
            self._on_view_change()  # created after this replica's index was built?
            mvs = [mv for mv in mvs if is_mv(mv)]
        self._metrics.record_event(hint.format, "requested" if mvs else "unknown-mv")
        return [self._request(mv, hint.reason) for mv in mvs]
