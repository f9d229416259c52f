"""The driver's storage commit (refresh/commit/driver.py) on pyiceberg's SQLite catalog:
a replace writes its added and deleted entries to one manifest, which goes once nothing
in it is live; scans and the metadata stay as Iceberg's readers expect."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table import Table

from icemv.refresh.commit.driver import commit_rows


def _rows(values: list[str]) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(values, pa.string()),
            "total": pa.array([Decimal(len(v)) for v in values], pa.decimal128(12, 2)),
        }
    )


def _commit(catalog: SqlCatalog, values: list[str], replace: bool) -> Table:
    table = catalog.load_table("n.t")
    replaces = list(table.scan().plan_files()) if replace else []
    planned = table.metadata.current_snapshot_id
    commit_rows(table, planned, _rows(values), [t.file for t in replaces], {"by": "test"})
    return catalog.load_table("n.t")


def _statuses(table: Table) -> list[list[ManifestEntryStatus]]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [
        sorted(e.status for e in m.fetch_manifest_entry(table.io, discard_deleted=False))
        for m in snapshot.manifests(table.io)
    ]


def test_a_replace_writes_one_manifest_of_added_and_deleted_entries(tmp_path: Path) -> None:
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    catalog.create_table("n.t", schema=_rows([]).schema)
    table = _commit(catalog, ["a", "bb"], replace=False)
    assert _statuses(table) == [[ManifestEntryStatus.ADDED]]
    table = _commit(catalog, ["a", "bb", "ccc"], replace=True)
    assert _statuses(table) == [[ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED]]
    assert sorted(table.scan().to_arrow()["k"].to_pylist()) == ["a", "bb", "ccc"]
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary["deleted-data-files"] == "1"
    assert snapshot.summary["added-data-files"] == "1"
    assert snapshot.summary["by"] == "test"
    # The next replace leaves nothing live in that manifest: it goes.
    table = _commit(catalog, ["dddd"], replace=True)
    assert _statuses(table) == [[ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED]]
    assert table.scan().to_arrow()["k"].to_pylist() == ["dddd"]
    # An older snapshot still reads as it was.
    first_replace = table.metadata.snapshots[1].snapshot_id
    assert sorted(table.scan(snapshot_id=first_replace).to_arrow()["k"].to_pylist()) == [
        "a", "bb", "ccc",
    ]  # fmt: skip
