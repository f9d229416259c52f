"""Full refresh: recompute the view SQL at pinned source snapshots, overwrite the storage."""

from __future__ import annotations

import time

from icemv.catalog.lakehouse import Lakehouse
from icemv.identifiers import Identifier
from icemv.mv.model import MaterializedView
from icemv.refresh.commit.spark_write import (
    REFRESH_ID_KEY,
    commit_properties,
    find_commit,
    overwrite_storage,
)
from icemv.refresh.result import RefreshResult
from icemv.spec.refresh_state import RefreshState, SourceState
from icemv.sql.pinning import pin_sources


def full_refresh(lakehouse: Lakehouse, mv: MaterializedView, reason: str) -> RefreshResult:
    started = time.time()
    started_ms = int(started * 1000)
    storage = lakehouse.load_table(mv.storage)
    planned_from = storage.current_snapshot()
    pinned = pin_sources(lakehouse, mv.sql, mv.version.default_namespace or mv.identifier.namespace)
    state = RefreshState(mv.version.version_id, started_ms, pinned.sources)
    properties = commit_properties(state, {"icemv.mode": "full", "icemv.reason": reason})

    df = lakehouse.spark.sql(pinned.sql)
    # The storage schema was derived from the query: align by position, keep storage names.
    df = df.toDF(*[field.name for field in storage.schema().fields])
    overwrite_storage(
        df,
        lakehouse.quoted(mv.storage),
        planned_from.snapshot_id if planned_from else None,
        properties,
    )
    committed = find_commit(storage.refresh(), properties[REFRESH_ID_KEY])
    summary = committed.summary.additional_properties if committed and committed.summary else {}
    return RefreshResult(
        mv=mv.identifier,
        mode="full",
        reason=reason,
        storage_snapshot_id=committed.snapshot_id if committed else None,
        rows_inserted=int(summary.get("added-records", 0)),
        rows_deleted=int(summary.get("deleted-records", 0)),
        sources=pinned.sources,
        started_ms=started_ms,
        duration_seconds=time.time() - started,
        source_rows_read=_total_records(lakehouse, pinned.sources),
    )


def _total_records(lakehouse: Lakehouse, sources: tuple[SourceState, ...]) -> int:
    total = 0
    for source in sources:
        if source.type != "table" or source.snapshot_id is None:
            continue
        table = lakehouse.load_table(Identifier(source.namespace, source.name))
        snapshot = table.snapshot_by_id(source.snapshot_id)
        if snapshot is not None and snapshot.summary is not None:
            total += int(snapshot.summary.additional_properties.get("total-records", 0))
    return total
