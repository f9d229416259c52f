"""`icemv mv compact`: compact the storage table and expire its old snapshots.

Freshness is read from the latest snapshot that carries a refresh record; compaction adds
`replace` snapshots after it, so expiry keeps every snapshot from that record on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pyiceberg.table.snapshots import ancestors_of

from icemv.catalog.lakehouse import Lakehouse
from icemv.identifiers import quote_part
from icemv.mv.history import latest_refresh
from icemv.mv.model import MaterializedView


@dataclass(frozen=True)
class CompactionResult:
    rewritten_files: int
    added_files: int
    snapshots_before: int
    snapshots_after: int


def compact_storage(lakehouse: Lakehouse, mv: MaterializedView) -> CompactionResult:
    spark = lakehouse.spark
    catalog = quote_part(lakehouse.catalog_name)
    table_arg = mv.storage.quoted().replace("\\", "\\\\").replace("'", "\\'")
    before = len(lakehouse.load_table(mv.storage).snapshots())
    rewrite = spark.sql(
        f"CALL {catalog}.system.rewrite_data_files(table => '{table_arg}', "
        "options => map('min-input-files', '2', 'remove-dangling-deletes', 'true'))"
    ).first()
    storage = lakehouse.load_table(mv.storage)
    record = latest_refresh(storage)
    keep = 1
    if record is not None:
        for snapshot in ancestors_of(storage.current_snapshot(), storage.metadata):
            if snapshot.snapshot_id == record.snapshot_id:
                break
            keep += 1
    # Procedure arguments are literals; the session time zone is UTC.
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    spark.sql(
        f"CALL {catalog}.system.expire_snapshots(table => '{table_arg}', "
        f"older_than => TIMESTAMP '{now}', retain_last => {keep})"
    )
    after = len(lakehouse.load_table(mv.storage).snapshots())
    return CompactionResult(
        rewritten_files=int(rewrite[0]) if rewrite else 0,
        added_files=int(rewrite[1]) if rewrite else 0,
        snapshots_before=before,
        snapshots_after=after,
    )
