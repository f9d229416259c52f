"""The Arrow path (refresh/patch/arrow_route.py): small appends to one source refresh
filter and merged GROUP BY views without a Spark job, equal to the view SQL evaluated by
Spark at the recorded snapshots; what Arrow cannot do as Spark does goes to Spark."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pytest

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.changes.arrow_reads import shared_cache
from icemv.refresh.policy import refresh_mv
from tests.conftest import CATALOG_KINDS
from tests.support.arrow import appends_in_arrow, refresh_by, refreshed_mv
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
def test_appends_refresh_in_arrow(lakehouse: Lakehouse, namespace: str, sql: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = refreshed_mv(lakehouse, namespace, "v", sql)
    appends_in_arrow(lakehouse, namespace, mv, APPENDS)
    # Two appends in one refresh: the range is both snapshots' rows.
    append_trips(lakehouse, namespace, [(15, "a", 3.0, D1)])
    append_trips(lakehouse, namespace, [(16, "e", 6.0, D3), (17, "a", None, D1)])
    assert refresh_by(lakehouse, mv, "arrow").source_rows_read == 3


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT id, upper(vendor) AS v FROM trips WHERE fare > 5", "Upper"),
        ("SELECT vendor, sum(fare) AS s FROM trips WHERE fare % 2 = 0 GROUP BY vendor", "Mod"),
        ("SELECT vendor, min(vendor) AS first FROM trips GROUP BY vendor", "MIN of"),
        ("SELECT fare, count(*) AS n FROM trips GROUP BY fare", "group key"),
    ],
    ids=["function", "modulo", "string-min", "double-key"],
)
def test_outside_the_subset_spark_computes(
    lakehouse: Lakehouse, namespace: str, sql: str, reason: str
) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = refreshed_mv(lakehouse, namespace, "v", sql)
    for rows in APPENDS[:2]:
        append_trips(lakehouse, namespace, rows)
        result = refresh_by(lakehouse, mv, "spark")
        assert result.engine_reason is not None and reason in result.engine_reason


def _nan_free(rows: Counter[Any]) -> Counter[Any]:
    """NaN as a marker: NaN != NaN, but Spark's MAX and ours must both give it."""
    return Counter({tuple("NaN" if v != v else v for v in row): n for row, n in rows.items()})


def test_nan_under_max_falls_back_while_reading(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = refreshed_mv(
        lakehouse, namespace, "v", "SELECT vendor, max(fare) AS hi FROM trips GROUP BY vendor"
    )
    steps = [([(20, "a", float("nan"), D1)], "spark"), ([(21, "b", 1.0, D1)], "arrow")]
    for rows, engine in steps:
        append_trips(lakehouse, namespace, rows)
        result = refresh_mv(lakehouse, mv)
        assert (result.mode, result.engine) == ("incremental", engine), result
        assert engine == "arrow" or "NaN" in (result.engine_reason or "")
        actual, expected = storage_and_oracle(lakehouse, mv)
        assert _nan_free(actual) == _nan_free(expected)
        assert ("a", "NaN") in _nan_free(actual)


def test_deletes_and_the_switch_go_to_spark(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = refreshed_mv(lakehouse, namespace, "v", AGGREGATE)
    trips = lakehouse.quoted(Identifier((namespace,), "trips"))
    lakehouse.spark.sql(f"DELETE FROM {trips} WHERE id = 1")
    result = refresh_by(lakehouse, mv, "spark")  # MIN / MAX under deletes (test_arrow_deletes.py)
    assert result.engine_reason is not None and "recomputed" in result.engine_reason
    config = lakehouse.config
    off = config.model_copy(
        update={"refresh": config.refresh.model_copy(update={"arrow_max_rows": 0})}
    )
    append_trips(lakehouse, namespace, APPENDS[0])
    result = refresh_by(Lakehouse(off), mv, "spark")
    assert result.engine_reason is not None and "arrow path off" in result.engine_reason
    small = config.model_copy(
        update={"refresh": config.refresh.model_copy(update={"arrow_max_rows": 2})}
    )
    append_trips(lakehouse, namespace, APPENDS[1])
    result = refresh_by(Lakehouse(small), mv, "spark")
    assert result.engine_reason is not None and "changed rows > 2" in result.engine_reason


def test_mvs_share_each_appended_file(lakehouse: Lakehouse, namespace: str) -> None:
    """Three MVs, two of them a snapshot behind: each appended file is read once."""
    create_trips(lakehouse, namespace, rows=ROWS)
    early = refreshed_mv(lakehouse, namespace, "early", FILTER)
    late = [refreshed_mv(lakehouse, namespace, f"late{i}", AGGREGATE) for i in range(2)]
    cache = shared_cache(lakehouse.config.refresh.arrow_cache_bytes)
    before = cache.files_read
    append_trips(lakehouse, namespace, APPENDS[0])
    refresh_by(lakehouse, early, "arrow")
    append_trips(lakehouse, namespace, APPENDS[1])
    refresh_by(lakehouse, early, "arrow")
    for mv in late:  # both snapshots' rows: the union of what `early` read
        assert refresh_by(lakehouse, mv, "arrow").source_rows_read == len(APPENDS[0]) + len(
            APPENDS[1]
        )
    assert cache.files_read - before == 2
