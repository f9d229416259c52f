"""The embedded engine's joins (refresh/embedded/route.py holds the unchanged tables): appends,
deletes and updates (merge-on-read position deletes, copy-on-write rewrites) of a fact table
joined with an
unchanged dimension refresh without a Spark job, equal to the view SQL evaluated by Spark
at the recorded snapshots: NULL join keys on both sides, duplicate dimension keys, fact
rows no dimension row matches (LEFT JOIN), under a filter and under a merged GROUP BY. A
dimension with equality deletes is read whole by icemv; one larger than the limit or a
patch over the driver's limit go to Spark."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.embedded.reads import shared_cache
from tests.conftest import CATALOG_KINDS
from tests.support.embedded import appends_embedded, refresh_by, refreshed_mv
from tests.support.oracle import storage_and_oracle
from tests.support.tables import SAMPLE_TRIPS, append_trips, create_trips, equality_delete

pytestmark = [pytest.mark.spark, pytest.mark.postgres, CATALOG_KINDS]

D1, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 3)
VENDORS = pa.schema(
    [pa.field("vendor", pa.string()), pa.field("label", pa.string()), pa.field("rank", pa.int32())]
)
# "b" twice (its fact rows double), a NULL key (matches nothing), no "d" or "e".
DIMENSION = [("a", "A", 1), ("b", "B1", 2), ("b", "B2", 3), (None, "nobody", 4), ("c", None, 5)]
# Each append: a matched key, a duplicated key, NULL keys, keys no dimension row has.
APPENDS: list[list[tuple[Any, ...]]] = [
    [(6, "a", 1.0, D1), (7, "b", None, D3), (8, None, 2.0, D1), (9, "d", 3.0, D3)],
    [(10, "b", 100.0, D1), (11, "c", 4.25, D3), (12, "e", -3.0, D1), (13, None, None, D3)],
]
INNER = (
    "SELECT t.id, t.fare * 2 AS fare2, v.label, v.rank FROM trips t "
    "JOIN vendors v ON t.vendor = v.vendor WHERE v.rank < 5"
)
LEFT = (
    "SELECT t.id, t.vendor, v.label FROM trips t LEFT JOIN vendors v "
    "ON t.vendor = v.vendor AND v.rank > 1"
)
LEFT_AGGREGATE = (
    "SELECT v.label, t.day, count(*) AS n, sum(t.fare) AS total, avg(t.fare) AS mean "
    "FROM trips t LEFT JOIN vendors v ON t.vendor = v.vendor GROUP BY v.label, t.day"
)
INNER_AGGREGATE = (
    "SELECT v.rank, count(*) AS n, max(t.id) AS last_id FROM trips t "
    "JOIN vendors v ON v.vendor = t.vendor GROUP BY v.rank"
)


def _tables(lakehouse: Lakehouse, namespace: str, write_mode: str | None = None) -> Any:
    """trips (written by pyiceberg; or by Spark with deletes and updates `write_mode`) and
    the vendors dimension."""
    if write_mode is None:
        create_trips(lakehouse, namespace, rows=SAMPLE_TRIPS)
    else:
        _spark_trips(lakehouse, namespace, write_mode)
    vendors = lakehouse.catalog.create_table(
        (namespace, "vendors"), schema=VENDORS, properties={"format-version": "2"}
    )
    vendors.append(_vendors(DIMENSION))
    return vendors


def _spark_trips(lakehouse: Lakehouse, namespace: str, write_mode: str) -> str:
    """40 rows in one small data file (copy-on-write rewrites it whole, within the row
    limits): vendors a, b (two dimension rows), c, d (no dimension row) and NULL by turns."""
    name = lakehouse.quoted(Identifier((namespace,), "trips"))
    modes = ", ".join(f"'write.{op}.mode' = '{write_mode}'" for op in ("delete", "update"))
    lakehouse.spark.sql(
        f"CREATE TABLE {name} (id BIGINT, vendor STRING, fare DOUBLE, day DATE) USING iceberg "
        f"TBLPROPERTIES ('format-version' = '2', {modes})"
    )
    lakehouse.spark.sql(
        f"INSERT INTO {name} SELECT /*+ COALESCE(1) */ id, "
        "element_at(array('a', 'b', 'c', 'd', NULL), CAST(id % 5 AS INT) + 1), "
        "CASE WHEN id % 11 = 0 THEN NULL ELSE CAST(id AS DOUBLE) / 4 END, "
        "date_add(DATE'2024-01-01', CAST(id % 2 AS INT)) FROM range(40)"
    )
    return name


def _vendors(rows: list[tuple[Any, ...]]) -> pa.Table:
    return pa.Table.from_pylist(
        [dict(zip(VENDORS.names, r, strict=True)) for r in rows], schema=VENDORS
    )


@pytest.mark.parametrize(
    "sql",
    [INNER, LEFT, LEFT_AGGREGATE, INNER_AGGREGATE],
    ids=["inner", "left", "left-aggregate", "inner-aggregate"],
)
def test_appends_joined_with_an_unchanged_dimension_refresh_in_arrow(
    lakehouse: Lakehouse, namespace: str, sql: str
) -> None:
    _tables(lakehouse, namespace)
    mv = refreshed_mv(lakehouse, namespace, "v", sql)
    appends_embedded(lakehouse, namespace, mv, APPENDS)
    actual, _ = storage_and_oracle(lakehouse, mv)
    if sql == LEFT:  # unmatched and NULL-key fact rows are kept, padded
        assert (9, "d", None) in actual and (13, None, None) in actual
        assert (7, "b", "B1") in actual and (7, "b", "B2") in actual


@pytest.mark.parametrize("sql", [LEFT, LEFT_AGGREGATE], ids=["left", "left-aggregate"])
def test_a_dimension_moved_with_the_fact_refreshes_on_duckdb(
    lakehouse: Lakehouse, namespace: str, sql: str
) -> None:
    """Both tables moved in one range: each delta term reads the other table whole, at its
    new snapshot before its own occurrence and at its old one after (sql/delta.py)."""
    vendors = _tables(lakehouse, namespace)
    mv = refreshed_mv(lakehouse, namespace, "v", sql)
    # Appends to both: a new key for fact rows already padded (d), a second row for a.
    append_trips(lakehouse, namespace, APPENDS[0])
    vendors.append(_vendors([("d", "D", 6), ("a", "A2", 7)]))
    result = refresh_by(lakehouse, mv, "duckdb")
    assert result.source_rows_read == len(APPENDS[0]) + 2
    # Deletes on both: equality deletes on the dimension (b's rows and the NULL key) and
    # on the fact, with rows appended to the fact in the same range.
    append_trips(lakehouse, namespace, APPENDS[1])
    equality_delete(lakehouse, namespace, "vendor", ["b", None], name="vendors")
    equality_delete(lakehouse, namespace, "id", [6, 11])
    refresh_by(lakehouse, mv, "duckdb")
    if sql == LEFT:  # 7 lost both its b rows: padded now; 9 found d
        actual, _ = storage_and_oracle(lakehouse, mv)
        assert (7, "b", None) in actual and (9, "d", "D") in actual


def test_a_large_dimension_goes_to_spark(lakehouse: Lakehouse, namespace: str) -> None:
    vendors = _tables(lakehouse, namespace)
    mv = refreshed_mv(lakehouse, namespace, "v", LEFT_AGGREGATE)
    # A dimension above refresh.embedded_join_max_rows.
    config = lakehouse.config
    small = config.model_copy(
        update={"refresh": config.refresh.model_copy(update={"embedded_join_max_rows": 3})}
    )
    append_trips(lakehouse, namespace, APPENDS[1])
    result = refresh_by(Lakehouse(small), mv, "spark")
    assert "embedded_join_max_rows" in (result.engine_reason or "")
    # Both moved and the dimension still too large: Spark's delta terms, still exact.
    append_trips(lakehouse, namespace, APPENDS[0])
    vendors.append(_vendors([("d", "D", 6), ("a", "A2", 7)]))
    result = refresh_by(Lakehouse(small), mv, "spark")
    assert "embedded_join_max_rows" in (result.engine_reason or "")
    # Back under the default limit: DuckDB again.
    append_trips(lakehouse, namespace, [(14, "d", 9.0, D1), (15, "a", 1.0, D3)])
    refresh_by(lakehouse, mv, "duckdb")


def test_mvs_share_the_dimension_read(lakehouse: Lakehouse, namespace: str) -> None:
    """Two MVs joining the same dimension columns at the same snapshot read it once."""
    _tables(lakehouse, namespace)
    first = refreshed_mv(lakehouse, namespace, "first", INNER_AGGREGATE)
    second = refreshed_mv(lakehouse, namespace, "second", INNER_AGGREGATE.replace("max(", "min("))
    cache = shared_cache(lakehouse.config.refresh.embedded_cache_bytes)
    before = cache.tables_read
    append_trips(lakehouse, namespace, APPENDS[0])
    refresh_by(lakehouse, first, "duckdb")
    refresh_by(lakehouse, second, "duckdb")
    assert cache.tables_read - before == 1


def test_a_dimension_with_equality_deletes_is_read_by_icemv(
    lakehouse: Lakehouse, namespace: str
) -> None:
    """Equality deletes in the dimension (pyiceberg's scan refuses them): icemv reads it
    whole and applies them, NULL keys included, deletes on two columns too."""
    _tables(lakehouse, namespace)
    mv = refreshed_mv(lakehouse, namespace, "v", INNER)
    equality_delete(lakehouse, namespace, "vendor", ["b", None], name="vendors")
    append_trips(lakehouse, namespace, APPENDS[0])
    refresh_by(lakehouse, mv, "duckdb")  # both moved: each delta term reads the other whole
    append_trips(lakehouse, namespace, APPENDS[1])
    refresh_by(lakehouse, mv, "duckdb")  # only trips moved: the dimension read whole
    equality_delete(lakehouse, namespace, "rank", [1], name="vendors")
    refresh_by(lakehouse, mv, "duckdb")  # only the dimension moved: its change read
    append_trips(lakehouse, namespace, [(14, "c", 2.0, D1), (15, "a", 1.0, D3)])
    refresh_by(lakehouse, mv, "duckdb")  # read whole under deletes on two columns


# Under deletes MIN / MAX recompute their groups (Spark): COUNT and SUM here.
INNER_AGGREGATE_DELETES = (
    "SELECT v.rank, count(*) AS n, sum(t.fare) AS total, count(t.fare) AS nf FROM trips t "
    "JOIN vendors v ON v.vendor = t.vendor GROUP BY v.rank"
)
# Each step deletes or rewrites rows of a matched key (a), a duplicated key (b: two rows
# each), a NULL key and a key no dimension row has (d: padded under LEFT JOIN).
STEPS = [
    ["DELETE FROM {t} WHERE id IN (0, 1, 3, 4, 6)"],
    ["UPDATE {t} SET vendor = 'b', fare = fare + 1 WHERE id IN (5, 8, 9, 12)"],
    ["UPDATE {t} SET vendor = NULL, fare = NULL WHERE id IN (11, 13, 15)"],
    [  # rows appended and deleted within one range never count
        "INSERT INTO {t} VALUES (100, 'b', 1.5, DATE'2024-01-01'), "
        "(101, NULL, 2.5, DATE'2024-01-02'), (102, 'd', 3.5, DATE'2024-01-01')",
        "DELETE FROM {t} WHERE id IN (101, 16, 19)",
    ],
    ["DELETE FROM {t} WHERE vendor IN ('c', 'a')"],  # groups go
    ["UPDATE {t} SET fare = fare WHERE id BETWEEN 20 AND 29"],  # moved rows only
]


@pytest.mark.matrix
@pytest.mark.parametrize("write_mode", ["merge-on-read", "copy-on-write"])
def test_deletes_and_updates_joined_with_an_unchanged_dimension_refresh_in_arrow(
    lakehouse: Lakehouse, namespace: str, write_mode: str
) -> None:
    """The delta of `dtrips JOIN vendors`: the signed change rows joined, each keeping its
    weight, merged into the aggregates and removed from / added to the filter views."""
    _tables(lakehouse, namespace, write_mode)
    name = lakehouse.quoted(Identifier((namespace,), "trips"))
    views = {
        "inner_agg": INNER_AGGREGATE_DELETES,
        "left_agg": LEFT_AGGREGATE,
        "inner": INNER,
        "left": LEFT,
    }
    mvs = {alias: refreshed_mv(lakehouse, namespace, alias, sql) for alias, sql in views.items()}
    for step, statements in enumerate(STEPS):
        for statement in statements:
            lakehouse.spark.sql(statement.format(t=name))
        for mv in mvs.values():
            result = refresh_by(lakehouse, mv, "duckdb")
            assert result.engine_reason is None, (step, mv, result)
    trips = lakehouse.load_table(Identifier((namespace,), "trips"))
    deletes = {d.file_format.name for t in trips.scan().plan_files() for d in t.delete_files}
    assert deletes == ({"PARQUET"} if write_mode == "merge-on-read" else set())
    actual, _ = storage_and_oracle(lakehouse, mvs["left"])
    # b's two dimension rows, d and NULL padded; the rows deleted and updated away gone.
    assert {(21, "b", "B1"), (21, "b", "B2"), (23, "d", None), (24, None, None)} <= set(actual)
    assert (8, "b", "B2") in actual and (3, "d", None) not in actual


def test_a_patch_over_the_driver_limit_goes_to_spark(lakehouse: Lakehouse, namespace: str) -> None:
    """Two deleted rows of the duplicated key are four joined rows, a patch of four rows:
    over a driver commit limit of 3, DuckDB hands the refresh to Spark."""
    _tables(lakehouse, namespace, "merge-on-read")
    mv = refreshed_mv(lakehouse, namespace, "v", LEFT)
    config = lakehouse.config
    small = Lakehouse(
        config.model_copy(
            update={"refresh": config.refresh.model_copy(update={"driver_commit_max_rows": 3})}
        )
    )
    name = lakehouse.quoted(Identifier((namespace,), "trips"))
    small.spark.sql(f"DELETE FROM {name} WHERE id IN (1, 6)")
    result = refresh_by(small, mv, "spark")
    assert "more rows than the driver commits" in (result.engine_reason or ""), result
