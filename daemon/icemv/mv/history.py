"""Refresh records, read back from the storage table's snapshot history.

Only snapshots that carry a refresh record count; maintenance snapshots (compaction,
expiry) after the latest one neither change nor hide it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot, ancestors_of

from icemv.format.refresh_state import RefreshState, refresh_state_from_summary

ICEMV_SUMMARY_PREFIX = "icemv."


@dataclass(frozen=True)
class RefreshRecord:
    snapshot_id: int
    sequence_number: int | None
    timestamp_ms: int
    state: RefreshState
    details: Mapping[str, str]  # the icemv.* summary keys: mode, reason, row counts

    @property
    def mode(self) -> str | None:
        return self.details.get("icemv.mode")


def record_of(snapshot: Snapshot) -> RefreshRecord | None:
    """The refresh record `snapshot` carries, if any."""
    summary = dict(snapshot.summary.additional_properties) if snapshot.summary else {}
    state = refresh_state_from_summary(summary)
    if state is None:
        return None
    return RefreshRecord(
        snapshot_id=snapshot.snapshot_id,
        sequence_number=snapshot.sequence_number,
        timestamp_ms=snapshot.timestamp_ms,
        state=state,
        details={k: v for k, v in summary.items() if k.startswith(ICEMV_SUMMARY_PREFIX)},
    )


def refresh_history(storage: Table) -> list[RefreshRecord]:
    """Refresh records on the current branch, newest first."""
    records = (record_of(s) for s in ancestors_of(storage.current_snapshot(), storage.metadata))
    return [record for record in records if record is not None]


def latest_refresh(storage: Table) -> RefreshRecord | None:
    for snapshot in ancestors_of(storage.current_snapshot(), storage.metadata):
        record = record_of(snapshot)
        if record is not None:
            return record
    return None


def history_as_6420(history: list[RefreshRecord], catalog_name: str) -> dict[str, Any]:
    """The history in the shape of the #6420 proposal's `refreshes` list (oldest first)."""
    refreshes = []
    for record in reversed(history):
        base_tables = {
            source.dotted: {
                "type": "iceberg-metastore",
                "identifier": f"{source.catalog or catalog_name}.{source.dotted}",
                "snapshot-reference": source.snapshot_id,
            }
            for source in record.state.tables()
        }
        refreshes.append(
            {
                "refresh-id": record.snapshot_id,
                "version-id": record.state.view_version_id,
                "sequence-number": record.sequence_number,
                "timestamp-ms": record.timestamp_ms,
                "base-tables": base_tables,
            }
        )
    return {
        "current-refresh-id": history[0].snapshot_id if history else None,
        "refreshes": refreshes,
    }


def commit_to_fresh_seconds(
    storage: Table, record: RefreshRecord, sources: Mapping[str, Table]
) -> list[float]:
    """For every source snapshot this refresh absorbed: seconds from its commit to this one.

    `sources` maps each table source's dotted name to its loaded table (loaded at or after
    the snapshot the record names). Reads the history back only to the refresh before
    `record`.
    """
    records = (record_of(s) for s in ancestors_of(storage.current_snapshot(), storage.metadata))
    previous = next(
        (
            r
            for r in records
            if r is not None
            and r.snapshot_id != record.snapshot_id
            and r.timestamp_ms <= record.timestamp_ms
        ),
        None,
    )
    if previous is None:
        return []
    before = {s.dotted: s.snapshot_id for s in previous.state.tables()}
    latencies = []
    for source in record.state.tables():
        table = sources.get(source.dotted)
        old = before.get(source.dotted)
        if table is None or source.snapshot_id is None or old == source.snapshot_id:
            continue
        for snapshot in ancestors_of(
            table.metadata.snapshot_by_id(source.snapshot_id), table.metadata
        ):
            if snapshot.snapshot_id == old:
                break
            latencies.append(max(0.0, (record.timestamp_ms - snapshot.timestamp_ms) / 1000.0))
    return latencies
