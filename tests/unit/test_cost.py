"""Policy `auto`'s cost estimate: pure arithmetic, and the manifest facts it reads (pyiceberg
on a SQLite-file catalog; no JVM)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.expressions import In, LessThan
from pyiceberg.table import Table

from icemv.format.refresh_state import SourceState
from icemv.lakehouse import Lakehouse
from icemv.refresh.changes.classify import classify_change
from icemv.refresh.changes.manifests import touched_files
from icemv.refresh.cost import (
    EMBEDDED_SCAN_SHARE,
    CostEstimate,
    PositionDeletes,
    TouchedFiles,
    change_read_rows,
    embedded_read_rows,
    embedded_scan_rows,
)
from icemv.refresh.cost import estimate as estimate_cost

FACTOR = 1.5  # the default refresh.auto_cost_factor
SCHEMA = pa.schema([("id", pa.int64()), ("vendor", pa.string())])
FILE_ROWS = 5_000


def test_rewritten_files_count_whole_and_moved_files_not_at_all() -> None:
    touched = TouchedFiles(
        added={"new.parquet": 4_900, "tmp.parquet": 7},
        removed={"old.parquet": 5_000, "tmp.parquet": 7},
    )
    assert change_read_rows(touched) == 9_900


def test_position_deletes_hit_named_files_or_the_whole_table() -> None:
    size = {"old_records": 20_000, "old_data_files": 4}
    named = TouchedFiles(
        position_deletes=(
            PositionDeletes(3, "a"),
            PositionDeletes(2, "a"),
            PositionDeletes(1, "b"),
        ),
        **size,
    )
    assert change_read_rows(named) == 6 + 2 * 5_000  # two files hit, at the mean file size
    unnamed = TouchedFiles(position_deletes=(PositionDeletes(6, None),), **size)
    assert change_read_rows(unnamed) == 6 + 20_000
    # A named file the range also rewrote is read once, whole.
    rewritten = TouchedFiles(
        added={"c": 10}, removed={"a": 5_000}, position_deletes=(PositionDeletes(1, "a"),), **size
    )
    assert change_read_rows(rewritten) == 5_010 + 1


def test_equality_deletes_and_vectors() -> None:
    size = {"old_records": 20_000, "old_data_files": 4}
    assert change_read_rows(TouchedFiles(equality_delete_records=(3, 4), **size)) == 20_007
    # Pushed down: only the data files the deletes' values may be in.
    pushed = TouchedFiles(
        equality_delete_records=(3, 4), equality_candidates=({"a": 5_000}, {}), **size
    )
    assert change_read_rows(pushed) == 5_007
    assert change_read_rows(TouchedFiles(vectors=2, **size)) == 2 * 2 * 5_000


def test_decision_weighs_change_rows_against_a_full_scan() -> None:
    one_file = TouchedFiles(added={"n": 49_900}, removed={"o": 50_000})
    every_file = TouchedFiles(
        added={f"n{i}": 49_950 for i in range(4)}, removed={f"o{i}": 50_000 for i in range(4)}
    )
    assert estimate_cost([], [one_file], 199_900).incremental(FACTOR)
    assert not estimate_cost([], [every_file], 199_800).incremental(FACTOR)
    # Appends count their records; a delta as big as the table goes full.
    assert estimate_cost([10], [], 1_000).incremental(FACTOR)
    assert not estimate_cost([10], [], 13).incremental(FACTOR)
    assert CostEstimate(0, 0).incremental(FACTOR)  # nothing to read either way
    assert "99900 rows (x1.5) against 199900" in estimate_cost([], [one_file], 199_900).describe(
        FACTOR
    )


@pytest.fixture
def table(sqlite_lakehouse: Lakehouse) -> Table:
    """4 data files of FILE_ROWS rows each, ids 0.. in order."""
    table = sqlite_lakehouse.catalog.create_table(("nyc", "trips"), schema=SCHEMA)
    for start in range(0, 4 * FILE_ROWS, FILE_ROWS):
        ids = range(start, start + FILE_ROWS)
        table.append(pa.Table.from_pylist([{"id": i, "vendor": "a"} for i in ids], schema=SCHEMA))
    return table


def _estimate(table: Table, change_from: SourceState) -> CostEstimate:
    table = table.refresh()
    snapshot = table.current_snapshot()
    assert snapshot is not None
    change = classify_change(table, change_from, snapshot.snapshot_id)
    assert change.kind == "general"
    total = int(snapshot.summary["total-records"])  # type: ignore[index]
    return estimate_cost([], [touched_files(table, change)], total)


def _state(table: Table) -> SourceState:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return SourceState(
        type="table", namespace=("nyc",), name="trips",
        uuid=str(table.metadata.table_uuid), snapshot_id=snapshot.snapshot_id,
    )  # fmt: skip


def test_a_small_copy_on_write_delete_stays_incremental(table: Table) -> None:
    before = _state(table)
    table.delete(LessThan("id", 100))  # rewrites the first file only
    touched = touched_files(
        table.refresh(), classify_change(table, before, _state(table).snapshot_id)
    )
    assert sorted(touched.removed.values()) == [FILE_ROWS]
    assert sorted(touched.added.values()) == [FILE_ROWS - 100]
    assert (touched.old_records, touched.old_data_files) == (4 * FILE_ROWS, 4)
    cost = _estimate(table, before)
    assert cost == CostEstimate(2 * FILE_ROWS - 100, 4 * FILE_ROWS - 100)
    assert cost.incremental(FACTOR)


def test_a_scattered_delete_recomputes(table: Table) -> None:
    before = _state(table)
    table.delete(In("id", list(range(0, 4 * FILE_ROWS, 1_000))))  # 0.1 %, every file
    cost = _estimate(table, before)
    assert cost.change_rows == 2 * 4 * FILE_ROWS - 20
    assert not cost.incremental(FACTOR)


def test_the_arrow_read_counts_what_it_scans_at_a_share() -> None:
    """The embedded engine reads the deleted positions' row groups and whole rewritten files
    with pyarrow (a rewrite's unchanged rows cancel on the driver): everything it scans
    counts at EMBEDDED_SCAN_SHARE of a full recompute's row."""
    size = {"old_records": 20_000, "old_data_files": 4}
    named = TouchedFiles(position_deletes=(PositionDeletes(30, "a"),), vectors=1, **size)
    assert embedded_scan_rows(named) == (30, 2 * 5_000)
    assert embedded_read_rows(named) == int((30 + 2 * 5_000) * EMBEDDED_SCAN_SHARE)
    assert change_read_rows(named) > embedded_read_rows(named)
    unnamed = TouchedFiles(position_deletes=(PositionDeletes(30, None),), **size)
    assert embedded_scan_rows(unnamed) == (30, 20_000)
    rewritten = TouchedFiles(added={"new": 4_990}, removed={"old": 5_000}, **size)
    assert embedded_scan_rows(rewritten) == (9_990, 0)
    assert embedded_read_rows(rewritten) == int(9_990 * EMBEDDED_SCAN_SHARE)
    assert estimate_cost([], [named], 20_000, arrow=True).change_rows == embedded_read_rows(named)


def test_the_arrow_read_of_equality_deletes_is_sparks() -> None:
    """The embedded engine refuses equality deletes, so `auto` may not keep such a change
    incremental on the strength of an Arrow read that will not happen."""
    size = {"old_records": 20_000, "old_data_files": 4}
    touched = TouchedFiles(
        position_deletes=(PositionDeletes(30, "a"),), equality_delete_records=(5,), **size
    )
    assert embedded_read_rows(touched) == change_read_rows(touched)
