"""The recipes of docs/reading.md: Spark, pyiceberg and DuckDB read an MV's storage table by
the view's columns (`icemv mv show`'s `read-sql` / `view-columns`) and get exactly the view's
rows, without icemv's hidden state columns."""

from __future__ import annotations

import duckdb
import pytest

from icemv.lakehouse import Lakehouse
from icemv.mv.model import load_materialized_view
from icemv.mv.report import mv_report
from tests.support.embedded import refreshed_mv
from tests.support.oracle import as_multiset, storage_and_oracle
from tests.support.tables import SAMPLE_TRIPS, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

VIEW = (
    "SELECT vendor, count(*) AS trips, avg(fare) AS mean_fare, stddev(fare) AS spread "
    "FROM trips GROUP BY vendor"
)


def test_spark_pyiceberg_and_duckdb_read_the_view_columns(
    lakehouse: Lakehouse, namespace: str
) -> None:
    create_trips(lakehouse, namespace, rows=SAMPLE_TRIPS)
    mv = refreshed_mv(lakehouse, namespace, "by_vendor", VIEW, policy="incremental")
    report = mv_report(lakehouse, load_materialized_view(lakehouse, mv))
    columns = report["view-columns"]
    assert columns == ["vendor", "trips", "mean_fare", "spread"]
    storage = lakehouse.load_table(load_materialized_view(lakehouse, mv).storage)
    assert any(f.name.startswith("_icemv_") for f in storage.schema().fields)  # state is there
    _, expected = storage_and_oracle(lakehouse, mv)

    # Spark: the statement `mv show` prints.
    spark = lakehouse.spark.sql(report["read-sql"])
    assert spark.columns == columns
    assert as_multiset(spark.collect()) == expected

    # pyiceberg: the view's columns of a scan.
    arrow = storage.scan(selected_fields=tuple(columns)).to_arrow()
    assert arrow.column_names == columns
    assert as_multiset(zip(*arrow.to_pydict().values(), strict=True)) == expected

    # DuckDB over that Arrow table.
    connection = duckdb.connect()
    connection.register("by_vendor", arrow)
    rows = connection.sql("SELECT * FROM by_vendor").fetchall()
    assert as_multiset(rows) == expected
