"""Fallbacks to full refresh carry the right reason and never a wrong result; maintenance."""

from __future__ import annotations

import datetime as dt

import pytest

from icemv.errors import RefreshFailedError
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.freshness import assess_freshness
from icemv.mv.history import latest_refresh
from icemv.mv.lifecycle import create_mv
from icemv.mv.maintenance import compact_storage
from icemv.mv.model import load_materialized_view
from icemv.refresh.policy import refresh_mv
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

D1 = dt.date(2024, 1, 1)
ROWS = [(1, "a", 10.0, D1), (2, "b", 5.0, D1), (3, "a", None, D1)]
SQL = "SELECT vendor, count(*) AS n, count(fare) AS nf FROM trips GROUP BY vendor"


def _setup(lakehouse: Lakehouse, namespace: str, policy: str = "incremental") -> Identifier:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = Identifier((namespace,), "agg")
    create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": policy})
    assert refresh_mv(lakehouse, mv).reason == "never-refreshed"
    return mv


def _call(lakehouse: Lakehouse, procedure: str, namespace: str, args: str) -> None:
    lakehouse.spark.sql(f"CALL `lake`.system.{procedure}(table => '{namespace}.trips', {args})")


def test_rollback_of_a_source_means_full_refresh(lakehouse: Lakehouse, namespace: str) -> None:
    mv = _setup(lakehouse, namespace)
    before = lakehouse.load_table(Identifier((namespace,), "trips")).current_snapshot()
    assert before is not None
    append_trips(lakehouse, namespace, [(4, "c", 1.0, D1)])
    assert refresh_mv(lakehouse, mv).mode == "incremental"
    _call(lakehouse, "rollback_to_snapshot", namespace, f"snapshot_id => {before.snapshot_id}")
    append_trips(lakehouse, namespace, [(5, "d", 1.0, D1)])  # diverge from the recorded branch
    result = refresh_mv(lakehouse, mv)
    assert (result.mode, result.reason) == ("full", "source-rolled-back")
    assert_matches_oracle(lakehouse, mv)


def test_expired_history_means_full_refresh(lakehouse: Lakehouse, namespace: str) -> None:
    mv = _setup(lakehouse, namespace)
    append_trips(lakehouse, namespace, [(4, "c", 1.0, D1)])
    last = append_trips(lakehouse, namespace, [(5, "c", 2.0, D1)])
    now = lakehouse.spark.sql("SELECT current_timestamp() + INTERVAL 1 SECOND").first()[0]  # type: ignore[index]
    _call(
        lakehouse,
        "expire_snapshots",
        namespace,
        f"older_than => TIMESTAMP '{now}', retain_last => 1",
    )
    trips = lakehouse.load_table(Identifier((namespace,), "trips"))
    assert [s.snapshot_id for s in trips.snapshots()] == [last]
    result = refresh_mv(lakehouse, mv)
    assert (result.mode, result.reason) == ("full", "source-history-lost")
    assert_matches_oracle(lakehouse, mv)


def test_recreated_source_and_strict_policy(lakehouse: Lakehouse, namespace: str) -> None:
    mv = _setup(lakehouse, namespace, policy="incremental-strict")
    lakehouse.catalog.drop_table((namespace, "trips"))
    create_trips(lakehouse, namespace, rows=ROWS[:1])
    state = assess_freshness(lakehouse, load_materialized_view(lakehouse, mv))
    assert (state.state, state.reason) == ("invalid", "source-replaced")
    with pytest.raises(RefreshFailedError, match="incremental-strict"):
        refresh_mv(lakehouse, mv)
    storage = lakehouse.load_table(Identifier((namespace,), "agg__storage"))
    assert len(storage.snapshots()) == 1  # nothing committed


def test_auto_policy_recomputes_large_deltas(lakehouse: Lakehouse, namespace: str) -> None:
    mv = _setup(lakehouse, namespace, policy="auto")
    append_trips(lakehouse, namespace, [(i, "z", 1.0, D1) for i in range(10, 20)])
    result = refresh_mv(lakehouse, mv)
    assert (result.mode, result.reason) == ("full", "delta-too-large")
    assert_matches_oracle(lakehouse, mv)
    full = Identifier((namespace,), "always_full")
    create_mv(lakehouse, full, SQL, properties={"icemv.refresh-policy": "full"})
    refresh_mv(lakehouse, full)
    append_trips(lakehouse, namespace, [(30, "z", 1.0, D1)])
    assert refresh_mv(lakehouse, full).reason == "policy-full"


def test_compaction_keeps_freshness_and_increments(lakehouse: Lakehouse, namespace: str) -> None:
    mv = _setup(lakehouse, namespace)
    for i in range(3):
        append_trips(lakehouse, namespace, [(10 + i, "a", 1.0, D1)])
        refresh_mv(lakehouse, mv)
    storage_id = Identifier((namespace,), "agg__storage")
    record = latest_refresh(lakehouse.load_table(storage_id))
    keep_one = lakehouse.config.maintenance.model_copy(update={"keep_snapshots": 1})
    result = compact_storage(lakehouse, load_materialized_view(lakehouse, mv), keep_one)
    assert result.snapshots_after < result.snapshots_before
    compacted = lakehouse.load_table(storage_id)
    assert latest_refresh(compacted) == record
    assert assess_freshness(lakehouse, load_materialized_view(lakehouse, mv)).state == "fresh"
    append_trips(lakehouse, namespace, [(20, "b", 1.0, D1)])
    assert refresh_mv(lakehouse, mv).mode == "incremental"
    assert_matches_oracle(lakehouse, mv)


def test_mv_over_mv_is_incremental(lakehouse: Lakehouse, namespace: str) -> None:
    inner = _setup(lakehouse, namespace)
    outer = Identifier((namespace,), "top")
    create_mv(
        lakehouse, outer, "SELECT vendor, n FROM agg WHERE n > 1",
        properties={"icemv.refresh-policy": "incremental"},
    )  # fmt: skip
    refresh_mv(lakehouse, outer)
    append_trips(lakehouse, namespace, [(4, "b", 1.0, D1), (5, "c", 1.0, D1)])
    assert refresh_mv(lakehouse, inner).mode == "incremental"
    result = refresh_mv(lakehouse, outer)
    assert result.mode == "incremental"
    assert {s.name for s in result.sources} == {"agg", "agg__storage"}
    assert_matches_oracle(lakehouse, outer)


def test_sum_turns_null_when_its_last_value_is_deleted(
    lakehouse: Lakehouse, namespace: str
) -> None:
    create_trips(
        lakehouse, namespace, rows=[(1, "a", 2.5, D1), (2, "a", None, D1), (3, "b", 4.0, D1)]
    )
    mv = Identifier((namespace,), "sums")
    create_mv(
        lakehouse, mv, "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor",
        properties={"icemv.refresh-policy": "incremental"},
    )  # fmt: skip
    refresh_mv(lakehouse, mv)
    trips = lakehouse.quoted(Identifier((namespace,), "trips"))
    lakehouse.spark.sql(f"DELETE FROM {trips} WHERE id = 1")  # group a: only a NULL fare left
    assert refresh_mv(lakehouse, mv).mode == "incremental"
    assert_matches_oracle(lakehouse, mv)
    rows = {r.vendor: r.s for r in lakehouse.spark.table(lakehouse.quoted(mv)).collect()}
    assert rows == {"a": None, "b": 4.0}
    lakehouse.spark.sql(f"DELETE FROM {trips} WHERE id = 3")  # group b disappears
    lakehouse.spark.sql(f"UPDATE {trips} SET fare = fare + 1 WHERE id = 2")
    assert refresh_mv(lakehouse, mv).mode == "incremental"
    assert_matches_oracle(lakehouse, mv)
