"""`make bench`'s options at a tiny size: several runs per delta, both write modes, the
Spark jobs of each refresh, medians, and the chart drawn from the rows."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from icemv.lakehouse import Lakehouse
from tests.benchmarks.bench_refresh import run_scale
from tests.benchmarks.chart import refresh_chart

pytestmark = [pytest.mark.spark, pytest.mark.postgres]


def test_bench_refresh_runs_each_delta_on_both_write_modes(lakehouse: Lakehouse) -> None:
    rows = []
    for mode in ("merge-on-read", "copy-on-write"):
        rows += run_scale(
            lakehouse, 20_000, ["aggregate"], ["delete 0.1%"], mode, "auto", 2, show_jobs=True
        )
    assert [(r["write_mode"], r["shape"], r["delta"]) for r in rows] == [
        ("merge-on-read", "aggregate", "delete 0.1%"),
        ("copy-on-write", "aggregate", "delete 0.1%"),
    ]
    for row in rows:
        assert row["runs"] == 2
        assert len(row["incremental_seconds_runs"]) == 2 == len(row["incremental_engines"])
        assert min(row["incremental_seconds_runs"]) <= row["incremental_seconds"]
        assert row["incremental_seconds"] <= max(row["incremental_seconds_runs"])
        assert set(row["incremental_engines"]) <= {"duckdb", "spark", "full"}
        assert len(row["incremental_spark_jobs"]) == 2
        assert row["rows_read_full"] >= 20_000 - 40  # two deletes of 20 rows each
        assert {"plan", "commit", "record"} <= set(row["incremental_phases"])  # full: no changes
    chart = ET.fromstring(refresh_chart(rows))
    assert len(chart.findall("{http://www.w3.org/2000/svg}polyline")) == 2 * 2  # modes x lines


def test_bench_refresh_equality_delete_delta(lakehouse: Lakehouse) -> None:
    """The `equality delete 0.1%` delta commits an equality-delete file on `id` that the
    refresh applies (incrementally: its values are pushed down; DECIMAL sums merge the
    deletes, where a DOUBLE one would recompute its groups)."""
    (row,) = run_scale(
        lakehouse, 20_000, ["money-by-day"], ["equality delete 0.1%"], "merge-on-read", "auto", 1
    )
    assert (row["delta"], row["delta_rows"]) == ("equality delete 0.1%", 20)
    assert row["incremental_mode"] == "incremental", row
    assert row["mv_rows_written_incremental"] is not None


def test_bench_star_reports_each_join_and_change(lakehouse: Lakehouse) -> None:
    """`make bench-star` at a tiny size: each join and change, incremental on DuckDB
    (the fact read restricted to the changed store keys), with memory and phases."""
    from tests.benchmarks.bench_star import run_size

    rows = run_size(lakehouse, 20_000, 2_000, 1, ["fact append", "dimension update"])
    assert [(r["shape"], r["delta"]) for r in rows] == [
        ("inner", "fact append"),
        ("left", "fact append"),
        ("inner", "dimension update"),
        ("left", "dimension update"),
    ]
    for row in rows:
        assert row["incremental_engines"] == ["duckdb"], row
        assert row["full_seconds"] > 0 and row["driver_peak_mib"] > 0
        assert {"plan", "changes", "patch", "commit"} <= set(row["incremental_phases"])
    assert rows[3]["rows_restricted"] > 0  # the LEFT JOIN's keyed delta: K-restricted reads
