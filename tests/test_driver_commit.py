"""Storage commits from the driver (pyiceberg), on a real SQLite-file catalog, no Spark."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from icemv.errors import FullRefreshRequiredError, StorageCommitConflictError
from icemv.lakehouse import Lakehouse
from icemv.refresh.commit.driver import commit_rows, conform_to_storage
from icemv.refresh.embedded.reads import live_files, shared_cache, stored_file_key
from icemv.refresh.patch.model import live_data_files
from icemv.refresh.patch.row_images import files_admitting, rewrite_row_images

SCHEMA = Schema(
    NestedField(1, "vendor", StringType(), required=False),
    NestedField(2, "n", LongType(), required=False),
    NestedField(3, "s", DoubleType(), required=False),
)


def _rows(*rows: tuple[str | None, int, float | None]) -> pa.Table:
    # Spark's Arrow types and its own column names: commit_rows conforms them.
    return pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.string()),
            "count": pa.array([r[1] for r in rows], pa.int64()),
            "sum": pa.array([r[2] for r in rows], pa.float64()),
        }
    )


def _content(table: Table) -> list[tuple[object, ...]]:
    arrow = table.refresh().scan().to_arrow()
    return sorted(zip(*(arrow[c].to_pylist() for c in arrow.column_names), strict=True), key=str)


def _storage(lakehouse: Lakehouse) -> Table:
    table = lakehouse.catalog.create_table(("nyc", "storage"), SCHEMA)
    table.append(_rows(("a", 1, 1.0)).rename_columns(["vendor", "n", "s"]).cast(SCHEMA.as_arrow()))
    return table


def _replace_all(table: Table, rows: pa.Table) -> None:
    planned = table.metadata.current_snapshot_id
    assert planned is not None
    commit_rows(table, planned, rows, live_data_files(table, planned), {})


def test_append_and_replace_carry_the_properties(sqlite_lakehouse: Lakehouse) -> None:
    table = _storage(sqlite_lakehouse)
    planned = table.metadata.current_snapshot_id
    assert planned is not None
    commit_rows(table, planned, _rows(("b", 2, None)), (), {"icemv.refresh-id": "r1"})
    assert _content(table) == [("a", 1, 1.0), ("b", 2, None)]
    _replace_all(table, _rows((None, 5, 2.5)))
    assert _content(table) == [(None, 5, 2.5)]
    summaries = [s.summary.additional_properties for s in table.snapshots() if s.summary]
    assert summaries[1]["icemv.refresh-id"] == "r1"
    assert [s.summary.operation.value for s in table.snapshots() if s.summary] == [
        "append",
        "append",
        "overwrite",
    ]


def test_a_stale_plan_cannot_commit(sqlite_lakehouse: Lakehouse) -> None:
    stale = _storage(sqlite_lakehouse)
    planned = stale.metadata.current_snapshot_id
    assert planned is not None
    rival = sqlite_lakehouse.catalog.load_table(("nyc", "storage"))
    commit_rows(rival, planned, _rows(("r", 1, 1.0)), (), {})
    replaced = live_data_files(stale, planned)
    with pytest.raises(StorageCommitConflictError):  # the table object still says `planned`
        commit_rows(stale, planned, _rows(("x", 1, 1.0)), replaced, {})
    with pytest.raises(StorageCommitConflictError):  # reloaded: main has moved on
        commit_rows(stale.refresh(), planned, _rows(("x", 1, 1.0)), replaced, {})
    assert _content(stale) == [("a", 1, 1.0), ("r", 1, 1.0)]


def test_the_one_live_file_a_commit_leaves_is_known_without_a_scan(
    sqlite_lakehouse: Lakehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _storage(sqlite_lakehouse)  # one file, written by pyiceberg: planned once
    planned = table.metadata.current_snapshot_id or 0
    assert [f.file_path for f in live_files(table, planned) or ()] == [
        f.file_path for f in live_data_files(table, planned)
    ]
    for n in range(3):  # each rewrite replaces the one file by another
        planned = table.metadata.current_snapshot_id or 0
        commit_rows(table, planned, _rows(("a", n, None)), live_files(table, planned) or (), {})
    snapshot = table.metadata.current_snapshot_id or 0
    scanned = live_data_files(table.refresh(), snapshot)
    with monkeypatch.context() as patched:  # known from the commit: no scan planned
        patched.setattr(Table, "scan", lambda *_, **__: pytest.fail("planned a scan"))
        known = live_files(table, snapshot)
        files = files_admitting(table, snapshot, pa.table({"vendor": ["zzz"]}), 10)
    assert known is not None
    assert [(f.file_path, f.spec_id, f.record_count) for f in known] == [
        (f.file_path, f.spec_id, f.record_count) for f in scanned
    ]
    assert files is not None  # its bounds exclude "zzz": read anyway, a superset
    assert [f.file_path for f, _ in files] == [known[0].file_path]
    assert _content(table) == [("a", 2, None)]
    commit_rows(table, snapshot, _rows(("b", 1, None)), (), {})  # a second file
    assert live_files(table, table.metadata.current_snapshot_id or 0) is None


def test_rewrites_do_not_pile_up_manifests(sqlite_lakehouse: Lakehouse) -> None:
    table = _storage(sqlite_lakehouse)
    for n in range(6):
        _replace_all(table, _rows(("a", n, None)))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    assert len(snapshot.manifests(table.io)) <= 2
    assert _content(table) == [("a", 5, None)]


@pytest.mark.parametrize("merge", [None, "false"], ids=["default", "off"])
def test_appends_merge_their_manifests_unless_the_table_says_not_to(
    sqlite_lakehouse: Lakehouse, merge: str | None
) -> None:
    table = _storage(sqlite_lakehouse)
    properties = {"commit.manifest.min-count-to-merge": "3"}
    if merge is not None:  # unset: pyiceberg would not merge, icemv does
        properties["commit.manifest-merge.enabled"] = merge
    with table.transaction() as tx:
        tx.set_properties(properties)
    table = table.refresh()
    for n in range(6):
        planned = table.metadata.current_snapshot_id
        assert planned is not None
        commit_rows(table, planned, _rows(("b", n, None)), (), {})
    snapshot = table.current_snapshot()
    assert snapshot is not None
    manifests = len(snapshot.manifests(table.io))
    # Seven appends (the first pyiceberg's own): merged, at most the minimum count pile up.
    assert manifests <= 3 if merge is None else manifests == 7
    assert _content(table) == [("a", 1, 1.0), *[("b", n, None) for n in range(6)]]


def _net(*rows: tuple[str | None, int, float | None, int]) -> pa.Table:
    """Row images (storage columns) with their net copies, as Spark hands them over."""
    return _rows(*(r[:3] for r in rows)).append_column(
        "__icemv_net", pa.array([r[3] for r in rows], pa.int64())
    )


def test_deleted_images_leave_only_the_files_holding_them(sqlite_lakehouse: Lakehouse) -> None:
    table = _storage(sqlite_lakehouse)
    planned = table.metadata.current_snapshot_id or 0
    (first,) = (f.file_path for f in live_data_files(table, planned))  # holds (a, 1, 1.0)
    commit_rows(table, planned, _rows(("b", 2, None), ("b", 2, None), (None, 3, 3.0)), (), {})
    # (b, 3, None) has each value of some deleted image, but is none of them: it stays.
    crossed = _rows(("b", 2, None), ("b", 3, None))
    commit_rows(table, table.metadata.current_snapshot_id or 0, crossed, (), {})
    planned = table.metadata.current_snapshot_id or 0
    # Two of three copies of a NULL-bearing duplicate and the NULL-keyed row go; one inserted.
    net = _net(("b", 2, None, -2), (None, 3, 3.0, -1), ("c", 9, None, 2))
    rewrite = rewrite_row_images(table, planned, net, max_rows=100)
    assert rewrite is not None
    assert (rewrite.inserted, rewrite.deleted) == (2, 3)
    assert rewrite.replaces  # the file(s) the two (b, 2, None) copies came from
    assert first not in {f.file_path for f in rewrite.replaces}  # it holds no deleted image
    commit_rows(table, planned, rewrite.rows, rewrite.replaces, {})
    assert _content(table) == [
        ("a", 1, 1.0), ("b", 2, None), ("b", 3, None), ("c", 9, None), ("c", 9, None)
    ]  # fmt: skip
    assert rewrite_row_images(table, table.metadata.current_snapshot_id or 0, net, 1) is None
    with pytest.raises(FullRefreshRequiredError, match="storage-inconsistent"):
        rewrite_row_images(table, table.metadata.current_snapshot_id or 0, net, 100)


def test_the_staged_metadata_is_applied_once_per_update(sqlite_lakehouse: Lakehouse) -> None:
    """The commit's transaction reuses its staged metadata until an update is staged, and
    it is then what pyiceberg's own transaction computes."""
    from pyiceberg.table import Transaction

    from icemv.refresh.commit.driver import _Transaction

    table = _storage(sqlite_lakehouse)
    cached, plain = _Transaction(table), Transaction(table)
    first = cached.table_metadata
    assert cached.table_metadata is first
    for transaction in (cached, plain):
        transaction.set_properties(k="v")
    staged = cached.table_metadata
    assert staged is not first and staged is cached.table_metadata
    assert staged.properties["k"] == "v"
    expected = plain.table_metadata
    assert staged.model_dump(exclude={"last_updated_ms"}) == expected.model_dump(
        exclude={"last_updated_ms"}
    )


def test_updates_are_applied_as_pyiceberg_applies_them(sqlite_lakehouse: Lakehouse) -> None:
    """catalog/metadata_updates.py `applied`: pyiceberg's `update_table_metadata` minus its
    deep copy, over a commit's updates (a snapshot, its ref, properties), with the metadata
    log entry for the base."""
    from pyiceberg.table import Transaction
    from pyiceberg.table.update import update_table_metadata

    from icemv.catalog.metadata_updates import applied

    table = _storage(sqlite_lakehouse)
    transaction = Transaction(table)
    transaction.set_properties(k="v")
    transaction.append(
        _rows(("b", 2, None)).rename_columns(["vendor", "n", "s"]).cast(SCHEMA.as_arrow())
    )
    updates = transaction._updates  # noqa: SLF001 (the staged updates, as committed)
    assert len(updates) >= 3
    ours = applied(table.metadata, updates, table.metadata_location)
    theirs = update_table_metadata(
        table.metadata, updates, metadata_location=table.metadata_location
    )
    assert ours.model_dump() == theirs.model_dump()
    assert ours.metadata_log[-1].metadata_file == table.metadata_location
    assert ours.snapshots[0] is table.metadata.snapshots[0]  # shared, not copied
    assert applied(table.metadata, ()) is table.metadata


# ---- the rows a commit wrote, kept for the next refresh's read ----------------------------

TYPED = Schema(
    NestedField(1, "k", StringType(), required=False),
    NestedField(2, "amount", DecimalType(38, 10), required=False),
    NestedField(3, "ts", TimestampType(), required=False),
    NestedField(4, "tstz", TimestamptzType(), required=False),
    NestedField(5, "day", DateType(), required=False),
    NestedField(6, "x", DoubleType(), required=False),
    NestedField(7, "n", LongType(), required=False),
    NestedField(8, "ok", BooleanType(), required=False),
)


def _typed_rows() -> pa.Table:
    # Spark's Arrow types (string, not large_string; a tz-aware timestamp in UTC).
    moment = datetime.datetime(2024, 2, 29, 23, 59, 59, 999999)
    first, last = datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31)
    day_one, day_last, leap = datetime.date(1, 1, 1), datetime.date(9999, 12, 31), moment.date()
    wide = Decimal("12345678901234567890.0123456789")
    return pa.table(
        {
            "k": pa.array(["ß", "", None, "🙂", "a\u0301"], pa.string()),
            "amount": pa.array(
                [wide, Decimal("-0.0000000001"), None, Decimal(0), Decimal("1E-10")],
                pa.decimal128(38, 10),
            ),
            "ts": pa.array([moment, first, None, moment, moment], pa.timestamp("us")),
            "tstz": pa.array([moment, moment, None, last, moment], pa.timestamp("us", "UTC")),
            "day": pa.array([day_one, None, day_last, leap, None], pa.date32()),
            "x": pa.array([float("nan"), -0.0, None, float("inf"), 1e-310], pa.float64()),
            "n": pa.array([2**63 - 1, -(2**63), None, 0, 1], pa.int64()),
            "ok": pa.array([True, False, None, True, False], pa.bool_()),
        }
    )


def _exact(table: pa.Table) -> list[list[str]]:
    """Every value by its repr: NaN equals NaN, -0.0 differs from 0.0."""
    return [[repr(v) for v in column.to_pylist()] for column in table.columns]


def test_the_rows_a_commit_keeps_are_what_reading_its_file_gives(
    sqlite_lakehouse: Lakehouse,
) -> None:
    # row_images.files_admitting reads a storage file once per process; the commit that
    # wrote it keeps its rows in the cache instead. They must be the very rows a read of
    # the file gives, to the last digit, type and field id.
    cache = shared_cache(64 * 2**20)
    table = sqlite_lakehouse.catalog.create_table(("nyc", "typed"), TYPED)
    table.append(_typed_rows().cast(TYPED.as_arrow()))
    planned = table.metadata.current_snapshot_id
    assert planned is not None
    commit_rows(table, planned, _typed_rows(), live_data_files(table, planned), {})
    table = table.refresh()
    (task,) = table.scan().plan_files()
    key = stored_file_key(table, task.file.file_path)

    def unread() -> pa.Table:
        raise AssertionError("the commit did not keep the rows it wrote")

    kept = cache.piece(key, unread)
    reader = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue())
    read = conform_to_storage(reader.to_table([task]), table)
    assert kept.schema.equals(read.schema, check_metadata=True)
    assert _exact(kept) == _exact(read)
    # And what the rewrite path reads: the kept rows, no file read.
    probe = read.select(["k"]).slice(0, 1)
    ((file, rows),) = files_admitting(table, table.metadata.current_snapshot_id or 0, probe, 100)
    assert file.file_path == task.file.file_path and rows is kept


def test_a_file_read_whole_is_read_once(sqlite_lakehouse: Lakehouse) -> None:
    # A file the cache does not know (written by Spark, or by another process): the first
    # read keeps it.
    cache = shared_cache(64 * 2**20)
    table = sqlite_lakehouse.catalog.create_table(("nyc", "once"), TYPED)
    table.append(_typed_rows().cast(TYPED.as_arrow()))
    snapshot = table.metadata.current_snapshot_id or 0
    probe = _typed_rows().select(["n"]).slice(0, 1).rename_columns(["n"])
    files_before = cache.files_read
    ((_, first),) = files_admitting(table, snapshot, probe, 100)
    ((_, second),) = files_admitting(table, snapshot, probe, 100)
    assert second is first
    assert cache.files_read == files_before  # counts change reads, not these
