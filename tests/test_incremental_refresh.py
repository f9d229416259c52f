"""Incremental refresh against the oracle, shape by shape, operation by operation."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import Table

import icemv.refresh.incremental as incremental
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse, forget_reads
from icemv.mv.history import commit_to_fresh_seconds, latest_refresh
from icemv.mv.layout import StorageLayout
from icemv.mv.lifecycle import create_mv
from icemv.refresh.phases import PHASES
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from tests.conftest import CATALOG_KINDS
from tests.support.oracle import assert_matches_oracle, spark_writes_only
from tests.support.tables import append_trips, create_trips, equality_delete

pytestmark = [pytest.mark.spark, pytest.mark.postgres, CATALOG_KINDS]

D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)
ROWS = [
    (1, "a", 10.0, D1),
    (2, "a", 10.0, D1),
    (3, "b", None, D1),
    (4, None, 7.5, D2),
    (5, "b", 2.5, D2),
]

SHAPES = {
    "filter": "SELECT id, vendor, fare FROM trips WHERE fare > 5 OR fare IS NULL",
    "project-dups": "SELECT vendor, day FROM trips",
    "count-sum": (
        "SELECT vendor, count(*) AS n, count(fare) AS nf, sum(fare) AS s FROM trips GROUP BY vendor"
    ),
    "count-only": "SELECT day, count(*) AS n, count(vendor) AS nv FROM trips GROUP BY day",
    "min-max-avg": (
        "SELECT vendor, min(fare) AS lo, max(fare) AS hi, avg(fare) AS mean "
        "FROM trips GROUP BY vendor"
    ),
    "having-distinct": (
        "SELECT day, count(DISTINCT vendor) AS vendors FROM trips GROUP BY day HAVING count(*) > 1"
    ),
    "self-join": (
        "SELECT a.id AS a_id, b.id AS b_id "
        "FROM trips a JOIN trips b ON a.vendor = b.vendor AND a.id < b.id"
    ),
    "union-all": (
        "SELECT id, vendor FROM trips WHERE fare > 5 "
        "UNION ALL SELECT id, vendor FROM trips WHERE day = DATE'2024-01-02'"
    ),
}


def compact(lakehouse: Lakehouse, namespace: str) -> None:
    """Rewrite every data file: a `replace` snapshot with no logical change."""
    lakehouse.spark.sql(
        f"CALL `lake`.system.rewrite_data_files(table => '{namespace}.trips', "
        "options => map('rewrite-all', 'true'))"
    )


def _trips(lakehouse: Lakehouse, namespace: str) -> str:
    return lakehouse.quoted(Identifier((namespace,), "trips"))


WRITES = [("copy-on-write", "driver"), ("merge-on-read", "driver"), ("merge-on-read", "spark")]
# The whole matrix on local disk; on S3 (moto) a subset that covers every write path:
# copy-on-write and merge-on-read source deletes, driver and Spark storage commits.
S3_CASES = [
    ("filter", "merge-on-read", "driver"),
    ("count-sum", "merge-on-read", "spark"),
    ("min-max-avg", "copy-on-write", "driver"),
    ("self-join", "merge-on-read", "spark"),
]
CASES = [
    *[("local", shape, *writes) for shape in sorted(SHAPES) for writes in WRITES],
    *[("s3", *case) for case in S3_CASES],
]


@pytest.mark.matrix
@pytest.mark.parametrize(
    ("storage_kind", "shape", "write_mode", "storage_writes"), CASES, indirect=["storage_kind"]
)
def test_each_operation_is_applied_incrementally(
    lakehouse: Lakehouse, namespace: str, shape: str, write_mode: str, storage_writes: str
) -> None:
    if storage_writes == "spark":
        lakehouse = spark_writes_only(lakehouse)
    table = create_trips(lakehouse, namespace, rows=ROWS)
    assert table.location().startswith("s3://") == lakehouse.config.warehouse.on_s3
    with table.transaction() as tx:
        tx.set_properties(
            {
                "write.delete.mode": write_mode,
                "write.update.mode": write_mode,
                "write.merge.mode": write_mode,
            }
        )
    mv_id = Identifier((namespace,), "mv")
    create_mv(lakehouse, mv_id, SHAPES[shape], properties={"icemv.refresh-policy": "incremental"})
    assert refresh_mv(lakehouse, mv_id).mode == "full"
    spark, trips = lakehouse.spark, _trips(lakehouse, namespace)

    operations = [
        lambda: append_trips(
            lakehouse, namespace, [(6, "a", 10.0, D1), (7, "c", None, D3), (8, None, 1.0, D3)]
        ),
        lambda: spark.sql(f"DELETE FROM {trips} WHERE id IN (2, 4)"),
        lambda: spark.sql(f"UPDATE {trips} SET fare = fare + 1, vendor = 'b' WHERE id = 1"),
        lambda: spark.sql(
            f"MERGE INTO {trips} t USING (SELECT 3 AS id, 'c' AS vendor, 99.0 AS fare, "
            "DATE'2024-01-03' AS day UNION ALL SELECT 9, 'a', 3.0, DATE'2024-01-01') s "
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        ),
        lambda: compact(lakehouse, namespace),
        lambda: spark.sql(f"DELETE FROM {trips} WHERE vendor = 'c'"),
    ]
    for operation in operations:
        operation()
        result = refresh_mv(lakehouse, mv_id)
        assert result.mode in ("incremental", "no-op"), result
        # Every phase of the path, in its order, each timed.
        assert list(result.phase_seconds) == list(PHASES), result.phase_seconds
        assert all(seconds >= 0 for seconds in result.phase_seconds.values())
        assert_matches_oracle(lakehouse, mv_id)
        # The result carries the record it committed and its commit-to-fresh latencies,
        # as the daemon would find them by loading the tables.
        storage = lakehouse.load_table(Identifier((namespace,), "mv__storage"))
        assert result.record is not None and result.record == latest_refresh(storage)
        sources = {
            s.dotted: lakehouse.load_table(Identifier(s.namespace, s.name))
            for s in result.record.state.tables()
        }
        found = commit_to_fresh_seconds(storage, result.record, sources)
        assert result.commit_to_fresh_seconds == tuple(found) and found
    record = latest_refresh(lakehouse.load_table(Identifier((namespace,), "mv__storage")))
    assert record is not None and record.details["icemv.mode"] in ("incremental", "no-op")


def test_compaction_only_is_a_no_op_refresh(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    append_trips(lakehouse, namespace, [(6, "a", 1.0, D1)])
    mv_id = Identifier((namespace,), "mv")
    create_mv(lakehouse, mv_id, SHAPES["count-sum"])
    refresh_mv(lakehouse, mv_id)
    compact(lakehouse, namespace)
    result = refresh_mv(lakehouse, mv_id)
    assert (result.mode, result.reason, result.rows_inserted, result.rows_deleted) == (
        "no-op",
        "no-logical-change",
        0,
        0,
    )
    assert_matches_oracle(lakehouse, mv_id)


def test_append_then_compaction_in_one_range(lakehouse: Lakehouse, namespace: str) -> None:
    """Found by the property test: the compaction output must not count as inserted rows."""
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "mv")
    create_mv(
        lakehouse, mv_id, SHAPES["filter"], properties={"icemv.refresh-policy": "incremental"}
    )
    refresh_mv(lakehouse, mv_id)
    append_trips(lakehouse, namespace, [(2, "b", 2.5, D2), (5, None, 10.0, D1)])
    compact(lakehouse, namespace)
    assert refresh_mv(lakehouse, mv_id).mode == "incremental"
    assert_matches_oracle(lakehouse, mv_id)


@pytest.mark.parametrize("shape", ["filter", "count-sum", "min-max-avg"])
def test_equality_deletes_are_incremental(lakehouse: Lakehouse, namespace: str, shape: str) -> None:
    create_trips(lakehouse, namespace, rows=[*ROWS, (6, "c", 3.0, D3), (7, "c", 4.0, D3)])
    mv_id = Identifier((namespace,), "mv")
    create_mv(lakehouse, mv_id, SHAPES[shape], properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, mv_id)
    equality_delete(lakehouse, namespace, "vendor", ["c"])
    append_trips(lakehouse, namespace, [(8, "c", 9.0, D1)])  # a later insert of the key stays
    result = refresh_mv(lakehouse, mv_id)
    assert result.mode == "incremental", result
    assert_matches_oracle(lakehouse, mv_id)
    equality_delete(lakehouse, namespace, "vendor", [None, "a"])
    lakehouse.spark.sql(f"DELETE FROM {_trips(lakehouse, namespace)} WHERE id = 5")
    assert refresh_mv(lakehouse, mv_id).mode == "incremental"
    assert_matches_oracle(lakehouse, mv_id)


@pytest.mark.parametrize("version", [2, 3])
def test_a_small_equality_delete_reads_only_the_files_its_values_may_be_in(
    lakehouse: Lakehouse, namespace: str, version: int
) -> None:
    """Four data files, one vendor each: the delete's values are pushed into Spark's read
    (the embedded engine off), so the refresh reads only the files whose column bounds allow
    them (format v2 and v3); and `auto` weighs that read, not the whole table's, and
    takes the embedded engine, which applies equality deletes itself."""
    trips = _trips(lakehouse, namespace)
    lakehouse.spark.sql(
        f"CREATE TABLE {trips} (id BIGINT, vendor STRING, fare DOUBLE, day DATE, zone STRING) "
        "USING iceberg "
        f"TBLPROPERTIES ('format-version' = '{version}', 'write.delete.mode' = 'merge-on-read')"
    )
    for k, vendor in enumerate("abcd"):  # one INSERT, one file
        values = ", ".join(f"({10 * k + i}, '{vendor}', {i}.5, DATE'2024-01-0{1 + i % 3}', 'z{i}')"
                           for i in range(10))  # fmt: skip
        lakehouse.spark.sql(f"INSERT INTO {trips} VALUES {values}")
    mv_id, auto_id = Identifier((namespace,), "mv"), Identifier((namespace,), "mv_auto")
    for mv, policy in ((mv_id, "incremental"), (auto_id, "auto")):
        # Exact sums merge deletes (a DOUBLE sum recomputes its groups under deletes).
        sql = (
            "SELECT vendor, count(*) AS n, count(fare) AS nf, sum(id) AS s "
            "FROM trips GROUP BY vendor"
        )
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": policy})
        refresh_mv(lakehouse, mv)

    config = lakehouse.config
    spark_only = Lakehouse(
        config.model_copy(
            update={"refresh": config.refresh.model_copy(update={"embedded_max_rows": 0})}
        )
    )

    def refresh_both(rows_read: int) -> None:
        result = refresh_mv(spark_only, mv_id)
        assert (result.mode, result.source_rows_read) == ("incremental", rows_read), result
        # `auto` weighs ~rows_read + the delete's rows, less than the 40 rows of a full scan
        # (weighing every data file, as before the pushdown, it recomputed fully).
        result = refresh_mv(lakehouse, auto_id)
        assert (result.mode, result.engine) == ("incremental", "duckdb"), result
        assert_matches_oracle(lakehouse, mv_id)
        assert_matches_oracle(lakehouse, auto_id)

    equality_delete(lakehouse, namespace, "vendor", ["c"])
    refresh_both(10)
    equality_delete(lakehouse, namespace, "vendor", [None, "zz"])  # no file may hold either
    refresh_both(0)
    equality_delete(lakehouse, namespace, "vendor", ["a"])
    refresh_both(10)
    # Rows two deletes remove go once: a position delete (v2) or deletion vector (v3)
    # and two equality deletes, overlapping, in one range (one on a column the view
    # does not read).
    lakehouse.spark.sql(f"DELETE FROM {trips} WHERE id = 11")
    equality_delete(lakehouse, namespace, "vendor", ["b", "d"])
    equality_delete(lakehouse, namespace, "zone", ["z4", "z7"])
    assert refresh_mv(spark_only, mv_id).mode == "incremental"
    assert_matches_oracle(lakehouse, mv_id)
    assert refresh_mv(lakehouse, auto_id).engine == "duckdb"
    assert_matches_oracle(lakehouse, auto_id)


@pytest.mark.parametrize("storage_writes", ["driver", "spark"])
def test_a_refresh_that_lost_a_race_is_never_applied(
    lakehouse: Lakehouse, namespace: str, storage_writes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rival refresh lands between this one's plan and its commit: this one must fail
    its commit, re-plan, and find the MV fresh; the delta is applied exactly once."""
    if storage_writes == "spark":
        lakehouse = spark_writes_only(lakehouse)
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "mv")
    sql = SHAPES["count-sum"]
    create_mv(lakehouse, mv_id, sql, properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, mv_id)
    append_trips(lakehouse, namespace, [(6, "a", 10.0, D1), (7, "z", 1.0, D2)])
    rivals: list[RefreshResult] = []
    raced = False

    def rival_first(commit: Callable[..., None]) -> Callable[..., None]:
        def commit_after_rival(*args: Any, **kwargs: Any) -> None:
            nonlocal raced
            if not raced:
                raced = True
                rivals.append(refresh_mv(lakehouse, mv_id))  # re-enters: commits first
            commit(*args, **kwargs)

        return commit_after_rival

    for name in ("commit_rows", "commit_via_branch"):
        monkeypatch.setattr(incremental, name, rival_first(getattr(incremental, name)))
    result = refresh_mv(lakehouse, mv_id)
    assert [r.mode for r in rivals] == ["incremental"]
    assert (result.mode, result.attempts) == ("skipped", 2)
    assert_matches_oracle(lakehouse, mv_id)
    storage = lakehouse.load_table(Identifier((namespace,), "mv__storage"))
    assert not [ref for ref in storage.metadata.refs if ref != "main"]  # no leftover branch


def test_a_patch_too_big_for_the_driver_goes_through_spark(
    lakehouse: Lakehouse, namespace: str
) -> None:
    config = lakehouse.config
    refresh = config.refresh.model_copy(update={"driver_commit_max_rows": 2})
    lakehouse = Lakehouse(config.model_copy(update={"refresh": refresh}))
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "mv")
    create_mv(
        lakehouse, mv_id, SHAPES["filter"], properties={"icemv.refresh-policy": "incremental"}
    )
    refresh_mv(lakehouse, mv_id)
    for rows in (
        [(6, "a", 10.0, D1)],  # one row: collected and committed from the driver
        [(7, "a", 10.0, D1), (8, "b", 9.0, D1), (9, "c", 8.0, D2)],  # three: a Spark write
    ):
        append_trips(lakehouse, namespace, rows)
        result = refresh_mv(lakehouse, mv_id)
        assert (result.mode, result.rows_inserted) == ("incremental", len(rows))
        assert_matches_oracle(lakehouse, mv_id)
        storage = lakehouse.load_table(Identifier((namespace,), "mv__storage"))
        summary = storage.current_snapshot().summary  # type: ignore[union-attr]
        assert summary is not None
        written = "spark" if len(rows) > 2 else "driver"
        assert summary.additional_properties["icemv.storage-write"] == written
        assert ("spark.app.id" in summary.additional_properties) == (written == "spark")


EXACT_CASE = pa.schema(
    [
        pa.field("Id", pa.int64()),
        pa.field("Vendor Name", pa.string()),
        pa.field("Fare", pa.float64()),
    ]
)
EXACT_CASE_SHAPES = {
    "filter": "SELECT Id, `Vendor Name`, Fare FROM {table} WHERE Fare > 5 OR Fare IS NULL",
    "count-sum": (
        "SELECT `Vendor Name` AS `Vendor`, count(*) AS N, sum(Fare) AS `Sum Fare` "
        "FROM {table} GROUP BY `Vendor Name`"
    ),
    "min-max": (
        "SELECT `Vendor Name`, min(Fare) AS Lo, max(Fare) AS Hi FROM {table} GROUP BY `Vendor Name`"
    ),
    "self-join": (
        "SELECT a.Id AS A_Id, b.Id AS `B Id` FROM {table} a JOIN {table} b "
        "ON a.`Vendor Name` = b.`Vendor Name` AND a.Id < b.Id"
    ),
}

EXACT_CASE_COLUMNS = {
    "filter": ["Id", "Vendor Name", "Fare"],
    "count-sum": ["Vendor", "N", "Sum Fare"],
    "min-max": ["Vendor Name", "Lo", "Hi"],
    "self-join": ["A_Id", "B Id"],
}


@pytest.mark.parametrize("shape", sorted(EXACT_CASE_SHAPES))
@pytest.mark.parametrize(
    ("table_name", "storage_writes"),
    [("MixedTbl", "driver"), ("Mixed Tbl", "driver"), ("MixedTbl", "spark")],
)
def test_exact_case_names_refresh_incrementally(
    lakehouse: Lakehouse, namespace: str, shape: str, table_name: str, storage_writes: str
) -> None:
    """Issue 12 item 11: catalog names are case-sensitive; a table and columns with upper
    case and spaces keep their exact names through change reads, delta SQL and patches."""
    if storage_writes == "spark":
        lakehouse = spark_writes_only(lakehouse)
    source = Identifier((namespace,), table_name)
    rows = [(1, "a", 10.0), (2, "a", 10.0), (3, "B", None), (4, None, 7.5), (5, "B", 2.5)]
    table = lakehouse.catalog.create_table(
        source.as_tuple(), schema=EXACT_CASE, properties={"format-version": "2"}
    )
    table.append(
        pa.Table.from_pylist(
            [dict(zip(EXACT_CASE.names, r, strict=True)) for r in rows], schema=EXACT_CASE
        )
    )
    with table.transaction() as tx:
        tx.set_properties({f"write.{op}.mode": "merge-on-read" for op in ("delete", "update")})
    quoted = f"{namespace}.`{table_name}`"
    mv_id = Identifier((namespace,), "mv")
    sql = EXACT_CASE_SHAPES[shape].format(table=quoted)
    create_mv(lakehouse, mv_id, sql, properties={"icemv.refresh-policy": "incremental-strict"})
    assert refresh_mv(lakehouse, mv_id).mode == "full"
    spark, name = lakehouse.spark, lakehouse.quoted(source)
    operations = [
        lambda: lakehouse.load_table(source).append(
            pa.Table.from_pylist(
                [
                    {"Id": 6, "Vendor Name": "a", "Fare": 9.0},
                    {"Id": 7, "Vendor Name": "B", "Fare": 1.0},
                ],
                schema=EXACT_CASE,
            )
        ),
        lambda: spark.sql(f"DELETE FROM {name} WHERE Id IN (2, 4)"),
        lambda: spark.sql(f"UPDATE {name} SET Fare = Fare + 1, `Vendor Name` = 'B' WHERE Id = 1"),
    ]
    for operation in operations:
        operation()
        result = refresh_mv(lakehouse, mv_id)
        assert result.mode == "incremental", result
        assert_matches_oracle(lakehouse, mv_id)
    storage = lakehouse.load_table(mv_id.storage_default())
    assert StorageLayout.of(storage).view_columns == tuple(EXACT_CASE_COLUMNS[shape])


class _CountingLakehouse(Lakehouse):
    """Counts catalog table loads by name (each is a JDBC query plus a metadata read)."""

    def __init__(self, lakehouse: Lakehouse) -> None:
        super().__init__(lakehouse.config)
        self.loads: Counter[Identifier] = Counter()

    def load_table(self, identifier: Identifier) -> Table:
        self.loads[identifier] += 1
        return super().load_table(identifier)


def test_a_refresh_loads_each_table_once(lakehouse: Lakehouse, namespace: str) -> None:
    """One plan per refresh: freshness, analysis, pinning and classification share the
    loads (they used to load each source about four times and the storage table three)."""
    counting = _CountingLakehouse(lakehouse)
    create_trips(counting, namespace, rows=ROWS)
    create_trips(counting, namespace, name="zones", rows=ROWS)
    mv_id = Identifier((namespace,), "mv")
    sql = (
        "SELECT t.vendor, count(*) AS n, sum(t.fare) AS s FROM trips t "
        "JOIN zones z ON t.id = z.id GROUP BY t.vendor"
    )
    create_mv(counting, mv_id, sql, properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(counting, mv_id)
    append_trips(counting, namespace, [(6, "a", 10.0, D1)])
    counting.loads.clear()
    result = refresh_mv(counting, mv_id)
    assert (result.mode, result.storage_snapshot_id is not None) == ("incremental", True)
    tables = [Identifier((namespace,), n) for n in ("trips", "zones", "mv__storage")]
    if counting.backend.locate([]) is None:  # REST: each loaded by name, once
        assert counting.loads == Counter(dict.fromkeys(tables, 1))
    else:  # JDBC: what the last refresh read, asked for in one query (refresh_reads)
        assert counting.loads == Counter()
        forget_reads(mv_id)  # without a last refresh to go by: each by name, once
        append_trips(counting, namespace, [(7, "b", 11.0, D1)])
        counting.loads.clear()
        assert refresh_mv(counting, mv_id).mode == "incremental"
        assert counting.loads == Counter(dict.fromkeys(tables, 1))
    assert_matches_oracle(lakehouse, mv_id)


def test_an_aggregate_no_group_of_which_changes_keeps_its_files(
    lakehouse: Lakehouse, namespace: str
) -> None:
    """An append the view's WHERE filters out changes no group: the refresh records the
    new source snapshots and leaves the storage's data files as they are."""
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "mv")
    sql = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips WHERE fare > 5 GROUP BY vendor"
    create_mv(lakehouse, mv_id, sql, properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, mv_id)
    storage = lakehouse.load_table(Identifier((namespace,), "mv__storage"))
    files = sorted(task.file.file_path for task in storage.scan().plan_files())
    append_trips(lakehouse, namespace, [(6, "a", 1.0, D1), (7, None, None, D2)])
    result = refresh_mv(lakehouse, mv_id)
    assert (result.mode, result.engine) == ("incremental", "duckdb"), result
    assert (result.rows_inserted, result.rows_deleted) == (0, 0)
    storage = lakehouse.load_table(Identifier((namespace,), "mv__storage"))
    assert result.storage_snapshot_id == storage.metadata.current_snapshot_id
    assert sorted(task.file.file_path for task in storage.scan().plan_files()) == files
    assert_matches_oracle(lakehouse, mv_id)
    append_trips(lakehouse, namespace, [(8, "a", 9.0, D1)])  # and a change still merges
    assert refresh_mv(lakehouse, mv_id).rows_inserted == 1
    assert_matches_oracle(lakehouse, mv_id)
