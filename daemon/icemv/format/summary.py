"""The icemv keys of a storage snapshot's summary, and the codes their values take.

Part of the format other tools read (`icemv mv history`, dashboards, Trino users looking
at snapshot summaries), so the string values never change; the enums only give them one
owner. Iceberg's own summary keys (`added-records`, ...) are pyiceberg's constants in
`pyiceberg.table.snapshots`, re-exported here for the refresh code.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from pyiceberg.table.snapshots import (
    ADDED_EQUALITY_DELETES,
    ADDED_POSITION_DELETES,
    ADDED_RECORDS,
    DELETED_RECORDS,
    TOTAL_DATA_FILES,
    TOTAL_RECORDS,
    Snapshot,
)

__all__ = [
    "ADDED_EQUALITY_DELETES",
    "ADDED_POSITION_DELETES",
    "ADDED_RECORDS",
    "DELETED_RECORDS",
    "PRIVATE_BRANCH_PREFIX",
    "TOTAL_DATA_FILES",
    "TOTAL_RECORDS",
    "RefreshMode",
    "RefreshReason",
    "StorageWrite",
    "SummaryKey",
    "summary_int",
    "summary_of",
]

# A refresh that writes through Spark commits on a private branch of the storage table
# named `icemv_<16 hex>`, published to main with one compare-and-swap and then removed;
# a branch with this prefix that outlives its refresh is a leftover (docs/format.md).
PRIVATE_BRANCH_PREFIX = "icemv_"


class SummaryKey(StrEnum):
    """icemv's keys in a storage snapshot summary (next to `refresh-state`)."""

    REFRESH_ID = "icemv.refresh-id"  # finds the snapshot a refresh committed
    MODE = "icemv.mode"
    REASON = "icemv.reason"
    STORAGE_WRITE = "icemv.storage-write"
    ENGINE = "icemv.engine"  # who computed an incremental delta: `duckdb` or `spark`
    ROWS_INSERTED = "icemv.rows-inserted"
    ROWS_DELETED = "icemv.rows-deleted"
    # A full refresh repairing what a verification found: a bounded summary of the diff.
    VERIFY_DIFF = "icemv.verify-diff"


class RefreshMode(StrEnum):
    FULL = "full"
    INCREMENTAL = "incremental"
    NO_OP = "no-op"  # sources moved only by compaction: a new record, no data change
    SKIPPED = "skipped"  # already fresh: nothing committed (results only, never recorded)


class StorageWrite(StrEnum):
    """Who wrote the incremental patch: pyiceberg on the driver, or a Spark job."""

    DRIVER = "driver"
    SPARK = "spark"


class RefreshReason(StrEnum):
    """Why a refresh ran the way it did. Analysis codes (`window-function`, ...) are not
    listed: they come from the SQL pass and are recorded as they are."""

    ALREADY_FRESH = "already-fresh"
    REQUESTED = "requested"
    POLICY_FULL = "policy-full"
    INVALID = "invalid"
    NEVER_REFRESHED = "never-refreshed"
    DEFINITION_CHANGED = "definition-changed"
    STORAGE_TABLE_MISSING = "storage-table-missing"
    SOURCE_CHANGED = "source-changed"
    NO_LOGICAL_CHANGE = "no-logical-change"
    SOURCE_DROPPED = "source-dropped"
    SOURCE_REPLACED = "source-replaced"
    SOURCE_ROLLED_BACK = "source-rolled-back"
    SOURCE_HISTORY_LOST = "source-history-lost"
    SOURCES_CHANGED = "sources-changed"
    DELTA_TOO_LARGE = "delta-too-large"
    STORAGE_INCONSISTENT = "storage-inconsistent"
    DELTA_FAILED = "delta-failed"
    NO_GROUP_KEYS = "no-group-keys"
    # The storage table holds state columns this icemv does not derive for the view.
    STATE_UNKNOWN = "state-unknown"
    # A table read only by a WHERE subquery changed (sql/subquery_filters.py).
    SUBQUERY_SOURCE_CHANGED = "subquery-source-changed"
    # Top-N (sql/top_n.py): appended rows that cannot reach the top n need no write; rows
    # that can, or a source losing rows, recompute the view.
    TOP_N_UNREACHED = "top-n-unreached"
    TOP_N_REACHED = "top-n-reached"
    TOP_N_NOT_APPEND_ONLY = "top-n-not-append-only"
    # A rule that once gave this MV a wrong delta is quarantined (format/quarantine.py).
    RULE_QUARANTINED = "rule-quarantined"
    # A verification found the storage table differing from the view (mv/verify.py).
    VERIFY_MISMATCH = "verify-mismatch"


def summary_of(snapshot: Snapshot | None) -> Mapping[str, str]:
    """A snapshot's summary properties; empty for no snapshot or no summary."""
    if snapshot is None or snapshot.summary is None:
        return {}
    return snapshot.summary.additional_properties


def summary_int(snapshot: Snapshot | None, key: str) -> int:
    """A snapshot's integer summary property; 0 when absent or not an integer."""
    try:
        return int(summary_of(snapshot).get(key, 0))
    except ValueError:
        return 0
