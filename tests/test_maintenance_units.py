"""Upkeep logic on a SQLite catalog with pyiceberg only (no Spark): retention, file
deletion, unreferenced files, leftover branches, lost columns."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
from pyiceberg.table import Table

from icemv.format.refresh_state import REFRESH_STATE_KEY
from icemv.lakehouse import Lakehouse
from icemv.mv.compatibility import lost_columns, referenced_columns
from icemv.mv.maintenance.branches import private_branches, remove_leftover_branches
from icemv.mv.maintenance.expiry import Retention, expire_storage, snapshots_to_keep
from icemv.mv.maintenance.orphans import remove_orphan_files

SCHEMA = pa.schema([pa.field("k", pa.string()), pa.field("v", pa.int64())])


def _table(lakehouse: Lakehouse, records: list[bool], overwrite: bool = False) -> Table:
    """One append (or overwrite) per entry; True: its snapshots carry a refresh record."""
    table = lakehouse.catalog.create_table(("nyc", "t"), schema=SCHEMA)
    for i, record in enumerate(records):
        properties = {REFRESH_STATE_KEY: "{}"} if record else {"note": "maintenance"}
        rows = pa.table({"k": ["a"], "v": [i]}, schema=SCHEMA)
        if overwrite:
            table.overwrite(rows, snapshot_properties=properties)
        else:
            table.append(rows, snapshot_properties=properties)
    return table


def _files(table: Table) -> set[str]:
    root = Path(table.location().removeprefix("file://").removeprefix("file:"))
    return {str(p) for p in root.rglob("*") if p.is_file()}


def test_retention_keeps_newest_records_and_everything_after_the_latest(
    sqlite_lakehouse: Lakehouse,
) -> None:
    table = _table(sqlite_lakehouse, [True, True, False, True, True, False])
    main = [s.snapshot_id for s in table.snapshots()]
    now = int(time.time() * 1000) + 60_000
    keep = snapshots_to_keep(table.metadata, Retention(keep_snapshots=1), now)
    assert keep == set(main[4:])  # the latest record and the maintenance snapshot after it
    keep = snapshots_to_keep(table.metadata, Retention(keep_snapshots=2), now)
    assert keep == set(main[3:])
    keep = snapshots_to_keep(table.metadata, Retention(keep_snapshots=1), now, needed={main[1]})
    assert keep == set(main[1:])
    keep = snapshots_to_keep(table.metadata, Retention(1, keep_seconds=3600), now)
    assert keep == set(main)


def test_expiry_deletes_what_only_expired_snapshots_used(sqlite_lakehouse: Lakehouse) -> None:
    # Each overwrite commits a delete and an append snapshot, both with the record.
    table = _table(sqlite_lakehouse, [True] * 6, overwrite=True)
    before = _files(table)
    result = expire_storage(table, Retention(keep_snapshots=2))
    table = table.refresh()
    assert result.expired_snapshots == 9
    assert len(table.snapshots()) == 2
    assert result.deleted_files > 0
    # The expiry commit wrote one metadata file.
    assert len(_files(table)) == len(before) - result.deleted_files + 1
    assert table.scan().to_arrow().column("v").to_pylist() == [5]
    previous = table.snapshots()[0].snapshot_id
    # The delete half of the last overwrite: readable, and empty.
    assert table.scan(snapshot_id=previous).to_arrow().num_rows == 0


def test_unreferenced_files_go_once_old_enough(sqlite_lakehouse: Lakehouse) -> None:
    table = _table(sqlite_lakehouse, [True, True])
    data = Path(table.location().removeprefix("file://").removeprefix("file:")) / "data"
    old, new = data / "killed-write-old.parquet", data / "in-flight.parquet"
    old.write_bytes(b"x")
    new.write_bytes(b"x")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert remove_orphan_files(table, min_age_seconds=600) == 1
    assert not old.exists() and new.exists()
    assert table.refresh().scan().to_arrow().num_rows == 2  # nothing referenced was touched


def test_leftover_branches_need_the_minimum_age(sqlite_lakehouse: Lakehouse) -> None:
    table = _table(sqlite_lakehouse, [True])
    head = table.current_snapshot()
    assert head is not None
    with table.manage_snapshots() as snapshots:
        snapshots.create_branch(head.snapshot_id, "icemv_0123456789abcdef")
        snapshots.create_branch(head.snapshot_id, "someone_elses")
    table = table.refresh()
    assert [b.name for b in private_branches(table)] == ["icemv_0123456789abcdef"]
    assert remove_leftover_branches(table, min_age_seconds=600) == []  # may be a live refresh
    later = int(time.time() * 1000) + 3_600_000
    assert remove_leftover_branches(table, 600, now_ms=later) == ["icemv_0123456789abcdef"]
    assert set(table.refresh().metadata.refs) == {"main", "someone_elses"}


def test_lost_columns_are_the_ones_the_sql_reads(sqlite_lakehouse: Lakehouse) -> None:
    table = _table(sqlite_lakehouse, [True])
    sql = "SELECT k, sum(v) AS total FROM t GROUP BY k"
    assert referenced_columns(sql) == {"k", "v"}
    assert lost_columns(sql, [table]) == []
    with table.update_schema() as schema:
        schema.rename_column("v", "value")
    assert lost_columns(sql, [table.refresh()]) == ["v"]
    assert lost_columns("SELECT k FROM t", [table.refresh()]) == []
