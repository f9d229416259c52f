"""The embedded engine (refresh/embedded/route.py, DuckDB): small appends to one source refresh
filter and merged GROUP BY views without a Spark job, equal to the view SQL evaluated by
Spark at the recorded snapshots, DECIMAL money and timestamps bucketed by day or hour
included; what DuckDB does not compute as Spark does goes to Spark, with the reason."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pytest

from icemv.engine.semantics import ANSI_KEY
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.embedded import route
from icemv.refresh.embedded.reads import shared_cache
from icemv.refresh.policy import refresh_mv
from tests.conftest import CATALOG_KINDS
from tests.support.embedded import appends_embedded, refresh_by, refreshed_mv
from tests.support.oracle import storage_and_oracle
from tests.support.tables import SAMPLE_TRIPS, append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres, CATALOG_KINDS]

D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)
ROWS = SAMPLE_TRIPS
# Each append: new groups, NULL keys, NULL arguments, groups whose only fares were NULL.
APPENDS: list[list[tuple[Any, ...]]] = [
    [(6, "a", 1.0, D1), (7, "c", None, D3), (8, None, None, D2)],
    [(9, "b", 100.0, D1), (10, "c", 4.25, D3), (11, "d", -3.0, D2), (12, "a", None, D1)],
    [(13, None, 8.0, D2), (14, "c", 0.0, D3)],
]
FILTER = (
    "SELECT id, vendor, fare * 2 AS double_fare, CASE WHEN fare > 10 THEN 'high' ELSE 'low' "
    "END AS band, day, -id % 4 AS bucket FROM trips WHERE (fare > 5 OR fare IS NULL) "
    "AND id NOT IN (2, 12) AND id % 7 <> 3 AND day >= '2024-01-01'"
)
AGGREGATE = (
    "SELECT vendor, day, count(*) AS n, count(fare) AS nf, sum(fare) AS total, "
    "avg(fare) AS mean, min(fare) AS lo, max(fare) AS hi, max(id) AS last_id, "
    "sum(coalesce(fare, 0) + id) AS mixed "
    "FROM trips WHERE id > 0 GROUP BY vendor, day"
)
GLOBAL = "SELECT count(*) AS n, sum(fare) AS total, avg(fare) AS mean FROM trips"


@pytest.mark.parametrize("sql", [FILTER, AGGREGATE, GLOBAL], ids=["filter", "aggregate", "global"])
def test_appends_refresh_on_duckdb(lakehouse: Lakehouse, namespace: str, sql: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = refreshed_mv(lakehouse, namespace, "v", sql)
    appends_embedded(lakehouse, namespace, mv, APPENDS)
    # Two appends in one refresh: the range is both snapshots' rows.
    append_trips(lakehouse, namespace, [(15, "a", 3.0, D1)])
    append_trips(lakehouse, namespace, [(16, "e", 6.0, D3), (17, "a", None, D1)])
    assert refresh_by(lakehouse, mv, "duckdb").source_rows_read == 3


SALES = (
    "id INT, vendor STRING, amount DECIMAL(12,2), rate DECIMAL(7,4), ts TIMESTAMP",
    [
        "(1, 'acme', 120.50, 0.0825, TIMESTAMP'2024-03-10 06:59:59')",
        "(2, 'acme', 99.99, 0.0825, TIMESTAMP'2024-03-10 07:00:00')",
        "(3, 'bolt', 0.01, 0.1000, TIMESTAMP'2024-03-11 23:30:00')",
        "(4, NULL, NULL, NULL, NULL)",
    ],
)
SALES_APPENDS = [
    "(5, 'acme', 1000000.00, 0.0001, TIMESTAMP'2024-03-10 07:15:00'), "
    "(6, 'cole', -5.55, 0.5000, TIMESTAMP'2024-03-12 00:00:00')",
    "(7, 'bolt', 33.33, 0.3333, TIMESTAMP'2024-03-11 23:59:59.999999'), (8, 'acme', NULL, "
    "0.0825, TIMESTAMP'2024-03-10 06:00:00')",
]
REAL_TYPES = {
    "by-day": (
        "SELECT CAST(ts AS DATE) AS day, vendor, count(*) AS n, sum(amount) AS total, "
        "avg(amount) AS mean, sum(amount * rate) AS tax, max(amount) AS top "
        "FROM sales GROUP BY CAST(ts AS DATE), vendor"
    ),
    "by-hour": (
        "SELECT date_trunc('HOUR', ts) AS hour, count(*) AS n, sum(amount) AS total "
        "FROM sales GROUP BY date_trunc('HOUR', ts)"
    ),
    "distinct": (  # its groups recomputed over the touched vendors
        "SELECT vendor, sum(DISTINCT amount) AS spent, count(DISTINCT rate) AS rates "
        "FROM sales GROUP BY vendor"
    ),
    "wide-product": (  # DECIMAL(43, 22) in Spark's rules: rounded to DECIMAL(38, 17)
        "SELECT vendor, sum(amount * CAST(rate AS DECIMAL(30, 20))) AS taxed, "
        "count(*) AS n FROM sales GROUP BY vendor"
    ),
    "sequence": (  # counting down where id % 3 > 1, INT elements
        "SELECT id, q, vendor FROM sales LATERAL VIEW explode(sequence(id % 3, 1)) e AS q"
    ),
    "cube": (  # grouping sets: groups of every set touched recomputed, GROUPING TINYINT
        "SELECT CAST(ts AS DATE) AS day, vendor, sum(amount) AS total, count(*) AS n, "
        "grouping(vendor) AS gv FROM sales GROUP BY CUBE(CAST(ts AS DATE), vendor)"
    ),
    "any-value": (  # of what the group decides (no engine defines which row's otherwise)
        "SELECT vendor, any_value(upper(vendor)) AS label, count(*) AS n FROM sales GROUP BY vendor"
    ),
    "posexplode-outer": (  # a row of NULLs for a NULL array (a NULL vendor), positions from 0
        "SELECT id, p, q, amount FROM sales "
        "LATERAL VIEW OUTER posexplode(sequence(length(vendor), 4)) e AS p, q"
    ),
    "filter": (
        "SELECT id, upper(vendor) AS v, amount * 2 AS doubled, substr(vendor, 1, 2) AS code, "
        "concat(vendor, '-', CAST(id AS STRING)) AS label FROM sales "
        "WHERE amount > 10.00 AND vendor LIKE 'a%' OR ts >= '2024-03-11'"
    ),
}


def _sales(lakehouse: Lakehouse, namespace: str) -> str:
    name = lakehouse.quoted(Identifier((namespace,), "sales"))
    columns, rows = SALES
    lakehouse.spark.sql(f"CREATE TABLE {name} ({columns}) USING iceberg")
    lakehouse.spark.sql(f"INSERT INTO {name} VALUES {', '.join(rows)}")
    return name


@pytest.mark.parametrize("shape", list(REAL_TYPES))
def test_decimal_money_and_timestamps_refresh_on_duckdb(
    lakehouse: Lakehouse, namespace: str, shape: str
) -> None:
    """A DECIMAL sum, a `CAST(ts AS DATE)` and an hour bucket, SUM(DISTINCT) of a DECIMAL,
    string functions: DuckDB."""
    sales = _sales(lakehouse, namespace)
    mv = refreshed_mv(lakehouse, namespace, "v", REAL_TYPES[shape])
    for rows in SALES_APPENDS:
        lakehouse.spark.sql(f"INSERT INTO {sales} VALUES {rows}")
        assert refresh_by(lakehouse, mv, "duckdb").engine_reason is None


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT fare, count(*) AS n FROM trips GROUP BY fare", "group key"),
        ("SELECT id, CAST(vendor AS DOUBLE) AS v FROM trips", "CAST from string"),
        ("SELECT id, substr(vendor, 0, 1) AS v FROM trips", "SUBSTR"),
        ("SELECT id, sign(fare) AS s FROM trips", "sign of double"),
        ("SELECT id, concat(vendor, id) AS v FROM trips", "CONCAT of non-strings"),
    ],
    ids=["double-key", "string-cast", "substr-0", "sign", "concat-int"],
)
def test_what_duckdb_computes_otherwise_goes_to_spark(
    lakehouse: Lakehouse, namespace: str, sql: str, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated: list[str] = []

    def counting(plan: Any, relations: Any) -> None:
        gated.append(plan.base.mv.sql)
        original(plan, relations)

    original = getattr(route, "_gated")  # noqa: B009
    monkeypatch.setattr(route, "_gated", counting)
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = refreshed_mv(lakehouse, namespace, "v", sql)
    for rows in APPENDS[:2]:
        append_trips(lakehouse, namespace, rows)
        result = refresh_by(lakehouse, mv, "spark")
        assert result.engine_reason is not None and reason in result.engine_reason
    # The route's answer for a view and its sources' types is kept: asked once, not per
    # refresh (each test has a namespace of its own, part of what the answer is kept by).
    assert gated.count(sql) == 1


def test_non_ascii_case_mapping_goes_to_spark_once_read(
    lakehouse: Lakehouse, namespace: str
) -> None:
    """upper() agrees on ASCII: other text raises in DuckDB, and Spark computes it."""
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = refreshed_mv(lakehouse, namespace, "v", "SELECT id, upper(vendor) AS v FROM trips")
    append_trips(lakehouse, namespace, [(30, "ab", 1.0, D1)])
    refresh_by(lakehouse, mv, "duckdb")
    append_trips(lakehouse, namespace, [(31, "straße", 1.0, D1)])
    result = refresh_by(lakehouse, mv, "spark")
    assert "case mapping" in (result.engine_reason or "")


def _nan_free(rows: Counter[Any]) -> Counter[Any]:
    """NaN as a marker: NaN != NaN, but Spark's MAX and DuckDB's must both give it."""
    return Counter({tuple("NaN" if v != v else v for v in row): n for row, n in rows.items()})


def test_nan_under_max_is_the_largest_on_both_engines(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = refreshed_mv(
        lakehouse, namespace, "v", "SELECT vendor, max(fare) AS hi FROM trips GROUP BY vendor"
    )
    for rows in ([(20, "a", float("nan"), D1)], [(21, "a", 1.0, D1)]):
        append_trips(lakehouse, namespace, rows)
        result = refresh_mv(lakehouse, mv)
        assert (result.mode, result.engine) == ("incremental", "duckdb"), result
        actual, expected = storage_and_oracle(lakehouse, mv)
        assert _nan_free(actual) == _nan_free(expected)
        assert ("a", "NaN") in _nan_free(actual)


def test_recomputed_groups_and_the_switches(lakehouse: Lakehouse, namespace: str) -> None:
    """MIN / MAX under deletes recompute the touched groups from the source, read whole at
    its new snapshot by the embedded engine while it is small; past the limit, Spark."""
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = refreshed_mv(lakehouse, namespace, "v", AGGREGATE)
    trips = lakehouse.quoted(Identifier((namespace,), "trips"))
    lakehouse.spark.sql(f"DELETE FROM {trips} WHERE id = 1")
    refresh_by(lakehouse, mv, "duckdb")
    config = lakehouse.config
    narrow = config.model_copy(
        update={"refresh": config.refresh.model_copy(update={"embedded_join_max_rows": 2})}
    )
    lakehouse.spark.sql(f"DELETE FROM {trips} WHERE id = 2")
    result = refresh_by(Lakehouse(narrow), mv, "spark")
    assert result.engine_reason is not None and "embedded_join_max_rows" in result.engine_reason
    off = config.model_copy(
        update={"refresh": config.refresh.model_copy(update={"embedded_max_rows": 0})}
    )
    append_trips(lakehouse, namespace, APPENDS[0])
    result = refresh_by(Lakehouse(off), mv, "spark")
    assert result.engine_reason is not None and "embedded engine off" in result.engine_reason
    small = config.model_copy(
        update={"refresh": config.refresh.model_copy(update={"embedded_max_rows": 2})}
    )
    append_trips(lakehouse, namespace, APPENDS[1])
    result = refresh_by(Lakehouse(small), mv, "spark")
    assert result.engine_reason is not None and "changed rows > 2" in result.engine_reason


def test_a_session_in_ansi_mode_leaves_every_delta_to_spark(
    lakehouse: Lakehouse, namespace: str
) -> None:
    """ANSI mode set outside icemv's config (here on the running session, as
    spark-defaults.conf or spark-submit's --conf would set it: tests/test_cli_output.py)
    is read from the session: the delta goes to Spark, which raises where DuckDB would
    answer; once it is off again, to DuckDB."""
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = refreshed_mv(lakehouse, namespace, "v", AGGREGATE)
    spark = lakehouse.spark
    spark.conf.set(ANSI_KEY, "true")
    try:
        append_trips(lakehouse, namespace, APPENDS[0])
        result = refresh_by(Lakehouse(lakehouse.config), mv, "spark")
        assert result.engine_reason is not None
        assert "spark.sql.ansi.enabled is true" in result.engine_reason
    finally:
        spark.conf.unset(ANSI_KEY)
    append_trips(lakehouse, namespace, APPENDS[1])
    refresh_by(Lakehouse(lakehouse.config), mv, "duckdb")


def test_mvs_share_each_appended_file(lakehouse: Lakehouse, namespace: str) -> None:
    """Three MVs, two of them a snapshot behind: each appended file is read once."""
    create_trips(lakehouse, namespace, rows=ROWS)
    early = refreshed_mv(lakehouse, namespace, "early", FILTER)
    late = [refreshed_mv(lakehouse, namespace, f"late{i}", AGGREGATE) for i in range(2)]
    cache = shared_cache(lakehouse.config.refresh.embedded_cache_bytes)
    before = cache.files_read
    append_trips(lakehouse, namespace, APPENDS[0])
    refresh_by(lakehouse, early, "duckdb")
    append_trips(lakehouse, namespace, APPENDS[1])
    refresh_by(lakehouse, early, "duckdb")
    for mv in late:  # both snapshots' rows: the union of what `early` read
        assert refresh_by(lakehouse, mv, "duckdb").source_rows_read == len(APPENDS[0]) + len(
            APPENDS[1]
        )
    assert cache.files_read - before == 2
