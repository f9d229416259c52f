"""The embedded engine under deletes (refresh/embedded/changes.py reads, DuckDB
computes): small merge-on-read deletes and updates (position deletes read by row group)
and copy-on-write rewrites of small files refresh merged GROUP BY views and filter views
without a Spark job, equal to the view SQL at the recorded snapshots; what it refuses goes
to Spark, still correct (the same steps on Spark's change read too, format v3)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from icemv.catalog.namespaces import ensure_namespace
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.policy import refresh_mv
from tests.conftest import CATALOG_KINDS
from tests.support.embedded import refresh_by, refreshed_mv
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import equality_delete

pytestmark = [pytest.mark.spark, pytest.mark.postgres, CATALOG_KINDS]

# Aggregates whose deletes merge exactly (integer and DECIMAL sums; the floating-point
# ones recompute their groups under deletes, test_embedded_path.py).
AGGREGATE = (
    "SELECT vendor, day, count(*) AS n, count(fare) AS nf, sum(id) AS total, "
    "avg(CAST(id AS DECIMAL(20,0))) AS mean "
    "FROM trips WHERE id > 3 GROUP BY vendor, day"
)
# A global aggregate merges deletes (no groups to recompute) over exact sums: a DOUBLE
# sum (AVG's hidden one too) would lose digits to cancellation, so it recomputes, which a
# global aggregate cannot (refresh/patch/aggregate_rules.py).
GLOBAL = "SELECT count(*) AS n, sum(id) AS total, count(fare) AS fares FROM trips"
COUNT = "SELECT count(*) AS n FROM trips"  # reads no column
DUPLICATES = "SELECT vendor, day FROM trips WHERE fare > 10"  # many copies of each row
FILTER = "SELECT id, vendor, fare * 2 AS double_fare, day FROM trips WHERE fare > 10 OR id < 5"
ROWS = 200  # one data file, row groups of 10 rows


def _trips(lakehouse: Lakehouse, namespace: str, write_mode: str, version: int = 2) -> str:
    """200 rows in one data file of 10-row row groups; deletes and updates `write_mode`
    (format `version` 3: merge-on-read writes deletion vectors)."""
    name = lakehouse.quoted(Identifier((namespace,), "trips"))
    modes = ", ".join(f"'write.{op}.mode' = '{write_mode}'" for op in ("delete", "update"))
    lakehouse.spark.sql(
        f"CREATE TABLE {name} (id BIGINT, vendor STRING, fare DOUBLE, day DATE) USING iceberg "
        f"TBLPROPERTIES ('format-version' = '{version}', {modes}, "
        "'write.parquet.row-group-size-bytes' = '1', "
        "'write.parquet.row-group-check-min-record-count' = '10', "
        "'write.parquet.row-group-check-max-record-count' = '10')"
    )
    lakehouse.spark.sql(
        f"INSERT INTO {name} SELECT /*+ COALESCE(1) */ id, "
        "CASE WHEN id % 7 = 0 THEN NULL ELSE concat('v', CAST(id % 3 AS STRING)) END, "
        "CASE WHEN id % 11 = 0 THEN NULL ELSE CAST(id AS DOUBLE) / 4 END, "
        "date_add(DATE'2024-01-01', CAST(id % 2 AS INT)) "
        f"FROM range({ROWS})"
    )
    return name


def _steps(name: str, namespace: str) -> list[tuple[str, Callable[[Lakehouse], None]]]:
    def sql(*statements: str) -> Callable[[Lakehouse], None]:
        def run(lakehouse: Lakehouse) -> None:
            for statement in statements:
                lakehouse.spark.sql(statement)

        return run

    def equality(*values: str | None, then: str | None = None) -> Callable[[Lakehouse], None]:
        def run(lakehouse: Lakehouse) -> None:
            equality_delete(lakehouse, namespace, "vendor", list(values))
            if then is not None:
                lakehouse.spark.sql(then)

        return run

    return [
        ("delete", sql(f"DELETE FROM {name} WHERE id BETWEEN 50 AND 59")),
        ("update", sql(f"UPDATE {name} SET fare = fare + 1, vendor = 'z' WHERE id IN (101, 102)")),
        # Overlaps the first delete: positions deleted before the range count once.
        ("second delete", sql(f"DELETE FROM {name} WHERE id BETWEEN 55 AND 64")),
        # As Flink upserts write; later steps read the file with these deletes applied.
        ("equality delete", equality("v2")),
        (
            "equality delete of NULL keys, then a delete",
            equality(None, then=f"DELETE FROM {name} WHERE id BETWEEN 70 AND 76"),
        ),
        # Rows appended and deleted within one range never count.
        (
            "append then delete",
            sql(
                f"INSERT INTO {name} VALUES (1000, 'v1', 2.0, DATE'2024-01-01'), "
                "(1001, 'v9', 3.0, DATE'2024-01-01'), (1002, 'v1', NULL, DATE'2024-01-02')",
                f"DELETE FROM {name} WHERE id IN (1001, 150)",
            ),
        ),
        # Every row of some groups: they go.
        ("groups gone", sql(f"DELETE FROM {name} WHERE vendor = 'z' OR id = 1002")),
        ("update unchanged", sql(f"UPDATE {name} SET fare = fare WHERE id BETWEEN 20 AND 24")),
    ]


@pytest.mark.matrix
@pytest.mark.parametrize(
    ("write_mode", "version", "engine"),
    [
        ("merge-on-read", 2, "duckdb"),
        ("copy-on-write", 2, "duckdb"),
        ("merge-on-read", 3, "duckdb"),
        ("merge-on-read", 3, "spark"),
    ],
    ids=["merge-on-read", "copy-on-write", "deletion-vectors", "deletion-vectors-on-spark"],
)
def test_deletes_and_updates_refresh_incrementally(
    lakehouse: Lakehouse, namespace: str, write_mode: str, version: int, engine: str
) -> None:
    if engine == "spark":  # the embedded engine off: Spark's change read (scan task sets)
        lakehouse = _limited(lakehouse, embedded_max_rows=0)
    name = _trips(lakehouse, namespace, write_mode, version)
    mvs = [
        refreshed_mv(lakehouse, namespace, "agg", AGGREGATE),
        refreshed_mv(lakehouse, namespace, "one", GLOBAL),
        refreshed_mv(lakehouse, namespace, "filter", FILTER),
        refreshed_mv(lakehouse, namespace, "count", COUNT),
        refreshed_mv(lakehouse, namespace, "dups", DUPLICATES),
    ]
    for step, apply in _steps(name, namespace):
        apply(lakehouse)
        if step == "delete":  # the delete files are what the case is about
            position_deletes = "PUFFIN" if version == 3 else "PARQUET"
            expected = {position_deletes} if write_mode == "merge-on-read" else set()
            assert _delete_formats(lakehouse, namespace) == expected
        for mv in mvs:
            result = refresh_by(lakehouse, mv, engine)
            assert (result.engine_reason is None) == (engine == "duckdb"), (step, result)
            if engine == "duckdb" and write_mode == "merge-on-read" and step in (
                "delete", "second delete"
            ):  # fmt: skip
                # Only the row groups holding the deleted positions are read.
                assert result.source_rows_read is not None
                assert 0 < result.source_rows_read <= 30, (step, result.source_rows_read)


def _delete_formats(lakehouse: Lakehouse, namespace: str) -> set[str]:
    table = lakehouse.load_table(Identifier((namespace,), "trips"))
    return {d.file_format.name for t in table.scan().plan_files() for d in t.delete_files}


@pytest.mark.parametrize(
    ("sql", "change", "reason"),
    [
        (
            "SELECT fare, count(*) AS n FROM trips GROUP BY fare",
            "delete",
            "a double group key",
        ),
        # Equality deletes on a double column are not pushed down.
        (AGGREGATE, "equality", "equality delete"),
    ],
    ids=["double-key-under-delete", "equality-delete-on-a-double"],
)
def test_refused_deletes_go_to_spark(
    lakehouse: Lakehouse, namespace: str, sql: str, change: str, reason: str
) -> None:
    name = _trips(lakehouse, namespace, "merge-on-read")
    mv = refreshed_mv(lakehouse, namespace, "v", sql)
    if change == "equality":
        equality_delete(lakehouse, namespace, "fare", [2.5])
    else:
        lakehouse.spark.sql(f"DELETE FROM {name} WHERE id BETWEEN 30 AND 40")
    result = refresh_by(lakehouse, mv, "spark")
    assert result.engine_reason is not None and reason in result.engine_reason, result
    if change == "equality":  # it stays live: later ranges go to Spark too, still correct
        lakehouse.spark.sql(f"DELETE FROM {name} WHERE id BETWEEN 30 AND 40")
        result = refresh_by(lakehouse, mv, "spark")
        assert "equality delete" in (result.engine_reason or ""), result


def test_the_row_limit_counts_deleted_rows(lakehouse: Lakehouse, namespace: str) -> None:
    name = _trips(lakehouse, namespace, "merge-on-read")
    mv = refreshed_mv(lakehouse, namespace, "v", AGGREGATE)
    config = lakehouse.config
    small = Lakehouse(
        config.model_copy(
            update={"refresh": config.refresh.model_copy(update={"embedded_max_rows": 5})}
        )
    )
    small.spark.sql(f"DELETE FROM {name} WHERE id BETWEEN 30 AND 40")
    result = refresh_by(small, mv, "spark")
    assert result.engine_reason is not None and "11 changed rows > 5" in result.engine_reason


def _limited(lakehouse: Lakehouse, **limits: int) -> Lakehouse:
    config = lakehouse.config
    refresh = config.refresh.model_copy(update=limits)
    return Lakehouse(config.model_copy(update={"refresh": refresh}))


def test_the_row_limit_counts_rows_that_changed(lakehouse: Lakehouse, namespace: str) -> None:
    """`refresh.embedded_max_rows` bounds the rows that changed, not what the snapshot
    summaries count: a copy-on-write rewrite's unchanged rows cancel (trimmed in file
    order), and a merge-on-read delete file that repeats its data file's earlier positions
    counts only the new ones."""
    rewritten = _trips(lakehouse, namespace, "copy-on-write")
    mv = refreshed_mv(lakehouse, namespace, "rewritten", AGGREGATE)
    rows = refreshed_mv(lakehouse, namespace, "rewritten_rows", FILTER)
    small = _limited(lakehouse, embedded_max_rows=20)  # 11 + 2 x 4 rows change first
    small.spark.sql(f"DELETE FROM {rewritten} WHERE id BETWEEN 30 AND 40")  # 200 -> 189 rows
    small.spark.sql(f"UPDATE {rewritten} SET fare = fare + 1 WHERE id BETWEEN 90 AND 93")
    for view in (mv, rows):
        result = refresh_by(small, view, "duckdb")  # checks the oracle too
        assert result.rows_deleted is not None and result.rows_deleted > 0, result
    small.spark.sql(f"UPDATE {rewritten} SET fare = fare + 1 WHERE id BETWEEN 100 AND 120")
    result = refresh_by(small, mv, "spark")  # 2 x 20 changed (id 110: NULL fare, as it was)
    assert "40 changed rows > 20" in (result.engine_reason or ""), result

    other = f"{namespace}_mor"
    ensure_namespace(lakehouse.catalog, (other,))
    repeated = _trips(lakehouse, other, "merge-on-read")
    mv = refreshed_mv(lakehouse, other, "repeated", AGGREGATE)
    for low in (30, 50, 70):  # each delete file holds the file's earlier positions too
        small.spark.sql(f"DELETE FROM {repeated} WHERE id BETWEEN {low} AND {low + 9}")
        refresh_by(small, mv, "duckdb")


def test_the_read_limit_sends_large_rewrites_to_spark(lakehouse: Lakehouse, namespace: str) -> None:
    name = _trips(lakehouse, namespace, "copy-on-write")
    mv = refreshed_mv(lakehouse, namespace, "v", AGGREGATE)
    small = _limited(lakehouse, embedded_read_max_rows=300)
    small.spark.sql(f"DELETE FROM {name} WHERE id = 7")  # reads 200 + 199 rows
    result = refresh_by(small, mv, "spark")
    assert "refresh.embedded_read_max_rows" in (result.engine_reason or ""), result


def test_auto_recomputes_when_the_arrow_path_refuses_once_reading(
    lakehouse: Lakehouse, namespace: str
) -> None:
    """`auto` kept the refresh incremental only for the Arrow read (Spark's change read of
    the rewritten file costs more than a full recompute): when the embedded engine then refuses
    (more rows changed than its limit), the refresh recomputes fully, not by Spark's
    dearer change read."""
    name = _trips(lakehouse, namespace, "copy-on-write")
    mv = refreshed_mv(lakehouse, namespace, "v", AGGREGATE, "auto")
    small = _limited(lakehouse, embedded_max_rows=5)
    small.spark.sql(f"DELETE FROM {name} WHERE id BETWEEN 30 AND 40")  # 11 rows
    result = refresh_mv(small, mv)
    assert (result.mode, result.reason) == ("full", "delta-too-large"), result
    assert_matches_oracle(small, mv)


def test_auto_weighs_the_arrow_read(lakehouse: Lakehouse, namespace: str) -> None:
    """A 10-row delete from the one 200-row file: Spark's change read (the whole file) is
    dearer than a full recompute, the embedded engine's (the row groups holding the
    positions) is not, so `auto` refreshes incrementally where the embedded engine takes
    the view (one whose group key is a DOUBLE, which it refuses, goes full)."""
    name = _trips(lakehouse, namespace, "merge-on-read")
    taken = refreshed_mv(lakehouse, namespace, "taken", AGGREGATE, "auto")
    by_fare = "SELECT fare, count(*) AS n FROM trips GROUP BY fare"
    refused = refreshed_mv(lakehouse, namespace, "refused", by_fare, "auto")
    lakehouse.spark.sql(f"DELETE FROM {name} WHERE id BETWEEN 30 AND 39")
    result = refresh_by(lakehouse, taken, "duckdb")
    assert result.reason == "source-changed"
    result = refresh_mv(lakehouse, refused)
    assert (result.mode, result.reason) == ("full", "delta-too-large"), result
    assert_matches_oracle(lakehouse, refused)


def test_a_file_rewritten_again_is_decoded_once_per_where(
    lakehouse: Lakehouse, namespace: str
) -> None:
    """Copy-on-write rewrites of one file: the file a rewrite removes is the one the last
    rewrite added, whose kept rows were read then, so only the added file is decoded. The
    kept rows are the WHERE's own: a view with another WHERE reads its own, still exact."""
    name = _trips(lakehouse, namespace, "copy-on-write")
    sql = "SELECT id, vendor, fare FROM trips WHERE fare {} 20"
    cheap = refreshed_mv(lakehouse, namespace, "cheap", sql.format("<"))
    dear = refreshed_mv(lakehouse, namespace, "dear", sql.format(">="))
    lakehouse.spark.sql(f"DELETE FROM {name} WHERE id BETWEEN 50 AND 59")
    for mv in (cheap, dear):  # the removed file and the added one
        assert refresh_by(lakehouse, mv, "duckdb").source_rows_read == ROWS + ROWS - 10
    lakehouse.spark.sql(f"UPDATE {name} SET fare = 19 WHERE id BETWEEN 100 AND 104")
    for mv in (cheap, dear):  # the added file only
        assert refresh_by(lakehouse, mv, "duckdb").source_rows_read == ROWS - 10
