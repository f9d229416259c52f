"""GROUPING SETS / ROLLUP / CUBE kept incrementally (a union of groupings, the hidden
grouping id): NULL keys beside rolled-up ones, over an outer join (affected keys), with
HAVING and GROUPING_ID() in the output, each view's refreshes alternating between the two
write paths; each refresh is incremental and matches the view SQL at the recorded
snapshots. The oracle matrix has a CUBE shape."""

from __future__ import annotations

import datetime as dt

import pytest

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.layout import StorageLayout
from icemv.mv.lifecycle import create_mv
from icemv.mv.model import load_materialized_view
from icemv.refresh.policy import refresh_mv
from icemv.sql.state import GROUPING
from tests.support.oracle import assert_matches_oracle, spark_writes_only
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
VIEWS = {
    "rollup_join": (
        "SELECT t.vendor, z.vendor AS zone, count(*) AS n, sum(t.fare) AS s "
        "FROM trips t LEFT JOIN zones z ON t.id = z.id GROUP BY ROLLUP(t.vendor, z.vendor)"
    ),
    "sets_having": (
        "SELECT vendor, day, grouping_id() AS g, count(*) AS n, max(fare) AS hi FROM trips "
        "GROUP BY GROUPING SETS ((vendor, day), (day), ()) HAVING count(*) > 1"
    ),
    "with_cube": "SELECT vendor, day, sum(fare) AS s FROM trips GROUP BY vendor, day WITH CUBE",
}


def test_grouping_sets_refresh_incrementally(lakehouse: Lakehouse, namespace: str) -> None:
    writers = [lakehouse, spark_writes_only(lakehouse)]  # patches from the driver, by Spark
    create_trips(
        lakehouse, namespace, rows=[(1, "a", 1.0, D1), (2, None, 2.5, D1), (3, "b", 4.0, D2)]
    )
    create_trips(
        lakehouse, namespace, name="zones", rows=[(1, "x", None, None), (3, None, None, None)]
    )
    mvs = []
    for name, sql in VIEWS.items():
        mv = Identifier((namespace,), name)
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental-strict"})
        assert refresh_mv(lakehouse, mv).mode == "full"
        assert_matches_oracle(lakehouse, mv)
        storage = lakehouse.load_table(load_materialized_view(lakehouse, mv).storage)
        assert GROUPING in StorageLayout.of(storage).state_columns
        mvs.append(mv)
    trips = lakehouse.quoted(Identifier((namespace,), "trips"))
    zones = lakehouse.quoted(Identifier((namespace,), "zones"))
    changes = [
        (
            "trips",
            lambda: append_trips(lakehouse, namespace, [(4, None, 3.0, D2), (1, "a", None, D1)]),
        ),
        ("trips", lambda: lakehouse.spark.sql(f"DELETE FROM {trips} WHERE id = 2")),
        ("zones", lambda: lakehouse.spark.sql(f"UPDATE {zones} SET vendor = 'y' WHERE id = 3")),
        ("trips", lambda: lakehouse.spark.sql(f"UPDATE {trips} SET vendor = NULL WHERE id = 3")),
    ]
    for step, (table, change) in enumerate(changes):
        change()
        for index, (mv, sql) in enumerate(zip(mvs, VIEWS.values(), strict=True)):
            result = refresh_mv(writers[(index + step) % 2], mv)
            reads = f"FROM {table}" in sql or f"JOIN {table}" in sql
            assert result.mode == ("incremental" if reads else "skipped"), (mv, result)
            assert_matches_oracle(lakehouse, mv)
