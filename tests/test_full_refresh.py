"""Create, refresh, read, replace and drop MVs with real Spark and a PostgreSQL catalog."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyiceberg.exceptions import NoSuchTableError

from icemv.config import MaterializedViewSpec
from icemv.errors import StorageCommitConflictError, ViewSqlError
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.freshness import assess_freshness
from icemv.mv.history import latest_refresh
from icemv.mv.lifecycle import apply_declared, create_mv, drop_mv, replace_mv
from icemv.mv.model import load_materialized_view
from icemv.refresh.commit.spark_write import overwrite_storage
from icemv.refresh.policy import refresh_mv
from icemv.refresh.record import commit_properties
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
ROWS = [
    (1, "a", 10.0, D1),
    (2, "a", 10.0, D1),  # duplicate image
    (3, "b", None, D1),  # NULL measure
    (4, None, 7.5, D2),  # NULL group key
    (5, "b", 2.5, D2),
]
AGG_SQL = (
    "SELECT vendor, day, count(*) AS trips, sum(fare) AS fares FROM trips GROUP BY vendor, day"
)


def test_create_refresh_read_back(lakehouse: Lakehouse, namespace: str) -> None:
    base = create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "daily")
    mv = create_mv(lakehouse, mv_id, AGG_SQL)
    storage = lakehouse.load_table(mv.storage)
    assert mv.storage == Identifier((namespace,), "daily__storage")
    assert storage.current_snapshot() is None  # never refreshed yet
    assert storage.format_version == 2
    # The view's columns, then the hidden state SUM needs (its count of non-NULL inputs,
    # and the error bound of a DOUBLE sum).
    assert storage.schema().column_names == [
        "vendor",
        "day",
        "trips",
        "fares",
        "_icemv_count_fares",
        "_icemv_error_fares",
    ]

    result = refresh_mv(lakehouse, mv_id)
    assert (result.mode, result.reason, result.rows_inserted) == ("full", "never-refreshed", 4)
    assert_matches_oracle(lakehouse, mv_id)

    # The refresh record, as pyiceberg (any reader) sees it: exactly the spec's fields.
    snapshot = lakehouse.load_table(mv.storage).current_snapshot()
    assert snapshot is not None and snapshot.snapshot_id == result.storage_snapshot_id
    raw = json.loads(snapshot.summary.additional_properties["refresh-state"])  # type: ignore[union-attr]
    assert set(raw) == {"view-version-id", "refresh-start-timestamp-ms", "source-states"}
    assert raw["view-version-id"] == 1
    assert raw["source-states"] == [
        {
            "type": "table",
            "namespace": [namespace],
            "name": "trips",
            "uuid": str(base.metadata.table_uuid),
            "snapshot-id": base.current_snapshot().snapshot_id,  # type: ignore[union-attr]
            "ref": "main",
        }
    ]
    assert raw["refresh-start-timestamp-ms"] <= snapshot.timestamp_ms
    assert lakehouse.load_table(mv.storage).scan().to_arrow().num_rows == 4

    # Spark reads the Iceberg view itself, which runs the view SQL: the storage read by
    # the view's columns is exactly that.
    view_rows = lakehouse.spark.sql(f"SELECT * FROM {lakehouse.quoted(mv_id)}").collect()
    stored = lakehouse.spark.sql(
        f"SELECT vendor, day, trips, fares FROM {lakehouse.quoted(mv.storage)}"
    ).collect()
    assert sorted(map(tuple, view_rows), key=repr) == sorted(map(tuple, stored), key=repr)
    assert assess_freshness(lakehouse, mv).state == "fresh"


def test_other_writer_makes_it_stale_refresh_makes_it_fresh(
    lakehouse: Lakehouse, namespace: str
) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "daily")
    policy = {"icemv.refresh-policy": "full"}  # auto would take this small append incrementally
    create_mv(lakehouse, mv_id, AGG_SQL, partition_by=["day"], properties=policy)
    first = refresh_mv(lakehouse, mv_id)

    new_snapshot = append_trips(lakehouse, namespace, [(6, "a", 1.0, D2), (7, "c", 3.0, D2)])
    mv = load_materialized_view(lakehouse, mv_id)
    stale = assess_freshness(lakehouse, mv)
    assert (stale.state, stale.pending_snapshots) == ("stale", 1)
    assert stale.sources[0].current_snapshot_id == new_snapshot

    second = refresh_mv(lakehouse, mv_id)
    assert second.mode == "full" and second.storage_snapshot_id != first.storage_snapshot_id
    assert assess_freshness(lakehouse, mv).state == "fresh"
    assert_matches_oracle(lakehouse, mv_id)
    record = latest_refresh(lakehouse.load_table(mv.storage))
    assert record is not None and record.state.tables()[0].snapshot_id == new_snapshot

    # Fresh: nothing to do, nothing committed.
    again = refresh_mv(lakehouse, mv_id)
    assert again.mode == "skipped" and again.storage_snapshot_id == second.storage_snapshot_id
    assert len(lakehouse.load_table(mv.storage).snapshots()) == 2


def test_empty_result_still_commits_a_refresh(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "none")
    mv = create_mv(lakehouse, mv_id, "SELECT id, fare FROM trips WHERE fare > 1000")
    result = refresh_mv(lakehouse, mv_id)
    assert result.storage_snapshot_id is not None and result.rows_inserted == 0
    assert latest_refresh(lakehouse.load_table(mv.storage)) is not None
    assert assess_freshness(lakehouse, mv).state == "fresh"


def test_replace_makes_it_invalid_until_refreshed(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "daily")
    old = create_mv(lakehouse, mv_id, AGG_SQL)
    refresh_mv(lakehouse, mv_id)

    # Same columns: same storage table, new view version.
    same = replace_mv(lakehouse, mv_id, AGG_SQL.replace("FROM trips", "FROM trips WHERE id > 1"))
    assert same.storage == old.storage and same.version.version_id == 2
    assert assess_freshness(lakehouse, same).reason == "definition-changed"
    refresh_mv(lakehouse, mv_id)
    assert_matches_oracle(lakehouse, mv_id)

    # New columns: a new storage table, the old one is gone.
    changed = replace_mv(lakehouse, mv_id, "SELECT day, count(*) AS trips FROM trips GROUP BY day")
    assert changed.storage != old.storage
    with pytest.raises(NoSuchTableError):
        lakehouse.load_table(old.storage)
    assert assess_freshness(lakehouse, changed).state == "invalid"
    refresh_mv(lakehouse, mv_id)
    assert assess_freshness(lakehouse, load_materialized_view(lakehouse, mv_id)).state == "fresh"
    assert_matches_oracle(lakehouse, mv_id)
    assert lakehouse.spark.sql(f"SELECT * FROM {lakehouse.quoted(mv_id)}").columns == [
        "day",
        "trips",
    ]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELEC vendor FROM trips", "starts with .SELEC."),
        ("SELECT vendor FROM trips WHERE", "does not parse"),
        ("SELECT id FROM no_such_table", "does not exist"),
        ("SELECT id, vendor AS id FROM trips", "unique"),
        ("SELECT vendor, count(*) FROM trips GROUP BY vendor", "needs a name"),
        ("SELECT no_such_column AS x FROM trips", "cannot analyse"),
        ("SELECT id FROM other_catalog.ns.trips", "catalog"),
    ],
)
def test_bad_definitions_are_rejected_and_leave_nothing(
    lakehouse: Lakehouse, namespace: str, sql: str, message: str
) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "bad")
    with pytest.raises(ViewSqlError, match=message):
        create_mv(lakehouse, mv_id, sql)
    assert not lakehouse.views.exists(mv_id)
    assert not lakehouse.table_exists(mv_id.storage_default())
    assert lakehouse.catalog.list_tables((namespace,)) == [(namespace, "trips")]


def test_mv_over_mv_and_plain_view(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    spark = lakehouse.spark
    plain = Identifier((namespace,), "big_fares")
    trips_table = lakehouse.quoted(Identifier((namespace,), "trips"))
    big = f"SELECT id, fare FROM {trips_table} WHERE fare > 5"
    spark.sql(f"CREATE VIEW {lakehouse.quoted(plain)} AS {big}")
    inner = Identifier((namespace,), "daily")
    create_mv(lakehouse, inner, AGG_SQL)
    outer = Identifier((namespace,), "summary")
    create_mv(
        lakehouse,
        outer,
        "SELECT d.vendor, sum(d.trips) AS trips, (SELECT count(*) FROM big_fares) AS big "
        "FROM daily d GROUP BY d.vendor",
    )
    refresh_mv(lakehouse, inner)
    result = refresh_mv(lakehouse, outer)
    recorded = {(s.type, s.name) for s in result.sources}
    assert recorded == {
        ("view", "daily"),
        ("table", "daily__storage"),
        ("view", "big_fares"),
        ("table", "trips"),
    }
    assert_matches_oracle(lakehouse, outer)

    # A base commit makes the inner MV stale; the outer MV reads the inner one's storage,
    # so it stays fresh until the inner MV is refreshed, then becomes stale.
    append_trips(lakehouse, namespace, [(9, "z", 50.0, D1)])
    outer_mv = load_materialized_view(lakehouse, outer)
    assert assess_freshness(lakehouse, outer_mv).state == "stale"  # it reads trips too (big_fares)
    refresh_mv(lakehouse, inner)
    refresh_mv(lakehouse, outer)
    assert assess_freshness(lakehouse, outer_mv).state == "fresh"
    assert_matches_oracle(lakehouse, outer)


def test_names_from_outside_are_quoted(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, name="trip-data; drop", rows=ROWS)
    mv_id = Identifier((namespace,), "odd name`x")
    create_mv(
        lakehouse, mv_id, "SELECT vendor, count(*) AS n FROM `trip-data; drop` GROUP BY vendor"
    )
    refresh_mv(lakehouse, mv_id)
    assert_matches_oracle(lakehouse, mv_id)
    assert lakehouse.table_exists(Identifier((namespace,), "trip-data; drop"))


def test_a_stale_plan_cannot_commit_twice(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "daily")
    mv = create_mv(lakehouse, mv_id, AGG_SQL)
    first = refresh_mv(lakehouse, mv_id)
    append_trips(lakehouse, namespace, [(8, "a", 1.0, D1)])
    refresh_mv(lakehouse, mv_id)  # another refresh wins the race
    record = latest_refresh(lakehouse.load_table(mv.storage))
    assert record is not None
    df = lakehouse.spark.sql(f"SELECT * FROM {lakehouse.quoted(mv.storage)}")
    with pytest.raises(StorageCommitConflictError):
        overwrite_storage(
            df,
            lakehouse.quoted(mv.storage),
            first.storage_snapshot_id,
            commit_properties(record.state, {}),
        )
    assert len(lakehouse.load_table(mv.storage).snapshots()) == 2
    assert_matches_oracle(lakehouse, mv_id)


def test_apply_drop_and_partitioning(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    name = f"{namespace}.declared"
    spec = MaterializedViewSpec(
        name=name,
        sql=AGG_SQL.replace("FROM trips", f"FROM {namespace}.trips"),
        partition_by=["day"],
    )
    assert apply_declared(lakehouse, [spec]) == {name: "created"}
    assert apply_declared(lakehouse, [spec]) == {name: "unchanged"}
    mv = load_materialized_view(lakehouse, Identifier((namespace,), "declared"))
    assert [f.name for f in lakehouse.load_table(mv.storage).spec().fields] == ["day"]
    changed = spec.model_copy(update={"sql": spec.sql.replace("count(*)", "count(id)")})
    assert apply_declared(lakehouse, [changed]) == {name: "replaced"}
    assert apply_declared(lakehouse, [], prune=True)[name] == "dropped"
    assert not lakehouse.views.exists(mv.identifier)

    other = Identifier((namespace,), "manual")
    created = create_mv(lakehouse, other, AGG_SQL)
    assert other.dotted not in apply_declared(lakehouse, [], prune=True)  # not config-managed
    drop_mv(lakehouse, other)
    assert not lakehouse.views.exists(other) and not lakehouse.table_exists(created.storage)


def test_two_first_refreshes_cannot_both_land(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "daily")
    mv = create_mv(lakehouse, mv_id, AGG_SQL)
    # Planned while the storage table had no snapshot; another refresh lands first.
    df = lakehouse.spark.sql(f"SELECT * FROM {lakehouse.quoted(mv.storage)}").limit(0)
    refresh_mv(lakehouse, mv_id)
    record = latest_refresh(lakehouse.load_table(mv.storage))
    assert record is not None
    with pytest.raises(StorageCommitConflictError):
        overwrite_storage(
            df, lakehouse.quoted(mv.storage), None, commit_properties(record.state, {})
        )
    assert len(lakehouse.load_table(mv.storage).snapshots()) == 1
