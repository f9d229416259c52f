"""The refresh record a storage commit carries, and finding that commit again.

Every refresh commits exactly one storage snapshot whose summary holds `refresh-state`
(the spec's record) plus icemv's own keys (`format/summary.py`). A fresh `icemv.refresh-id`
per refresh lets the refresh find the snapshot it committed, whichever path wrote it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

import structlog
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot, ancestors_of

from icemv.format.refresh_state import REFRESH_STATE_KEY, RefreshState, encode_refresh_state
from icemv.format.summary import (
    ADDED_POSITION_DELETES,
    ADDED_RECORDS,
    DELETED_RECORDS,
    RefreshMode,
    SummaryKey,
    summary_of,
)
from icemv.identifiers import Identifier
from icemv.mv.history import RefreshRecord, commit_to_fresh_seconds, record_of
from icemv.refresh.phases import PhaseClock
from icemv.refresh.result import RefreshResult

if TYPE_CHECKING:
    from icemv.refresh.plan import RefreshPlan

REFRESH_ID_KEY = SummaryKey.REFRESH_ID.value

log = structlog.get_logger(__name__)


def commit_properties(state: RefreshState, details: Mapping[str, str]) -> dict[str, str]:
    """The summary properties of a refresh's commit: the record, a fresh id, `details`."""
    return {
        REFRESH_STATE_KEY: encode_refresh_state(state),
        REFRESH_ID_KEY: str(uuid.uuid4()),
        **{str(key): str(value) for key, value in details.items()},
    }


def find_commit(storage: Table, refresh_id: str) -> Snapshot | None:
    """The snapshot a refresh committed, by the id it wrote into the summary."""
    for snapshot in ancestors_of(storage.current_snapshot(), storage.metadata):
        if summary_of(snapshot).get(REFRESH_ID_KEY) == refresh_id:
            return snapshot
    return None


def result_of_commit(
    plan: RefreshPlan,
    mode: RefreshMode,
    reason: str,
    properties: Mapping[str, str],
    rows_inserted: int | None,
    rows_deleted: int | None,
    source_rows_read: int | None,
    phases: PhaseClock | None = None,
) -> RefreshResult:
    """The result of a refresh that committed `properties`: counts not known up front are
    read from Iceberg's summary of that commit."""
    refresh_id = properties[REFRESH_ID_KEY]
    # A driver commit left its metadata on the handle (pyiceberg updates the table it
    # committed through); a Spark commit did not: then the table is reloaded.
    storage = plan.storage
    committed = find_commit(storage, refresh_id)
    if committed is None:
        storage = storage.refresh()
        committed = find_commit(storage, refresh_id)
    summary = summary_of(committed)
    if rows_inserted is None:
        rows_inserted = int(summary.get(ADDED_RECORDS, 0))
    if rows_deleted is None:  # an overwrite deletes whole files, a MERGE may write positions
        rows_deleted = int(summary.get(ADDED_POSITION_DELETES, 0)) + int(
            summary.get(DELETED_RECORDS, 0)
        )
    record = record_of(committed) if committed is not None else None
    latencies = _latencies(plan, storage, record) if record is not None else ()
    if phases is not None:
        phases.end("record")
    return RefreshResult(
        mv=plan.mv.identifier,
        mode=mode,
        reason=reason,
        storage_snapshot_id=committed.snapshot_id if committed else None,
        rows_inserted=rows_inserted,
        rows_deleted=rows_deleted,
        sources=plan.pinned.sources,
        started_ms=plan.started_ms,
        duration_seconds=time.time() - plan.started_ms / 1000,
        source_rows_read=source_rows_read,
        phase_seconds=dict(phases.seconds) if phases else {},
        phase_cpu_seconds=dict(phases.cpu_seconds) if phases else {},
        phase_spans=dict(phases.spans) if phases else {},
        record=record,
        commit_to_fresh_seconds=latencies,
        storage_snapshots=len(storage.metadata.snapshots) if committed else None,
    )


def _latencies(plan: RefreshPlan, storage: Table, record: RefreshRecord) -> tuple[float, ...]:
    """Seconds from each absorbed source commit to `record`'s, from the sources as this
    refresh loaded them (at or past the snapshots it pinned); none if a source cannot be
    loaded (a metric: best effort)."""
    try:
        sources = {
            source.dotted: plan.reads.load_table(Identifier(source.namespace, source.name))
            for source in record.state.tables()
        }
        return tuple(commit_to_fresh_seconds(storage, record, sources))
    except Exception as exc:  # noqa: BLE001 (a metric must not fail a committed refresh)
        log.debug("latency_unavailable", mv=plan.mv.identifier.dotted, error=str(exc)[:200])
        return ()
