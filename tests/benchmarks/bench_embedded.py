"""The embedded engine (DuckDB) against Spark for a small append: `make bench-embedded`.

One source of --rows rows (written by Spark), a filter MV and an aggregate MV (COUNT, SUM,
AVG by day and vendor) over it, and the same two over the types real tables have (a
filter on a DECIMAL amount, DECIMAL sums by `CAST(ts AS DATE)`); per round, another writer
(pyiceberg) appends --append rows, and each MV is refreshed incrementally, once by DuckDB
(`refresh.embedded_max_rows` as configured) and once with it off (0: Spark computes the
delta), alternating which goes first. Prints the median of --rounds per shape and engine,
with the phases, then the per-MV cost when --fleet MVs share one append.

    python -m tests.benchmarks.bench_embedded --rows 1000000 --append 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from icemv.catalog.namespaces import ensure_namespace
from icemv.config import parse_config
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult

SHAPES = {
    "filter": "SELECT id, vendor, fare FROM base WHERE fare > 140",
    "aggregate": (
        "SELECT day, vendor, count(*) AS n, sum(fare) AS s, avg(fare) AS mean "
        "FROM base GROUP BY day, vendor"
    ),
    "money-filter": "SELECT id, vendor, amount, ts FROM base WHERE amount > 90.00",
    "money-by-day": (
        "SELECT CAST(ts AS DATE) AS day, vendor, count(*) AS n, sum(amount) AS total, "
        "avg(amount) AS mean FROM base GROUP BY CAST(ts AS DATE), vendor"
    ),
}
ROW_EXPR = [
    "id",
    "concat('v', CAST(id % 5 AS STRING)) AS vendor",
    "CAST(id % 97 AS DOUBLE) * 1.5 AS fare",
    "date_add(DATE'2024-01-01', CAST(id % 365 AS INT)) AS day",
    "CAST((id % 9700) / 100 AS DECIMAL(12,2)) AS amount",
    "timestamp_seconds(1704067200 + id % 31536000) AS ts",
]


def _rows(start: int, count: int) -> pa.Table:
    ids = range(start, start + count)
    first = dt.date(2024, 1, 1)
    epoch = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "vendor": pa.array([f"v{i % 5}" for i in ids], pa.string()),
            "fare": pa.array([(i % 97) * 1.5 for i in ids], pa.float64()),
            "day": pa.array([first + dt.timedelta(days=i % 365) for i in ids], pa.date32()),
            "amount": pa.array([Decimal(i % 9700) / 100 for i in ids], pa.decimal128(12, 2)),
            "ts": pa.array(
                [epoch + dt.timedelta(seconds=i % 31536000) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )


def _lakehouse(catalog_uri: str, workdir: Path, embedded_max_rows: int | None) -> Lakehouse:
    refresh = {} if embedded_max_rows is None else {"embedded_max_rows": embedded_max_rows}
    config = parse_config(
        {
            "home": str(workdir / "home"),
            "catalog": {"uri": catalog_uri},
            "warehouse": {"location": str(workdir / "warehouse")},
            "spark": {"driver_memory": "2g", "shuffle_partitions": 4},
            "refresh": refresh,
            "logging": {"level": "WARNING"},
        }
    )
    return Lakehouse(config)


def _timed(lakehouse: Lakehouse, mv: Identifier) -> tuple[float, RefreshResult]:
    started = time.perf_counter()
    result = refresh_mv(lakehouse, mv)
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--append", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fleet", type=int, default=10)
    parser.add_argument("--catalog", default="embedded", help="postgresql:// URL or embedded")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="icemv-bench-embedded-"))
    engines = {
        "duckdb": _lakehouse(args.catalog, workdir, None),
        "spark": _lakehouse(args.catalog, workdir, 0),
    }
    lakehouse = engines["duckdb"]
    spark = lakehouse.spark
    namespace = f"bench_{uuid.uuid4().hex[:6]}"
    ensure_namespace(lakehouse.catalog, (namespace,))
    source = Identifier((namespace,), "base")
    spark.range(0, args.rows, numPartitions=max(1, args.rows // 1_000_000)).selectExpr(
        *ROW_EXPR
    ).writeTo(lakehouse.quoted(source)).tableProperty("format-version", "2").create()
    mvs = {}
    for shape, sql in SHAPES.items():
        mv = Identifier((namespace,), shape)
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental"})
        refresh_mv(lakehouse, mv)
        mvs[shape] = mv
    next_id = args.rows
    timings: dict[tuple[str, str], list[tuple[float, RefreshResult]]] = {}
    for round_ in range(args.rounds):
        order = list(engines) if round_ % 2 == 0 else list(reversed(engines))
        for engine in order:
            lakehouse.load_table(source).append(_rows(next_id, args.append))
            next_id += args.append
            for shape, mv in mvs.items():
                seconds, result = _timed(engines[engine], mv)
                assert result.mode == "incremental" and result.engine == engine, result
                timings.setdefault((shape, engine), []).append((seconds, result))
    print(f"\n{args.rows:,}-row source, {args.append:,}-row append, median of {args.rounds}:")
    for (shape, engine), runs in sorted(timings.items()):
        median = statistics.median(s for s, _ in runs)
        middle = sorted(runs, key=lambda r: r[0])[len(runs) // 2][1]
        phases = " ".join(f"{k} {v:.3f}" for k, v in middle.phase_seconds.items())
        print(f"  {shape:13} {engine:6} {median:6.3f} s   ({phases})")
    fleet = []
    for i in range(args.fleet):
        shape = list(SHAPES)[i % len(SHAPES)]
        mv = Identifier((namespace,), f"fleet{i}")
        create_mv(lakehouse, mv, SHAPES[shape], properties={"icemv.refresh-policy": "incremental"})
        refresh_mv(lakehouse, mv)
        fleet.append(mv)
    for engine in ("duckdb", "spark"):
        lakehouse.load_table(source).append(_rows(next_id, args.append))
        next_id += args.append
        fleet_seconds = [_timed(engines[engine], mv)[0] for mv in fleet]
        further = statistics.median(fleet_seconds[1:])
        print(
            f"  fleet of {args.fleet} ({engine}): all {sum(fleet_seconds):.3f} s, first "
            f"{fleet_seconds[0]:.3f} s, per further MV median {further:.3f} s"
        )
    from icemv.engine.spark import stop_spark

    stop_spark()


if __name__ == "__main__":
    main()
