"""Incremental refresh against the oracle, shape by shape, operation by operation."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

import icemv.refresh.incremental as incremental
from icemv.catalog.lakehouse import Lakehouse
from icemv.identifiers import Identifier
from icemv.mv.history import latest_refresh
from icemv.mv.lifecycle import create_mv
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from tests.conftest import CATALOG_KINDS
from tests.oracle import assert_matches_oracle, spark_writes_only
from tests.tables import append_trips, create_trips, equality_delete

pytestmark = [pytest.mark.spark, pytest.mark.postgres, CATALOG_KINDS]

D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)
ROWS = [
    (1, "a", 10.0, D1),
    (2, "a", 10.0, D1),
    (3, "b", None, D1),
    (4, None, 7.5, D2),
    (5, "b", 2.5, D2),
]

SHAPES = {
    "filter": "SELECT id, vendor, fare FROM trips WHERE fare > 5 OR fare IS NULL",
    "project-dups": "SELECT vendor, day FROM trips",
    "count-sum": (
        "SELECT vendor, count(*) AS n, count(fare) AS nf, sum(fare) AS s FROM trips GROUP BY vendor"
    ),
    "count-only": "SELECT day, count(*) AS n, count(vendor) AS nv FROM trips GROUP BY day",
    "min-max-avg": (
        "SELECT vendor, min(fare) AS lo, max(fare) AS hi, avg(fare) AS mean "
        "FROM trips GROUP BY vendor"
    ),
    "having-distinct": (
        "SELECT day, count(DISTINCT vendor) AS vendors FROM trips GROUP BY day HAVING count(*) > 1"
    ),
    "self-join": (
        "SELECT a.id AS a_id, b.id AS b_id "
        "FROM trips a JOIN trips b ON a.vendor = b.vendor AND a.id < b.id"
    ),
    "union-all": (
        "SELECT id, vendor FROM trips WHERE fare > 5 "
        "UNION ALL SELECT id, vendor FROM trips WHERE day = DATE'2024-01-02'"
    ),
}


def compact(lakehouse: Lakehouse, namespace: str) -> None:
    """Rewrite every data file: a `replace` snapshot with no logical change."""
    lakehouse.spark.sql(
        f"CALL `lake`.system.rewrite_data_files(table => '{namespace}.trips', "
        "options => map('rewrite-all', 'true'))"
    )


def _trips(lakehouse: Lakehouse, namespace: str) -> str:
    return lakehouse.quoted(Identifier((namespace,), "trips"))


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize(
    ("write_mode", "storage_writes"),
    [("copy-on-write", "driver"), ("merge-on-read", "driver"), ("merge-on-read", "spark")],
)
def test_each_operation_is_applied_incrementally(
    lakehouse: Lakehouse, namespace: str, shape: str, write_mode: str, storage_writes: str
) -> None:
    if storage_writes == "spark":
        lakehouse = spark_writes_only(lakehouse)
    table = create_trips(lakehouse, namespace, rows=ROWS)
    with table.transaction() as tx:
        tx.set_properties(
            {
                "write.delete.mode": write_mode,
                "write.update.mode": write_mode,
                "write.merge.mode": write_mode,
            }
        )
    mv_id = Identifier((namespace,), "mv")
    create_mv(lakehouse, mv_id, SHAPES[shape], properties={"icemv.refresh-policy": "incremental"})
    assert refresh_mv(lakehouse, mv_id).mode == "full"
    spark, trips = lakehouse.spark, _trips(lakehouse, namespace)

    operations = [
        lambda: append_trips(
            lakehouse, namespace, [(6, "a", 10.0, D1), (7, "c", None, D3), (8, None, 1.0, D3)]
        ),
        lambda: spark.sql(f"DELETE FROM {trips} WHERE id IN (2, 4)"),
        lambda: spark.sql(f"UPDATE {trips} SET fare = fare + 1, vendor = 'b' WHERE id = 1"),
        lambda: spark.sql(
            f"MERGE INTO {trips} t USING (SELECT 3 AS id, 'c' AS vendor, 99.0 AS fare, "
            "DATE'2024-01-03' AS day UNION ALL SELECT 9, 'a', 3.0, DATE'2024-01-01') s "
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        ),
        lambda: compact(lakehouse, namespace),
        lambda: spark.sql(f"DELETE FROM {trips} WHERE vendor = 'c'"),
    ]
    for operation in operations:
        operation()
        result = refresh_mv(lakehouse, mv_id)
        assert result.mode in ("incremental", "no-op"), result
        assert_matches_oracle(lakehouse, mv_id)
    record = latest_refresh(lakehouse.load_table(Identifier((namespace,), "mv__storage")))
    assert record is not None and record.details["icemv.mode"] in ("incremental", "no-op")


def test_compaction_only_is_a_no_op_refresh(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    append_trips(lakehouse, namespace, [(6, "a", 1.0, D1)])
    mv_id = Identifier((namespace,), "mv")
    create_mv(lakehouse, mv_id, SHAPES["count-sum"])
    refresh_mv(lakehouse, mv_id)
    compact(lakehouse, namespace)
    result = refresh_mv(lakehouse, mv_id)
    assert (result.mode, result.reason, result.rows_inserted, result.rows_deleted) == (
        "no-op",
        "no-logical-change",
        0,
        0,
    )
    assert_matches_oracle(lakehouse, mv_id)


def test_append_then_compaction_in_one_range(lakehouse: Lakehouse, namespace: str) -> None:
    """Found by the property test: the compaction output must not count as inserted rows."""
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "mv")
    create_mv(
        lakehouse, mv_id, SHAPES["filter"], properties={"icemv.refresh-policy": "incremental"}
    )
    refresh_mv(lakehouse, mv_id)
    append_trips(lakehouse, namespace, [(2, "b", 2.5, D2), (5, None, 10.0, D1)])
    compact(lakehouse, namespace)
    assert refresh_mv(lakehouse, mv_id).mode == "incremental"
    assert_matches_oracle(lakehouse, mv_id)


@pytest.mark.parametrize("shape", ["filter", "count-sum", "min-max-avg"])
def test_equality_deletes_are_incremental(lakehouse: Lakehouse, namespace: str, shape: str) -> None:
    create_trips(lakehouse, namespace, rows=[*ROWS, (6, "c", 3.0, D3), (7, "c", 4.0, D3)])
    mv_id = Identifier((namespace,), "mv")
    create_mv(lakehouse, mv_id, SHAPES[shape], properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, mv_id)
    equality_delete(lakehouse, namespace, "vendor", ["c"])
    append_trips(lakehouse, namespace, [(8, "c", 9.0, D1)])  # a later insert of the key stays
    result = refresh_mv(lakehouse, mv_id)
    assert result.mode == "incremental", result
    assert_matches_oracle(lakehouse, mv_id)
    equality_delete(lakehouse, namespace, "vendor", [None, "a"])
    lakehouse.spark.sql(f"DELETE FROM {_trips(lakehouse, namespace)} WHERE id = 5")
    assert refresh_mv(lakehouse, mv_id).mode == "incremental"
    assert_matches_oracle(lakehouse, mv_id)


@pytest.mark.parametrize("storage_writes", ["driver", "spark"])
def test_a_refresh_that_lost_a_race_is_never_applied(
    lakehouse: Lakehouse, namespace: str, storage_writes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rival refresh lands between this one's plan and its commit: this one must fail
    its commit, re-plan, and find the MV fresh; the delta is applied exactly once."""
    if storage_writes == "spark":
        lakehouse = spark_writes_only(lakehouse)
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "mv")
    sql = SHAPES["count-sum"]
    create_mv(lakehouse, mv_id, sql, properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, mv_id)
    append_trips(lakehouse, namespace, [(6, "a", 10.0, D1), (7, "z", 1.0, D2)])
    rivals: list[RefreshResult] = []
    raced = False

    def rival_first(commit: Callable[..., None]) -> Callable[..., None]:
        def commit_after_rival(*args: Any, **kwargs: Any) -> None:
            nonlocal raced
            if not raced:
                raced = True
                rivals.append(refresh_mv(lakehouse, mv_id))  # re-enters: commits first
            commit(*args, **kwargs)

        return commit_after_rival

    for name in ("commit_rows", "commit_via_branch"):
        monkeypatch.setattr(incremental, name, rival_first(getattr(incremental, name)))
    result = refresh_mv(lakehouse, mv_id)
    assert [r.mode for r in rivals] == ["incremental"]
    assert (result.mode, result.attempts) == ("skipped", 2)
    assert_matches_oracle(lakehouse, mv_id)
    storage = lakehouse.load_table(Identifier((namespace,), "mv__storage"))
    assert not [ref for ref in storage.metadata.refs if ref != "main"]  # no leftover branch


def test_a_patch_too_big_for_the_driver_goes_through_spark(
    lakehouse: Lakehouse, namespace: str
) -> None:
    config = lakehouse.config
    refresh = config.refresh.model_copy(update={"driver_commit_max_rows": 2})
    lakehouse = Lakehouse(config.model_copy(update={"refresh": refresh}))
    create_trips(lakehouse, namespace, rows=ROWS)
    mv_id = Identifier((namespace,), "mv")
    create_mv(
        lakehouse, mv_id, SHAPES["filter"], properties={"icemv.refresh-policy": "incremental"}
    )
    refresh_mv(lakehouse, mv_id)
    for rows in (
        [(6, "a", 10.0, D1)],  # one row: collected and committed from the driver
        [(7, "a", 10.0, D1), (8, "b", 9.0, D1), (9, "c", 8.0, D2)],  # three: a Spark write
    ):
        append_trips(lakehouse, namespace, rows)
        result = refresh_mv(lakehouse, mv_id)
        assert (result.mode, result.rows_inserted) == ("incremental", len(rows))
        assert_matches_oracle(lakehouse, mv_id)
        storage = lakehouse.load_table(Identifier((namespace,), "mv__storage"))
        summary = storage.current_snapshot().summary  # type: ignore[union-attr]
        assert summary is not None
        written = "spark" if len(rows) > 2 else "driver"
        assert summary.additional_properties["icemv.storage-write"] == written
        assert ("spark.app.id" in summary.additional_properties) == (written == "spark")
