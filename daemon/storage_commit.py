"""Writes to a storage table that carry the refresh record in the same atomic commit.

The commit is validated against the storage snapshot the refresh was planned from, so a
concurrent refresh makes this one fail (and re-plan) instead of recording two refreshes.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot, ancestors_of

from daemon.refresh_state import REFRESH_STATE_KEY, RefreshState, encode_refresh_state

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

REFRESH_ID_KEY = "icemv.refresh-id"
CONFLICT_MARKERS = ("ValidationException", "CommitFailedException", "CommitStateUnknownException")


class StorageCommitConflictError(RuntimeError):
    """The storage table moved since the refresh was planned."""


def commit_properties(state: RefreshState, details: Mapping[str, str]) -> dict[str, str]:
    return {
        REFRESH_STATE_KEY: encode_refresh_state(state),
        REFRESH_ID_KEY: str(uuid.uuid4()),
        **details,
    }


def overwrite_storage(
    df: DataFrame,
    storage_name: str,
    planned_from: int | None,
    properties: Mapping[str, str],
) -> None:
    """Replace the whole storage table with `df`, in one snapshot carrying `properties`."""
    from pyspark.sql.functions import lit

    writer = df.writeTo(storage_name)
    for key, value in properties.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    if planned_from is not None:
        writer = writer.option("validate-from-snapshot-id", str(planned_from))
        writer = writer.option("isolation-level", "serializable")
    try:
        writer.overwrite(lit(True))
    except Exception as exc:
        if any(marker in str(exc) for marker in CONFLICT_MARKERS):
            raise StorageCommitConflictError(str(exc).splitlines()[0]) from exc
        raise


def find_commit(storage: Table, refresh_id: str) -> Snapshot | None:
    """The snapshot a refresh committed, by the id it wrote into the summary."""
    for snapshot in ancestors_of(storage.current_snapshot(), storage.metadata):
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if summary.get(REFRESH_ID_KEY) == refresh_id:
            return snapshot
    return None
