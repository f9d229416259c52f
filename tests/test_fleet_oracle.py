"""A fleet of mixed MVs over one source, refreshed in rounds through the daemon's scheduler,
matches each view's SQL at the recorded snapshots after every commit, on both catalog kinds.

The fleet: a filter, an aggregate with AVG, a join with a dimension table, an MV over the
aggregate MV (refreshed as its dependent), and a second aggregate created one commit later,
so two MVs over the same source start a round from different recorded snapshots. Rounds
follow an append, then a DELETE, an UPDATE and a dimension append together.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import wait

import pyarrow as pa
import pytest

from icemv.config import Config
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.history import latest_refresh
from icemv.mv.lifecycle import create_mv
from icemv.mv.model import load_materialized_view
from icemv.refresh.result import RefreshResult
from icemv.service.daemon import Daemon
from tests.conftest import CATALOG_KINDS
from tests.support.daemon import daemon_config, is_fresh, wait_for
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres, CATALOG_KINDS]

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
ROWS = [(1, "a", 10.0, D1), (2, "b", 5.0, D1), (3, "a", 1.0, D2), (4, "c", 3.0, D2)]
REGIONS = pa.schema([pa.field("vendor", pa.string()), pa.field("region", pa.string())])
FLEET = {
    "filtered": "SELECT id, vendor, fare FROM trips WHERE fare > 2",
    "by_vendor": (
        "SELECT vendor, count(*) AS n, sum(fare) AS s, avg(fare) AS mean FROM trips GROUP BY vendor"
    ),
    "by_region": (
        "SELECT r.region, count(*) AS n, sum(t.fare) AS s FROM trips t "
        "JOIN regions r ON t.vendor = r.vendor GROUP BY r.region"
    ),
    # Over the aggregate MV: refreshed by the scheduler as a dependent of by_vendor.
    "busy_vendors": "SELECT vendor, n, mean FROM by_vendor WHERE n > 1",
}
NESTED = "busy_vendors"
# Created after a commit: it records another snapshot of trips than the others.
LATE = ("by_day", "SELECT day, count(*) AS n, avg(fare) AS mean FROM trips GROUP BY day")


def _recorded_trips_snapshot(lakehouse: Lakehouse, mv: Identifier) -> int | None:
    storage = lakehouse.load_table(load_materialized_view(lakehouse, mv).storage)
    record = latest_refresh(storage)
    assert record is not None, f"{mv} was never refreshed"
    (trips,) = [s for s in record.state.tables() if s.name == "trips"]
    return trips.snapshot_id


def _round(
    daemon: Daemon, mvs: list[Identifier], first: bool = False
) -> dict[Identifier, RefreshResult]:
    """What a poll or an event burst does: request every MV of the changed source at once
    (the nested MV follows its source MV), then wait until the whole fleet is fresh; the
    requested MVs' results."""
    lakehouse = daemon.lakehouse
    daemon.index.rebuild()
    futures = [daemon.request(mv, "poll") for mv in mvs if mv.name != NESTED]
    done, pending = wait(futures, timeout=240)
    assert not pending, "refreshes of the round did not finish"
    results = {}
    for future in done:
        result = results[future.result().mv] = future.result()
        # After the first refresh, every change is absorbed incrementally (no recompute).
        assert first or result.mode in ("incremental", "no-op"), result
    wait_for(lambda: all(is_fresh(lakehouse, mv) for mv in mvs), 120, "the fleet fresh")
    return results


def _check(lakehouse: Lakehouse, mvs: list[Identifier]) -> None:
    for mv in mvs:
        assert_matches_oracle(lakehouse, mv)


def test_a_fleet_refreshed_in_rounds_matches_its_sql_at_the_recorded_snapshots(
    lakehouse: Lakehouse, namespace: str, test_config: Config
) -> None:
    fleet_rounds(lakehouse, namespace, test_config, processes=0)


def fleet_rounds(
    lakehouse: Lakehouse, namespace: str, test_config: Config, processes: int
) -> list[RefreshResult]:
    """The rounds of the module's docstring, each checked against the oracle; every
    refresh's result."""
    trips = create_trips(lakehouse, namespace, rows=ROWS)
    with trips.transaction() as tx:  # deletes and updates as position deletes
        tx.set_properties({f"write.{op}.mode": "merge-on-read" for op in ("delete", "update")})
    regions = lakehouse.catalog.create_table(
        (namespace, "regions"), schema=REGIONS, properties={"format-version": "2"}
    )
    regions.append(pa.Table.from_pylist(
        [{"vendor": "a", "region": "north"}, {"vendor": "b", "region": "south"}], schema=REGIONS
    ))  # fmt: skip
    mvs = []
    for name, sql in FLEET.items():
        mv = Identifier((namespace,), name)
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental"})
        mvs.append(mv)
    spark = lakehouse.spark
    quoted = lakehouse.quoted(Identifier((namespace,), "trips"))
    refresh = {"max_concurrent": 2, "coalesce_seconds": 0, "processes": processes}
    results: list[RefreshResult] = []
    daemon = Daemon(
        daemon_config(test_config, refresh=refresh), lakehouse=lakehouse, on_refresh=results.append
    )
    daemon.scheduler.start()
    try:
        _round(daemon, mvs, first=True)  # full refreshes (checked elsewhere)

        append_trips(lakehouse, namespace, [(5, "b", 7.0, D1), (6, "a", 2.5, D2)])
        late = Identifier((namespace,), LATE[0])
        create_mv(lakehouse, late, LATE[1], properties={"icemv.refresh-policy": "incremental"})
        _round(daemon, [late], first=True)
        # The early MVs have not seen the append; the late one was created after it.
        by_vendor = Identifier((namespace,), "by_vendor")
        assert _recorded_trips_snapshot(lakehouse, by_vendor) != _recorded_trips_snapshot(
            lakehouse, late
        )
        mvs.append(late)

        # Two rounds: after an append; after a DELETE, an UPDATE and a dimension append
        # (one round over several snapshots of trips).
        rounds = [
            [lambda: append_trips(lakehouse, namespace, [(7, "c", 4.0, D1), (8, "a", 6.0, D2)])],
            [
                lambda: spark.sql(f"DELETE FROM {quoted} WHERE id IN (1, 4)"),
                lambda: spark.sql(
                    f"UPDATE {quoted} SET fare = fare + 1, vendor = 'b' WHERE id = 3"
                ),
                lambda: regions.append(
                    pa.Table.from_pylist([{"vendor": "c", "region": "north"}], schema=REGIONS)
                ),
            ],
        ]
        # The join's delta on DuckDB after the append, and when the dimension moved too
        # (each delta term reading the other table whole).
        by_region = Identifier((namespace,), "by_region")
        for commits in rounds:
            for commit in commits:
                commit()
            assert _round(daemon, mvs)[by_region].engine == "duckdb"
            current = lakehouse.load_table(Identifier((namespace,), "trips")).current_snapshot()
            assert current is not None
            assert _recorded_trips_snapshot(lakehouse, late) == current.snapshot_id
            assert _recorded_trips_snapshot(lakehouse, by_vendor) == current.snapshot_id
            _check(lakehouse, mvs)
    finally:
        assert daemon.scheduler.stop(60), "a refresh outlived the test"
        if daemon.workers is not None:
            daemon.workers.close()
    return results
