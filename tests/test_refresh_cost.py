"""Policy `auto` weighs the change read against a full recompute (refresh/cost.py).

200k rows in 4 data files, written and deleted from by pyiceberg (copy-on-write): a
100-row delete rewrites one file and stays incremental; a 0.1 % delete scattered over
every file rewrites them all: Spark's change read would cost more than a full recompute
(so a view only Spark refreshes recomputes); the embedded engine's may not, and when it
refuses once reading, the refresh recomputes rather than take Spark's read. A view whose
touched groups are recomputed (MIN under deletes) reads every source whole on Spark
besides the change: past the embedded engine's tables, it recomputes fully at once.
"""

from __future__ import annotations

import datetime as dt

import pytest
from pyiceberg.expressions import In, LessThan

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.refresh.policy import refresh_mv
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import create_trips, trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

FILES, FILE_ROWS = 4, 50_000
D1 = dt.date(2024, 1, 1)
VIEWS = {
    "per_vendor": (
        "SELECT vendor, count(*) AS n, sum(CAST(fare AS DECIMAL(9, 2))) AS s FROM trips "
        "WHERE day >= DATE'2024-01-01' GROUP BY vendor"
    ),  # a DECIMAL sum merges deletes (a DOUBLE one recomputes its groups)
    "dear": "SELECT id, vendor, fare FROM trips WHERE fare > 90",
    # MIN under deletes recomputes its groups: on Spark from the whole table (200k rows
    # are past refresh.embedded_join_max_rows for the embedded engine, set to 100k here).
    "recomputed": "SELECT vendor, min(fare) AS lo FROM trips GROUP BY vendor",
}


def test_auto_weighs_the_change_read_against_a_full_recompute(
    lakehouse: Lakehouse, namespace: str
) -> None:
    config = lakehouse.config
    refresh = config.refresh.model_copy(update={"embedded_join_max_rows": 100_000})
    lakehouse = Lakehouse(config.model_copy(update={"refresh": refresh}))
    table = create_trips(lakehouse, namespace)
    for start in range(0, FILES * FILE_ROWS, FILE_ROWS):
        ids = range(start, start + FILE_ROWS)
        table.append(trips([(i, "abc"[i % 3], float(i % 100), D1) for i in ids]))
    mvs = [Identifier((namespace,), name) for name in VIEWS]
    for mv, sql in zip(mvs, VIEWS.values(), strict=True):
        create_mv(lakehouse, mv, sql)  # policy auto, the default
        assert refresh_mv(lakehouse, mv).reason == "never-refreshed"

    source = lakehouse.load_table(Identifier((namespace,), "trips"))
    source.delete(LessThan("id", 100))  # rewrites the first file: 50k rows out, 49,900 in
    for mv in mvs:
        result = refresh_mv(lakehouse, mv)
        if mv.name == "recomputed":  # the change read is small; the groups' read is not
            assert (result.mode, result.reason) == ("full", "delta-too-large"), result
            assert "reads every source" in (result.fallback_detail or ""), result
        else:
            assert (result.mode, result.reason) == ("incremental", "source-changed"), result
        assert_matches_oracle(lakehouse, mv)

    source = lakehouse.load_table(Identifier((namespace,), "trips"))
    scattered = list(range(100 + 7, FILES * FILE_ROWS, 1_000))  # 0.1 %, in every file
    source.delete(In("id", scattered))
    for mv in mvs:
        result = refresh_mv(lakehouse, mv)
        if mv.name == "recomputed":
            assert (result.mode, result.reason) == ("full", "delta-too-large"), result
        elif result.mode == "incremental":  # the Arrow read (400k rows at its share)
            assert result.engine == "duckdb", result  # never Spark's dearer read
        assert_matches_oracle(lakehouse, mv)
