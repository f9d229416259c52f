"""Storage lifecycle: leftover refresh branches, snapshot expiry, unreferenced files,
refreshes over never-refreshed MVs, and sources that lose a column the MV reads."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pytest
from pyiceberg.table import Table

from icemv.errors import SourceSchemaIncompatibleError
from icemv.format.refresh_state import REFRESH_STATE_KEY
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.freshness import assess_freshness
from icemv.mv.history import latest_refresh, refresh_history
from icemv.mv.layout import StorageLayout
from icemv.mv.lifecycle import create_mv
from icemv.mv.maintenance import compact_storage, maintain_storage
from icemv.mv.maintenance.branches import private_branches
from icemv.mv.model import load_materialized_view
from icemv.mv.report import mv_report
from icemv.refresh.policy import refresh_mv
from icemv.service.metrics import Metrics
from icemv.service.source_index import IndexSnapshot, dependency_order
from tests.support.oracle import assert_matches_oracle, spark_writes_only
from tests.support.tables import append_trips, create_trips

D1 = dt.date(2024, 1, 1)
ROWS = [(1, "a", 10.0, D1), (2, "b", 5.0, D1), (3, "a", None, D1)]
SQL = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor"


def with_maintenance(lakehouse: Lakehouse, **settings: Any) -> Lakehouse:
    config = lakehouse.config
    maintenance = config.maintenance.model_copy(update=settings)
    return Lakehouse(config.model_copy(update={"maintenance": maintenance}))


def _mv(lakehouse: Lakehouse, namespace: str, name: str = "agg", sql: str = SQL) -> Identifier:
    identifier = Identifier((namespace,), name)
    create_mv(lakehouse, identifier, sql, properties={"icemv.refresh-policy": "incremental"})
    return identifier


def _leave_branches(lakehouse: Lakehouse, storage: Identifier) -> None:
    """What killed refreshes leave: one branch never written, one written, unpublished."""
    table = lakehouse.load_table(storage)
    head = table.current_snapshot()
    assert head is not None
    with table.manage_snapshots() as snapshots:
        snapshots.create_branch(head.snapshot_id, "icemv_unwritten")
        snapshots.create_branch(head.snapshot_id, "icemv_written")
    state = ", 1" * len(StorageLayout.of(table).state_columns)  # SUM's count of inputs
    lakehouse.spark.sql(
        f"INSERT INTO {lakehouse.quoted(storage)}.`branch_icemv_written` SELECT 'zz', 1, 1.0{state}"
    )


def _local_files(table: Table) -> set[str]:
    root = table.location().removeprefix("file://").removeprefix("file:")
    return {str(p) for p in Path(root).rglob("*") if p.is_file()}


# ---- pure logic -----------------------------------------------------------------------


def test_dependency_order_puts_sources_first() -> None:
    a, b, c = (Identifier(("n",), name) for name in ("c_top", "b_mid", "a_base"))
    snapshot = IndexSnapshot(
        mvs=cast(Any, {a: None, b: None, c: None}),
        dependents={c: frozenset({b}), b: frozenset({a})},
    )
    assert dependency_order(snapshot) == [c, b, a]


# ---- item 2: leftover private branches --------------------------------------------------


@pytest.mark.spark
@pytest.mark.postgres
def test_next_refresh_removes_leftover_branches(lakehouse: Lakehouse, namespace: str) -> None:
    spark_path = spark_writes_only(lakehouse)
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace)
    refresh_mv(spark_path, mv)
    storage = Identifier((namespace,), "agg__storage")
    _leave_branches(lakehouse, storage)
    assert len(private_branches(lakehouse.load_table(storage))) == 2

    # Young branches may belong to a refresh running elsewhere: the default age keeps them.
    append_trips(lakehouse, namespace, [(4, "c", 1.0, D1)])
    refresh_mv(spark_path, mv)
    assert len(private_branches(lakehouse.load_table(storage))) == 2

    append_trips(lakehouse, namespace, [(5, "c", 2.0, D1)])
    result = refresh_mv(with_maintenance(spark_path, branch_min_age_seconds=0), mv)
    assert result.mode == "incremental"
    assert private_branches(lakehouse.load_table(storage)) == []
    assert_matches_oracle(lakehouse, mv)


@pytest.mark.spark
@pytest.mark.postgres
def test_compact_removes_branches_and_expires(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace)
    refresh_mv(lakehouse, mv)
    for i in range(6):
        append_trips(lakehouse, namespace, [(10 + i, "a", 1.0, D1)])
        refresh_mv(lakehouse, mv)
    storage = Identifier((namespace,), "agg__storage")
    _leave_branches(lakehouse, storage)
    record = latest_refresh(lakehouse.load_table(storage))
    quick = with_maintenance(
        lakehouse, branch_min_age_seconds=0, keep_snapshots=3, orphan_file_age_seconds=0
    )
    result = compact_storage(quick, load_materialized_view(lakehouse, mv))
    assert sorted(result.branches_removed) == ["icemv_unwritten", "icemv_written"]
    table = lakehouse.load_table(storage)
    assert private_branches(table) == []
    assert len(refresh_history(table)) == 3
    assert latest_refresh(table) == record
    assert result.snapshots_after < result.snapshots_before
    assert assess_freshness(lakehouse, load_materialized_view(lakehouse, mv)).state == "fresh"
    append_trips(lakehouse, namespace, [(20, "b", 1.0, D1)])
    assert refresh_mv(lakehouse, mv).mode == "incremental"
    assert_matches_oracle(lakehouse, mv)


# ---- item 3: expiry and unreferenced files ----------------------------------------------


@pytest.mark.spark
@pytest.mark.postgres
def test_upkeep_bounds_snapshots_and_deletes_only_garbage(
    lakehouse: Lakehouse, namespace: str
) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace)
    refresh_mv(lakehouse, mv)
    for i in range(12):
        append_trips(lakehouse, namespace, [(10 + i, "abc"[i % 3], float(i), D1)])
        refresh_mv(lakehouse, mv)
    storage = Identifier((namespace,), "agg__storage")
    files_before = _local_files(lakehouse.load_table(storage))
    config = lakehouse.config.maintenance.model_copy(
        update={"keep_snapshots": 4, "orphan_file_age_seconds": 0}
    )
    result = maintain_storage(lakehouse, load_materialized_view(lakehouse, mv), config)
    table = lakehouse.load_table(storage)
    assert result.snapshots_before == 13
    assert result.snapshots_after == len(table.snapshots()) == 4
    assert all(REFRESH_STATE_KEY in (s.summary.additional_properties if s.summary else {})
               for s in table.snapshots())  # fmt: skip
    files_after = _local_files(table)
    assert len(files_after) < len(files_before)
    # Everything still referenced exists: the kept snapshots read back completely.
    for snapshot in table.snapshots():
        rows = lakehouse.spark.sql(
            f"SELECT count(*) FROM {lakehouse.quoted(storage)} VERSION AS OF {snapshot.snapshot_id}"
        ).first()
        assert rows is not None and rows[0] == 3
    report = mv_report(lakehouse, load_materialized_view(lakehouse, mv))
    assert len(report["history"]) == 4
    append_trips(lakehouse, namespace, [(40, "a", 1.0, D1)])
    assert refresh_mv(lakehouse, mv).mode == "incremental"
    assert_matches_oracle(lakehouse, mv)


@pytest.mark.spark
@pytest.mark.postgres
def test_expiry_keeps_what_a_reading_mv_recorded(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    inner = _mv(lakehouse, namespace)
    refresh_mv(lakehouse, inner)
    outer = _mv(lakehouse, namespace, "top", "SELECT vendor, n FROM agg WHERE n > 1")
    refresh_mv(lakehouse, outer)
    for i in range(5):
        append_trips(lakehouse, namespace, [(10 + i, "b", 1.0, D1)])
        refresh_mv(lakehouse, inner)
    config = lakehouse.config.maintenance.model_copy(update={"keep_snapshots": 1})
    inner_mv, outer_mv = (load_materialized_view(lakehouse, m) for m in (inner, outer))
    result = maintain_storage(lakehouse, inner_mv, config, readers=[outer_mv])
    assert result.snapshots_after == 6  # the snapshot `top` recorded, and all after it
    assert refresh_mv(lakehouse, outer).mode == "incremental"
    assert_matches_oracle(lakehouse, outer)
    result = maintain_storage(lakehouse, inner_mv, config, readers=[outer_mv])
    assert result.snapshots_after == 1


# ---- item 9: an MV over a never-refreshed MV --------------------------------------------


@pytest.mark.spark
@pytest.mark.postgres
def test_source_mv_is_refreshed_first(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    _mv(lakehouse, namespace)
    outer = _mv(lakehouse, namespace, "top", "SELECT vendor, n FROM agg WHERE n > 1")
    result = refresh_mv(lakehouse, outer)
    assert result.mode == "full"
    tables = [s for s in result.sources if s.type == "table"]
    assert [s.name for s in tables] == ["agg__storage"]
    assert all(s.snapshot_id is not None for s in tables)
    inner_storage = lakehouse.load_table(Identifier((namespace,), "agg__storage"))
    assert latest_refresh(inner_storage) is not None
    assert_matches_oracle(lakehouse, outer)


# ---- item 10: a source drops a column the MV reads --------------------------------------


@pytest.mark.spark
@pytest.mark.postgres
def test_dropped_source_column_is_a_reported_failure(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace)
    refresh_mv(lakehouse, mv)
    trips = lakehouse.load_table(Identifier((namespace,), "trips"))
    with trips.update_schema() as schema:
        schema.delete_column("fare")
    append_trips_without_fare = lakehouse.load_table(Identifier((namespace,), "trips"))
    append_trips_without_fare.append(
        pa.Table.from_pylist(
            [{"id": 9, "vendor": "q", "day": D1}],
            schema=append_trips_without_fare.schema().as_arrow(),
        )
    )
    report = mv_report(lakehouse, load_materialized_view(lakehouse, mv))
    assert (report["state"], report["reason"]) == ("invalid", "source-schema-incompatible")
    with pytest.raises(SourceSchemaIncompatibleError, match="fare") as failure:
        refresh_mv(lakehouse, mv)
    metrics = Metrics(version="test")
    metrics.record_refresh_failure(mv.dotted, "unknown", failure.value)
    text = metrics.exposition().decode()
    assert 'reason="source-schema-incompatible"' in text
    assert os.linesep not in str(failure.value)  # one line for the CLI and the logs


# ---- the daemon: start-up cleanup, dependency order, scheduled upkeep ------------------


@pytest.mark.spark
@pytest.mark.postgres
def test_a_history_past_max_snapshots_gets_its_upkeep_at_once(
    lakehouse: Lakehouse, namespace: str
) -> None:
    """No scheduled pass (interval 0): a storage table past `max_snapshots` after a refresh
    is expired by a pass of its own, and the MV stays right."""
    from tests.support.daemon import RunningDaemon, daemon_config, is_fresh, wait_for

    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace)
    storage = Identifier((namespace,), "agg__storage")
    config = daemon_config(
        lakehouse.config,
        polling={"interval_seconds": 0.5},
        maintenance={"interval_seconds": 0, "keep_snapshots": 2, "max_snapshots": 4},
    )
    refreshes = 0
    with RunningDaemon(config):
        for i in range(8):
            append_trips(lakehouse, namespace, [(10 + i, "a", 1.0, D1)])
            wait_for(lambda: is_fresh(lakehouse, mv), 120, f"the MV fresh after append {i}")
            refreshes += 1
        # Eight refresh commits and more: without the early passes the history holds them
        # all; with them it is back to at most `max_snapshots` soon after the last one.
        wait_for(
            lambda: len(lakehouse.load_table(storage).snapshots()) <= 4,
            60,
            "the storage history bounded by max_snapshots",
        )
    assert refreshes == 8
    assert len(refresh_history(lakehouse.load_table(storage))) >= 2
    assert_matches_oracle(lakehouse, mv)


def test_daemon_cleans_up_at_start_and_on_schedule(lakehouse: Lakehouse, namespace: str) -> None:
    from tests.support.daemon import RunningDaemon, daemon_config, wait_for

    create_trips(lakehouse, namespace, rows=ROWS)
    inner = _mv(lakehouse, namespace)
    refresh_mv(lakehouse, inner)
    storage = Identifier((namespace,), "agg__storage")
    for i in range(4):
        append_trips(lakehouse, namespace, [(10 + i, "a", 1.0, D1)])
        refresh_mv(lakehouse, inner)
    _leave_branches(lakehouse, storage)
    # An MV over an MV that the daemon must refresh after a never-refreshed source MV.
    create_mv(lakehouse, Identifier((namespace,), "base2"), SQL)
    outer = _mv(lakehouse, namespace, "top", "SELECT vendor, n FROM base2 WHERE n > 1")
    config = daemon_config(
        lakehouse.config,
        polling={"interval_seconds": 2.0},
        maintenance={"interval_seconds": 2.0, "keep_snapshots": 2, "branch_min_age_seconds": 0},
    )
    with RunningDaemon(config) as daemon:
        assert private_branches(lakehouse.load_table(storage)) == []  # removed before ready

        def bounded() -> bool:
            return len(lakehouse.load_table(storage).snapshots()) <= 2

        wait_for(bounded, 120, "scheduled expiry of agg__storage")

        def outer_refreshed() -> bool:
            return (
                latest_refresh(lakehouse.load_table(Identifier((namespace,), "top__storage")))
                is not None
            )

        wait_for(outer_refreshed, 180, "the MV over an MV refreshed")
        assert daemon.ready.is_set()
    record = latest_refresh(lakehouse.load_table(Identifier((namespace,), "top__storage")))
    assert record is not None
    assert all(s.snapshot_id is not None for s in record.state.tables())
    assert_matches_oracle(lakehouse, outer)
