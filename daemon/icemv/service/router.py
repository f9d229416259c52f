"""From one Kafka record to the refreshes it calls for; every skip is counted and logged.

Events are hints: a named table is looked up in the catalog (never pasted into SQL), and
the refresh itself reloads the table's current snapshot, so lost, duplicated or reordered
events cost at most a no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import structlog

from icemv.errors import BadEventError, InvalidIdentifierError
from icemv.events.parse import (
    EventDeduplicator,
    IgnoredEvent,
    TableCommitHint,
    ViewChangeHint,
    parse_event,
)
from icemv.identifiers import Identifier
from icemv.refresh.result import RefreshResult
from icemv.service.metrics import Metrics
from icemv.service.source_index import SourceIndex

log = structlog.get_logger(__name__)


class EventRouter:
    def __init__(
        self,
        catalog_name: str,
        index: SourceIndex,
        metrics: Metrics,
        table_exists: Callable[[Identifier], bool],
        request: Callable[[Identifier, str], Future[RefreshResult]],
        on_view_change: Callable[[], None],
        scope: Callable[[str | None, str | None], str | None] | None = None,
    ) -> None:
        self._catalog_name = catalog_name
        # (catalog, warehouse) of an event -> skip reason; default: the catalog name only.
        self._scope = scope
        self._index = index
        self._metrics = metrics
        self._table_exists = table_exists
        self._request = request
        self._on_view_change = on_view_change
        self._dedup = EventDeduplicator()

    def handle(self, record: Any) -> Sequence[Future[RefreshResult]]:
        where = {"topic": record.topic, "partition": record.partition, "offset": record.offset}
        try:
            hints = parse_event(record.value, record.headers or (), record.key)
        except BadEventError as exc:
            self._metrics.record_event("unknown", exc.reason)
            log.warning("event_skipped", reason=exc.reason, detail=str(exc)[:200], **where)
            return []
        futures: list[Future[RefreshResult]] = []
        for hint in hints:
            futures += self._route(hint, where)
        return futures

    def _route(self, hint: Any, where: dict[str, Any]) -> list[Future[RefreshResult]]:
        if isinstance(hint, IgnoredEvent):
            self._metrics.record_event(hint.format, "ignored")
            return []
        if self._dedup.seen(hint):
            self._metrics.record_event(hint.format, "duplicate")
            return []
        if isinstance(hint, ViewChangeHint):
            self._on_view_change()
            self._metrics.record_event(hint.format, "view-change")
            return []
        assert isinstance(hint, TableCommitHint)
        if self._scope is not None:
            skip = self._scope(hint.catalog, hint.warehouse)
        else:
            skip = "other-catalog" if hint.catalog not in (None, self._catalog_name) else None
        if skip is not None:
            self._metrics.record_event(hint.format, skip)
            return []
        try:
            table = Identifier(tuple(hint.namespace), hint.name)
        except InvalidIdentifierError:
            self._metrics.record_event(hint.format, "bad-field")
            return []
        readers = self._index.readers_of(table)
        if not readers:
            outcome = "no-dependents" if self._table_exists(table) else "unknown-table"
            self._metrics.record_event(hint.format, outcome)
            if outcome == "unknown-table":
                log.info("event_unknown_table", table=table.dotted, **where)
            return []
        self._metrics.record_event(hint.format, "routed")
        return [self._request(mv, "event") for mv in sorted(readers)]
