"""Hidden state columns (sql/state.py): AVG, SUM and vanishing groups merge exactly under
deletes and updates (DECIMAL and integer sums; floating-point ones within their error
bound, the deviations recompute their groups), readers see only the view's columns, and
MVs made without state (or with state this icemv does not derive) keep refreshing
correctly."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from pyiceberg.types import LongType

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.explain import explain
from icemv.mv.layout import StorageLayout
from icemv.mv.lifecycle import create_mv
from icemv.mv.model import load_materialized_view
from icemv.refresh.policy import refresh_mv
from tests.conftest import CATALOG_KINDS
from tests.support.oracle import assert_matches_oracle, spark_writes_only, storage_and_oracle
from tests.support.tables import SAMPLE_TRIPS, append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres, CATALOG_KINDS]

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
ROWS = SAMPLE_TRIPS
STATS = (
    "SELECT vendor, avg(fare) AS mean, sum(fare) AS total, stddev(fare) AS sd, "
    "stddev_pop(fare) AS sdp, variance(fare) AS v, var_pop(fare) AS vp "
    "FROM trips GROUP BY vendor"
)
# DECIMAL sums merge deletes exactly from state (a DOUBLE one would recompute its groups,
# which a global aggregate cannot: test_floating_sums_recompute_under_deletes).
MONEY = "CAST(fare AS DECIMAL(10,2))"
GLOBAL = f"SELECT count(*) AS n, avg({MONEY}) AS mean, sum({MONEY}) AS total FROM trips"


def _refresh(lakehouse: Lakehouse, mv: Identifier, mode: str = "incremental") -> None:
    result = refresh_mv(lakehouse, mv)
    assert result.mode == mode, result
    assert_matches_oracle(lakehouse, mv)


def _mv(lakehouse: Lakehouse, namespace: str, name: str, sql: str) -> Identifier:
    mv = Identifier((namespace,), name)
    create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental-strict"})
    _refresh(lakehouse, mv, "full")
    return mv


def test_storage_holds_state_after_the_view_columns(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace, "stats", STATS)
    storage = lakehouse.load_table(load_materialized_view(lakehouse, mv).storage)
    layout = StorageLayout.of(storage)
    assert layout.view_columns == ("vendor", "mean", "total", "sd", "sdp", "v", "vp")
    assert layout.state_columns == (
        "_icemv_rows",
        "_icemv_sum_mean", "_icemv_count_mean", "_icemv_error_mean",
        "_icemv_count_total", "_icemv_error_total",
        *[f"_icemv_{role}_{c}" for c in ("sd", "sdp", "v", "vp")
          for role in ("count", "mean", "m2")],
    )  # fmt: skip
    # The view's own schema and Spark's reading of the view: the view's columns only.
    metadata = load_materialized_view(lakehouse, mv).view.metadata
    view_schema = metadata.schema(metadata.current_version.schema_id)
    assert [f["name"] for f in view_schema["fields"]] == list(layout.view_columns)
    columns = lakehouse.spark.sql(f"SELECT * FROM {lakehouse.quoted(mv)}").columns
    assert columns == list(layout.view_columns)
    report = explain(lakehouse, load_materialized_view(lakehouse, mv))
    assert report["strategy"]["insert-only"] == "merge-aggregates"
    # Deviations lose digits when deleted rows are taken out (DOUBLE sums keep a bound).
    assert report["strategy"]["with-deletes"] == "recompute-groups"


@pytest.mark.matrix
@pytest.mark.parametrize("storage_writes", ["driver", "spark"])
@pytest.mark.parametrize("write_mode", ["copy-on-write", "merge-on-read"])
def test_deletes_and_updates_merge_from_state(
    lakehouse: Lakehouse, namespace: str, write_mode: str, storage_writes: str
) -> None:
    if storage_writes == "spark":
        lakehouse = spark_writes_only(lakehouse)
    table = create_trips(lakehouse, namespace, rows=ROWS)
    with table.transaction() as tx:
        tx.set_properties({f"write.{op}.mode": write_mode for op in ("delete", "update")})
    mvs = [_mv(lakehouse, namespace, "stats", STATS), _mv(lakehouse, namespace, "total", GLOBAL)]
    trips = lakehouse.quoted(Identifier((namespace,), "trips"))
    steps = [
        f"DELETE FROM {trips} WHERE id = 1",  # a group loses a row
        f"UPDATE {trips} SET fare = fare * 3 WHERE vendor = 'b'",
        f"DELETE FROM {trips} WHERE vendor = 'a'",  # a group goes entirely
        f"DELETE FROM {trips} WHERE fare IS NOT NULL AND vendor = 'b'",  # only NULLs left
        f"DELETE FROM {trips}",  # the global aggregate over nothing
    ]
    for step in steps:
        lakehouse.spark.sql(step)
        for mv in mvs:
            _refresh(lakehouse, mv)
    append_trips(lakehouse, namespace, [(7, "a", 1.0, D1), (8, "a", None, D2)])
    for mv in mvs:
        _refresh(lakehouse, mv)


def test_floating_sums_merge_deletes_within_their_error_bound(
    lakehouse: Lakehouse, namespace: str
) -> None:
    """A DOUBLE SUM / AVG merges deletes, a global one too (it recomputed in full before),
    while its error bound vouches for the merged sum; 1e16 + 1 is 1e16 in a DOUBLE, so
    taking 1e16 out leaves 0 where the view sums to 1: the bound (about 4) does not vouch
    for a sum of 0, and the group is recomputed (a global aggregate: the view)."""
    rows = [(1, "a", 1e16, D1), (2, "a", 1.0, D1), (3, "b", 0.1, D1), (4, "b", 0.2, D2),
            (5, "b", 0.3, D2), (6, "c", -2.5, D1)]  # fmt: skip
    create_trips(lakehouse, namespace, rows=rows)
    grouped = _mv(lakehouse, namespace, "grouped", "SELECT vendor, sum(fare) AS s, "
                  "avg(fare) AS mean, count(*) AS n FROM trips GROUP BY vendor")  # fmt: skip
    spread = _mv(lakehouse, namespace, "spread", "SELECT sum(fare) AS s, avg(fare) AS mean "
                 "FROM trips WHERE vendor <> 'a'")  # fmt: skip
    cancels = Identifier((namespace,), "cancels")
    policy = {"icemv.refresh-policy": "incremental"}
    create_mv(lakehouse, cancels, "SELECT sum(fare) AS s FROM trips", properties=policy)
    _refresh(lakehouse, cancels, "full")
    report = explain(lakehouse, load_materialized_view(lakehouse, grouped))
    assert report["strategy"]["with-deletes"] == "merge-aggregates"
    trips = lakehouse.quoted(Identifier((namespace,), "trips"))
    lakehouse.spark.sql(f"DELETE FROM {trips} WHERE id IN (1, 4)")
    _refresh(lakehouse, grouped)  # a's group recomputed, b's merged: equal to the oracle
    _refresh(lakehouse, spread)  # merged, no recompute of the whole view
    result = refresh_mv(lakehouse, cancels)
    assert (result.mode, result.reason) == ("full", "no-group-keys"), result
    assert_matches_oracle(lakehouse, cancels)
    actual, _ = storage_and_oracle(lakehouse, cancels)
    assert list(actual) == [(-1.1,)], actual  # 1 + 0.1 + 0.3 - 2.5, to 6 places
    lakehouse.spark.sql(f"UPDATE {trips} SET fare = fare * 10 WHERE vendor = 'b'")
    _refresh(lakehouse, grouped)
    _refresh(lakehouse, spread)


def test_decimal_average_keeps_spark_precision(lakehouse: Lakehouse, namespace: str) -> None:
    schema = pa.schema([("k", pa.string()), ("amount", pa.decimal128(10, 2))])
    table = lakehouse.catalog.create_table(
        (namespace, "payments"), schema=schema, properties={"format-version": "2"}
    )
    amounts = ["10.01", "0.07", "3.33", "99999999.99", "-1.10"]
    table.append(pa.Table.from_pylist(
        [{"k": k, "amount": decimal.Decimal(a)} for k in ("x", "y") for a in amounts],
        schema=schema,
    ))  # fmt: skip
    mv = _mv(
        lakehouse, namespace, "avg_amount",
        "SELECT k, avg(amount) AS mean, sum(amount) AS total FROM payments GROUP BY k",
    )  # fmt: skip
    storage = lakehouse.load_table(load_materialized_view(lakehouse, mv).storage)
    assert str(storage.schema().find_field("_icemv_sum_mean").field_type) == "decimal(20, 2)"
    payments = lakehouse.quoted(Identifier((namespace,), "payments"))
    lakehouse.spark.sql(f"DELETE FROM {payments} WHERE amount = 0.07 AND k = 'x'")
    _refresh(lakehouse, mv)
    lakehouse.spark.sql(f"INSERT INTO {payments} VALUES ('x', 0.01), ('z', 7.77)")
    _refresh(lakehouse, mv)


def test_a_decimal_average_half_way_merges_without_a_recompute(
    lakehouse: Lakehouse, namespace: str
) -> None:
    """Groups whose average is exactly half-way at AVG's 6 places (one cent over 32 rows:
    0.0003125), which Spark rounds away from zero: the merge's quotient is exact, and
    rounding it once gives Spark's value (decimals.half_way), so the embedded engine
    merges them instead of recomputing the groups."""
    schema = pa.schema([("k", pa.string()), ("amount", pa.decimal128(12, 2))])
    table = lakehouse.catalog.create_table(
        (namespace, "cents"), schema=schema, properties={"format-version": "2"}
    )

    def append(rows: list[tuple[str, str]]) -> None:
        table.append(pa.Table.from_pylist(
            [{"k": k, "amount": decimal.Decimal(a)} for k, a in rows], schema=schema
        ))  # fmt: skip

    append([(k, "0.00") for k in ("up", "down") for _ in range(31)])
    append([("wide", "0.00")] * 62 + [("wide", "0.01")])  # 64 rows, two cents, once appended
    mv = _mv(
        lakehouse, namespace, "cent_means",
        "SELECT k, avg(amount) AS mean, count(*) AS n FROM cents GROUP BY k",
    )  # fmt: skip
    append([("up", "0.01"), ("down", "-0.01"), ("wide", "0.01")])
    result = refresh_mv(lakehouse, mv)
    assert (result.mode, result.engine) == ("incremental", "duckdb"), result
    assert_matches_oracle(lakehouse, mv)
    storage = lakehouse.load_table(load_materialized_view(lakehouse, mv).storage)
    means = {r["k"]: r["mean"] for r in storage.scan().to_arrow().to_pylist()}
    assert means == {
        "up": decimal.Decimal("0.000313"),
        "down": decimal.Decimal("-0.000313"),
        "wide": decimal.Decimal("0.000313"),
    }


def test_an_mv_over_an_mv_never_sees_state(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    _mv(lakehouse, namespace, "stats", STATS)
    reader = _mv(lakehouse, namespace, "reader", "SELECT * FROM stats WHERE total > 1")
    storage = lakehouse.load_table(load_materialized_view(lakehouse, reader).storage)
    assert StorageLayout.of(storage).state_columns == ()
    assert [f.name for f in storage.schema().fields] == [
        "vendor", "mean", "total", "sd", "sdp", "v", "vp"
    ]  # fmt: skip
    lakehouse.spark.sql(
        f"DELETE FROM {lakehouse.quoted(Identifier((namespace,), 'trips'))} WHERE id = 2"
    )
    _refresh(lakehouse, Identifier((namespace,), "stats"))
    _refresh(lakehouse, reader)


def test_an_mv_without_state_refreshes_as_before(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace, "stats", STATS)
    storage_id = load_materialized_view(lakehouse, mv).storage
    storage = lakehouse.load_table(storage_id)
    with storage.update_schema() as update:  # as an MV made before state columns existed
        for name in StorageLayout.of(storage).state_columns:
            update.delete_column(name)
    assert StorageLayout.of(lakehouse.load_table(storage_id)).state_columns == ()
    lakehouse.spark.sql(
        f"DELETE FROM {lakehouse.quoted(Identifier((namespace,), 'trips'))} WHERE id = 5"
    )
    _refresh(lakehouse, mv)  # AVG and the deviations recompute the touched groups


def test_unknown_state_is_recomputed_fully(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = Identifier((namespace,), "stats")
    create_mv(lakehouse, mv, STATS)
    _refresh(lakehouse, mv, "full")
    storage = lakehouse.load_table(load_materialized_view(lakehouse, mv).storage)
    with storage.update_schema() as update:
        update.add_column("_icemv_future", LongType())
    append_trips(lakehouse, namespace, [(9, "a", 5.0, D1)])
    result = refresh_mv(lakehouse, mv)
    assert (result.mode, result.reason) == ("full", "state-unknown")
    assert_matches_oracle(lakehouse, mv)


def _delete(lakehouse: Lakehouse, namespace: str, where: str) -> None:
    lakehouse.spark.sql(
        f"DELETE FROM {lakehouse.quoted(Identifier((namespace,), 'trips'))} WHERE {where}"
    )


def test_distinct_keeps_a_row_count_per_row(lakehouse: Lakehouse, namespace: str) -> None:
    """`SELECT DISTINCT` is a GROUP BY of its outputs (sql/normalise.py) with `_icemv_rows`:
    a row goes when its last copy goes, not before."""
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace, "vendors", "SELECT DISTINCT vendor, day FROM trips")
    storage_id = load_materialized_view(lakehouse, mv).storage
    assert StorageLayout.of(lakehouse.load_table(storage_id)).state_columns == ("_icemv_rows",)
    _delete(lakehouse, namespace, "id = 5")  # ("b", D2) keeps id 6
    _refresh(lakehouse, mv)
    _delete(lakehouse, namespace, "id = 6")  # its last copy
    _refresh(lakehouse, mv)
    rows = lakehouse.spark.sql(f"SELECT * FROM {lakehouse.quoted(mv)}").collect()
    assert ("b", D2) not in {(r.vendor, r.day) for r in rows}
    append_trips(lakehouse, namespace, [(9, "b", 1.0, D2), (10, "b", 2.0, D2)])
    _refresh(lakehouse, mv)


def test_a_distinct_mv_without_state_refreshes(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace, "vendors", "SELECT DISTINCT vendor FROM trips")
    storage = lakehouse.load_table(load_materialized_view(lakehouse, mv).storage)
    with storage.update_schema() as update:  # as an MV made before DISTINCT was maintained
        update.delete_column("_icemv_rows")
    append_trips(lakehouse, namespace, [(9, "c", 1.0, D2), (10, "a", 2.0, D2)])
    _refresh(lakehouse, mv)
    _delete(lakehouse, namespace, "vendor = 'c' OR id = 1")
    _refresh(lakehouse, mv)  # the touched groups recompute from the source
