"""Refreshes of top-N, NOT IN and UNION views on a real catalog: which changes are written
incrementally, which write nothing, and which recompute, with the reason recorded."""

from __future__ import annotations

import datetime as dt

import pytest

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.explain import explain, render_explain
from icemv.mv.lifecycle import create_mv
from icemv.mv.model import load_materialized_view
from icemv.refresh.policy import refresh_mv
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

D1 = dt.date(2024, 1, 1)
ROWS = [(1, "a", 10.0, D1), (2, "a", 8.0, D1), (3, "b", 6.0, D1), (4, "b", 4.0, D1)]


def _mv(lakehouse: Lakehouse, namespace: str, name: str, sql: str) -> Identifier:
    mv = Identifier((namespace,), name)
    create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental"})
    assert refresh_mv(lakehouse, mv).mode == "full"
    return mv


def _over_two_tables(
    lakehouse: Lakehouse, namespace: str, zone: tuple[int, str], sql: str
) -> Identifier:
    """`trips` (ROWS) and `zones` (one row), and an MV of `sql` over them, refreshed."""
    create_trips(lakehouse, namespace, rows=ROWS)
    create_trips(lakehouse, namespace, name="zones", rows=[(*zone, None, None)])
    return _mv(lakehouse, namespace, "v", sql)


def _refresh(
    lakehouse: Lakehouse, mv: Identifier, engines: set[str] | None = None
) -> tuple[str, str]:
    result = refresh_mv(lakehouse, mv)
    assert_matches_oracle(lakehouse, mv)
    if engines is not None and result.mode != "full":
        engines.add(f"{result.engine}: {result.engine_reason}".rstrip(": "))
    return str(result.mode), result.reason


# The order key's type: DOUBLE (the reach test on Spark: DuckDB may order -0.0 and 0.0
# apart) or DECIMAL (on DuckDB, over the stored rows it holds).
TOP_N_KEYS = {"DOUBLE": "spark: ORDER BY a floating-point", "DECIMAL(6, 2)": "duckdb"}


@pytest.mark.parametrize("fare", sorted(TOP_N_KEYS))
def test_top_n_writes_nothing_until_a_changed_row_reaches_it(
    lakehouse: Lakehouse, namespace: str, fare: str
) -> None:
    trips = lakehouse.quoted(Identifier((namespace,), "trips"))
    lakehouse.spark.sql(
        f"CREATE TABLE {trips} (id BIGINT, vendor STRING, fare {fare}) USING iceberg "
        "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
        "'write.update.mode' = 'merge-on-read')"
    )

    def change(sql: str) -> None:
        lakehouse.spark.sql(sql.format(trips=trips))

    change("INSERT INTO {trips} VALUES (1, 'a', 10), (2, 'a', 8), (3, 'b', 6), (4, 'b', 4)")
    mv = _mv(
        lakehouse,
        namespace,
        "top2",
        "SELECT id, fare FROM trips WHERE vendor IS NOT NULL ORDER BY fare DESC, id LIMIT 2",
    )
    text = render_explain(explain(lakehouse, load_materialized_view(lakehouse, mv)))
    assert "top-n (ORDER BY `fare` DESC, `id` LIMIT 2)" in text, text
    engines: set[str] = set()
    change("INSERT INTO {trips} VALUES (5, 'a', 1), (6, NULL, 99)")  # 99 is filtered out
    assert _refresh(lakehouse, mv, engines) == ("no-op", "top-n-unreached")
    change("INSERT INTO {trips} VALUES (2, 'b', 8)")  # ties the 2nd row
    assert _refresh(lakehouse, mv, engines) == ("full", "top-n-reached")
    change("INSERT INTO {trips} VALUES (8, 'b', 20)")
    assert _refresh(lakehouse, mv, engines) == ("full", "top-n-reached")
    change("DELETE FROM {trips} WHERE id = 3")  # 6: after the 2nd row
    assert _refresh(lakehouse, mv, engines) == ("no-op", "top-n-unreached")
    change("UPDATE {trips} SET fare = 5.5 WHERE id = 4")  # 4 -> 5.5
    assert _refresh(lakehouse, mv, engines) == ("no-op", "top-n-unreached")
    change("INSERT INTO {trips} VALUES (9, NULL, 30), (10, 'c', NULL)")  # NULLs sort last
    assert _refresh(lakehouse, mv, engines) == ("no-op", "top-n-unreached")
    change("DELETE FROM {trips} WHERE id = 1")  # the 2nd row (10)
    assert _refresh(lakehouse, mv, engines) == ("full", "top-n-reached")
    assert len(engines) == 1 and next(iter(engines)).startswith(TOP_N_KEYS[fare]), engines


def test_not_in_is_linear_in_the_outer_table_and_recomputes_for_the_subquery_table(
    lakehouse: Lakehouse, namespace: str
) -> None:
    mv = _over_two_tables(
        lakehouse,
        namespace,
        (1, "z"),
        "SELECT id, vendor FROM trips WHERE id NOT IN (SELECT id FROM zones)",
    )
    append_trips(lakehouse, namespace, [(1, "c", 1.0, D1), (9, "c", 1.0, D1)])
    assert _refresh(lakehouse, mv) == ("incremental", "source-changed")
    append_trips(lakehouse, namespace, [(None, "z", None, None)], name="zones")
    assert _refresh(lakehouse, mv) == ("full", "subquery-source-changed")  # now empty
    append_trips(lakehouse, namespace, [(None, "c", 1.0, D1)])
    assert _refresh(lakehouse, mv) == ("incremental", "source-changed")


def test_union_deletes_a_row_with_its_last_copy(lakehouse: Lakehouse, namespace: str) -> None:
    mv = _over_two_tables(
        lakehouse, namespace, (1, "a"), "SELECT vendor FROM trips UNION SELECT vendor FROM zones"
    )
    zones = lakehouse.quoted(Identifier((namespace,), "zones"))
    trips = lakehouse.quoted(Identifier((namespace,), "trips"))
    lakehouse.spark.sql(f"DELETE FROM {trips} WHERE vendor = 'a'")  # 'a' still in zones
    assert _refresh(lakehouse, mv) == ("incremental", "source-changed")
    lakehouse.spark.sql(f"DELETE FROM {zones} WHERE vendor = 'a'")
    assert _refresh(lakehouse, mv) == ("incremental", "source-changed")
    storage = load_materialized_view(lakehouse, mv).storage
    rows = lakehouse.spark.sql(f"SELECT * FROM {lakehouse.quoted(storage)}").collect()
    assert [tuple(r) for r in rows] == [("b", 2)]  # the view's column, then _icemv_rows
