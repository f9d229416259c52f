"""Incremental vs full refresh, side by side in one run: `make bench`.

For each base size and write mode (`--write-mode`, comma-separated: merge-on-read position
deletes, the default, and/or copy-on-write file rewrites): one base table written in id
order, 1M rows per data file (`--file-rows`; so a delete or update of an id range touches
one file; the scattered delete hits one row in a thousand, every file), MVs of several
shapes (filter, GROUP BY aggregates, inner and left join + aggregate, a ROW_NUMBER() = 1
dedup, and over the same rows the types real tables have: DECIMAL money summed by
`CAST(ts AS DATE)` and by `date_trunc('HOUR', ts)`, a filter on a DECIMAL and a string),
then per delta, `--runs` times (each run a different id range): apply it, refresh every MV
(timed; incrementally unless `--policy auto` chooses otherwise), then recompute every MV
fully (timed). Prints each run with the refresh's phases, then a table of medians (with
the median phases and the engine, DuckDB or Spark), writes JSON and, with `--chart`, an
SVG of incremental and full time against base rows per write mode and delta
(tests/benchmarks/chart.py).

    python -m tests.benchmarks.bench_refresh --rows 1000000,10000000 --out bench.json
    python -m tests.benchmarks.bench_refresh --rows 1000000 --write-mode copy-on-write \
        --policy auto --deltas "delete 0.1%,scattered delete 0.1%" --runs 3 --chart c.svg

`--policy auto` refreshes as the daemon does by default: the cost estimate may choose a
full recompute (mode and reason are printed).

`BENCH_CATALOG=rest` runs the same on a REST catalog: the tests' REST server (Iceberg's
CatalogHandlers over a JdbcCatalog on a fresh PostgreSQL database of ICEMV_TEST_POSTGRES).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from icemv.catalog.namespaces import ensure_namespace
from icemv.config import parse_config
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.mv.model import load_materialized_view
from icemv.refresh.full import full_refresh
from icemv.refresh.plan import plan_refresh
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from icemv.service.heap import freeze_startup_heap
from tests.benchmarks.chart import refresh_chart
from tests.support.tables import equality_delete

SHAPES = {
    "filter": "SELECT id, vendor, fare FROM base WHERE fare > 140",
    "aggregate": (
        "SELECT day, vendor, count(*) AS n, sum(fare) AS s FROM base GROUP BY day, vendor"
    ),
    # AVG and STDDEV merge from hidden state columns (sum, count, mean, M2) under deletes.
    "avg+stddev": (
        "SELECT day, vendor, count(*) AS n, avg(fare) AS mean, stddev(fare) AS sd "
        "FROM base GROUP BY day, vendor"
    ),
    "join+aggregate": (
        "SELECT z.region, b.vendor, count(*) AS n, sum(b.fare) AS s "
        "FROM base b JOIN zones z ON b.zone_id = z.zone_id GROUP BY z.region, b.vendor"
    ),
    # Only the preserved side changes: the usual delta terms (sql/keys.py).
    "left-join+aggregate": (
        "SELECT z.region, b.vendor, count(*) AS n, sum(b.fare) AS s "
        "FROM base b LEFT JOIN zones z ON b.zone_id = z.zone_id GROUP BY z.region, b.vendor"
    ),
    # The realistic source: DECIMAL money, timestamps bucketed by day and by hour, strings.
    "money-by-day": (
        "SELECT CAST(ts AS DATE) AS day, vendor, count(*) AS n, sum(amount) AS total, "
        "avg(amount) AS mean FROM base GROUP BY CAST(ts AS DATE), vendor"
    ),
    "money-by-hour": (
        "SELECT date_trunc('HOUR', ts) AS hour, count(*) AS n, sum(amount) AS total "
        "FROM base GROUP BY date_trunc('HOUR', ts)"
    ),
    "money-filter": (
        "SELECT id, upper(vendor) AS vendor, amount, ts FROM base "
        "WHERE amount > 90.00 AND vendor LIKE 'v1%'"
    ),
    # DOUBLE sums and averages: deletes merge within the sums' error bounds (sql/state.py),
    # grouped and global (a global one recomputed the view at every delete before).
    "double-by-day": (
        "SELECT day, vendor, count(*) AS n, sum(fare) AS total, avg(fare) AS mean "
        "FROM base GROUP BY day, vendor"
    ),
    "double-global": "SELECT count(*) AS n, sum(fare) AS total, avg(fare) AS mean FROM base",
    # The latest of each key's 4 versions: affected keys, read at both snapshots.
    "dedup": (
        "SELECT key, id, vendor, fare FROM (SELECT key, id, vendor, fare, row_number() "
        "OVER (PARTITION BY key ORDER BY id DESC) AS rn FROM base) t WHERE rn = 1"
    ),
}
DELTAS = [
    ("append 0.01%", "append", 0.0001),
    ("append 0.1%", "append", 0.001),
    ("append 1%", "append", 0.01),
    ("append 10%", "append", 0.1),
    ("delete 0.05%", "delete", 0.0005),
    ("delete 0.1%", "delete", 0.001),
    ("scattered delete 0.1%", "scattered", 0.001),
    ("update 0.1%", "update", 0.001),
    # As a Flink upsert writes: an equality-delete file naming 0.1 % of the ids, in order.
    ("equality delete 0.1%", "equality", 0.001),
]
ROW_EXPR = [
    "id",
    "id DIV 4 AS key",
    "CAST(id % 1000 AS INT) AS zone_id",
    "concat('v', CAST(id % 5 AS STRING)) AS vendor",
    "CAST(id % 97 AS DOUBLE) * 1.5 AS fare",
    "date_add(DATE'2024-01-01', CAST(id % 365 AS INT)) AS day",
    # The types real tables have: money as DECIMAL, an event time as TIMESTAMP.
    "CAST((id % 9700) / 100 AS DECIMAL(12,2)) AS amount",
    "timestamp_seconds(1704067200 + id % 31536000) AS ts",
]


def _lakehouse(catalog: dict[str, str], workdir: Path) -> Lakehouse:
    config = parse_config(
        {
            "home": str(workdir / "home"),
            "catalog": catalog,
            "warehouse": {"location": str(workdir / "warehouse")},
            "spark": {"driver_memory": os.environ.get("ICEMV_BENCH_DRIVER_MEMORY", "6g"),
                      "shuffle_partitions": 8},
            "logging": {"level": "WARNING"},
        }
    )  # fmt: skip
    return Lakehouse(config)


FILE_ROWS = 1_000_000


def _write_rows(
    lakehouse: Lakehouse,
    table: str,
    start: int,
    count: int,
    write_mode: str | None,
    file_rows: int = FILE_ROWS,
) -> None:
    """Append rows, `file_rows` per data file; `write_mode` given: create the table with
    that delete/update mode."""
    spark = lakehouse.spark
    partitions = max(1, count // file_rows)
    df = spark.range(start, start + count, numPartitions=partitions).selectExpr(*ROW_EXPR)
    writer = df.writeTo(table)
    if write_mode is not None:
        writer = writer.tableProperty("format-version", "2")
        for operation in ("delete", "update", "merge"):
            writer = writer.tableProperty(f"write.{operation}.mode", write_mode)
        writer.create()
    else:
        writer.append()


def write_zones(lakehouse: Lakehouse, zones: str) -> None:
    """The small dimension table: 1,000 zones in 10 regions."""
    lakehouse.spark.range(1000).selectExpr(
        "CAST(id AS INT) AS zone_id", "concat('r', CAST(id % 10 AS STRING)) AS region"
    ).writeTo(zones).create()


def run_scale(
    lakehouse: Lakehouse,
    rows: int,
    shapes: list[str],
    deltas: list[str],
    write_mode: str = "merge-on-read",
    policy: str = "incremental",
    runs: int = 3,
    show_jobs: bool = False,
    file_rows: int = FILE_ROWS,
) -> list[dict[str, Any]]:
    namespace = f"bench_{uuid.uuid4().hex[:6]}"
    ensure_namespace(lakehouse.catalog, (namespace,))
    base = lakehouse.quoted(Identifier((namespace,), "base"))
    zones = lakehouse.quoted(Identifier((namespace,), "zones"))
    started = time.time()
    _write_rows(lakehouse, base, 0, rows, write_mode, file_rows)
    write_zones(lakehouse, zones)
    files = max(1, rows // file_rows)
    print(
        f"\n[{rows:,} rows in {files} files] base written in {time.time() - started:.1f} s",
        flush=True,
    )
    mvs = {}
    for shape in shapes:
        sql = SHAPES[shape]
        mv = Identifier((namespace,), shape.replace("+", "_"))
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": policy})
        refresh_mv(lakehouse, mv)
        mvs[shape] = mv
    freeze_startup_heap()  # as the daemon does once started (service/heap.py)
    results = []
    next_id = rows
    for label, kind, share in DELTAS:
        if label not in deltas:
            continue
        count = max(1, int(rows * share))
        timings: dict[str, list[tuple[float, float, RefreshResult, RefreshResult, int]]] = {
            shape: [] for shape in mvs
        }
        for run in range(runs):
            next_id = _apply_delta(lakehouse, namespace, kind, rows, count, run, next_id)
            for shape, mv in mvs.items():
                jobs: list[dict[str, Any]] = []
                incremental_s, full_s, incremental, full = incremental_then_full(
                    lakehouse, mv, jobs
                )
                timings[shape].append((incremental_s, full_s, incremental, full, len(jobs)))
                print(
                    f"  {shape:15} {label:21} run {run + 1}/{runs} {policy} {incremental_s:7.2f} s "
                    f"({incremental.mode}, {incremental.reason}, {incremental.engine})  "
                    f"full {full_s:7.2f} s  phases {_phases(incremental.phase_seconds)}  "
                    f"spark jobs {len(jobs)}",
                    flush=True,
                )
                if incremental.engine_reason:
                    print(f"      not DuckDB: {incremental.engine_reason}", flush=True)
                if show_jobs:
                    for job in jobs:
                        print(
                            f"      job {job['seconds']:5.2f} s  {job['tasks']:4} tasks  "
                            f"{job['stages']} stages  {job['name']}",
                            flush=True,
                        )
        for shape, runs_of_shape in timings.items():
            results.append(_row(rows, write_mode, shape, label, count, runs_of_shape))
    return results


def _job_data(spark: Any) -> list[Any]:
    """The application's Spark jobs, from the driver's status store (no UI needed)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)  # noqa: SLF001 (Scala Seq)
    return [jobs.apply(i) for i in range(jobs.size())]


def _next_job_id(spark: Any) -> int:
    return max((int(job.jobId()) for job in _job_data(spark)), default=-1) + 1


def _jobs_since(spark: Any, first: int) -> list[dict[str, Any]]:
    """The Spark jobs run since job `first`: call site, stages, tasks, seconds."""
    jobs = []
    for job in sorted(_job_data(spark), key=lambda j: int(j.jobId())):
        if int(job.jobId()) < first:
            continue
        started, ended = job.submissionTime(), job.completionTime()
        seconds = (
            (ended.get().getTime() - started.get().getTime()) / 1000
            if started.isDefined() and ended.isDefined()
            else 0.0
        )
        jobs.append({
            "name": str(job.name()),
            "stages": int(job.stageIds().size()) - int(job.numSkippedStages()),
            "tasks": int(job.numTasks()) - int(job.numSkippedTasks()),
            "seconds": seconds,
        })  # fmt: skip
    return jobs


def incremental_then_full(
    lakehouse: Lakehouse, mv: Identifier, jobs: list[dict[str, Any]] | None = None
) -> tuple[float, float, RefreshResult, RefreshResult]:
    """Refresh `mv` as its policy says, then recompute it fully; both timed (seconds).
    `jobs` given: the first refresh's Spark jobs are appended to it."""
    first_job = _next_job_id(lakehouse.spark) if jobs is not None else 0
    t0 = time.time()
    incremental = refresh_mv(lakehouse, mv)
    incremental_s = time.time() - t0
    if jobs is not None:
        jobs.extend(_jobs_since(lakehouse.spark, first_job))
    t0 = time.time()
    plan = plan_refresh(
        CatalogReads(lakehouse), load_materialized_view(lakehouse, mv), int(t0 * 1000)
    )
    full = full_refresh(plan, "benchmark")
    return incremental_s, time.time() - t0, incremental, full


def _apply_delta(
    lakehouse: Lakehouse, namespace: str, kind: str, rows: int, count: int, run: int, next_id: int
) -> int:
    """Apply one run's delta to the namespace's base table (each run a different id
    range); the next id to append."""
    spark = lakehouse.spark
    base = lakehouse.quoted(Identifier((namespace,), "base"))
    if kind == "append":
        _write_rows(lakehouse, base, next_id, count, None)
        return next_id + count
    if kind == "scattered":  # one row in a thousand: every data file
        spark.sql(f"DELETE FROM {base} WHERE id % 1000 = {7 + run}")
        return next_id
    if kind == "equality":
        low = rows // 4 + run * 2 * count
        equality_delete(lakehouse, namespace, "id", range(low, low + count), name="base")
        return next_id
    low = (rows // 3 if kind == "delete" else rows // 2) + run * 2 * count
    if kind == "delete":
        spark.sql(f"DELETE FROM {base} WHERE id >= {low} AND id < {low + count}")
    else:
        spark.sql(f"UPDATE {base} SET fare = fare + 1 WHERE id >= {low} AND id < {low + count}")
    return next_id


def _row(
    rows: int,
    write_mode: str,
    shape: str,
    label: str,
    count: int,
    runs: list[tuple[float, float, RefreshResult, RefreshResult, int]],
) -> dict[str, Any]:
    """One shape and delta: medians over the runs, the last run's mode and reads."""
    incremental_s = statistics.median(r[0] for r in runs)
    full_s = statistics.median(r[1] for r in runs)
    last, last_full = runs[-1][2], runs[-1][3]
    return {
        "base_rows": rows,
        "write_mode": write_mode,
        "shape": shape,
        "delta": label,
        "delta_rows": count,
        "runs": len(runs),
        "incremental_mode": last.mode,
        "incremental_reason": last.reason,
        "incremental_engine": last.engine,
        "incremental_engines": [
            r[2].engine if r[2].mode == "incremental" else "full" for r in runs
        ],
        "incremental_seconds": round(incremental_s, 3),
        "full_seconds": round(full_s, 3),
        "incremental_seconds_runs": [round(r[0], 3) for r in runs],
        "full_seconds_runs": [round(r[1], 3) for r in runs],
        "speedup": round(full_s / incremental_s, 1) if incremental_s else None,
        "rows_read_incremental": last.source_rows_read,
        "rows_read_full": last_full.source_rows_read,
        "mv_rows_written_incremental": last.rows_inserted,
        "mv_rows_written_full": last_full.rows_inserted,
        "incremental_spark_jobs": [r[4] for r in runs],
        "incremental_phases": _median_phases([r[2] for r in runs]),
        "full_phases": _median_phases([r[3] for r in runs]),
    }


def _median_phases(results: list[RefreshResult]) -> dict[str, float]:
    names = dict.fromkeys(name for r in results for name in r.phase_seconds)
    return {
        name: round(statistics.median(r.phase_seconds.get(name, 0.0) for r in results), 3)
        for name in names
    }


def _phases(seconds: Mapping[str, float]) -> str:
    return " ".join(f"{name} {value:.2f}" for name, value in seconds.items())


def print_header(header: str) -> None:
    """A table's header line, underlined."""
    print(header)
    print("-" * len(header))


def machine() -> dict[str, Any]:
    """Where a benchmark ran, for its JSON, printed too: with a yardstick of one core's
    speed, since the figures of one 2-core machine type here differed up to 2x from day
    to day (a fleet refresh in a worker: 37 ms one day, 79 ms another)."""
    found = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "python_loop_10m_seconds": python_loop_seconds(),
    }
    print(
        f"machine: {found['cpus']} cpus, Python {found['python']}, a 10M-step Python loop "
        f"in {found['python_loop_10m_seconds']:.2f} s"
    )
    return found


def python_loop_seconds() -> float:
    """Seconds for 10M additions in a Python loop: the median of three timings of 1M."""
    timings = []
    for _ in range(3):
        started, total = time.perf_counter(), 0
        for step in range(1_000_000):
            total += step
        timings.append(time.perf_counter() - started)
    return round(10 * statistics.median(timings), 2)


def print_table(results: list[dict[str, Any]]) -> None:
    print()
    header = (
        f"{'base rows':>11} {'mode':4} {'shape':20} {'delta':21} {'incr s':>8} {'full s':>8} "
        f"{'speedup':>8} {'engine':6} {'rows read incr/full':>24}  median phases (incr)"
    )
    print_header(header)
    for r in results:
        reads = f"{r['rows_read_incremental'] or 0:,}/{r['rows_read_full'] or 0:,}"
        mode = "CoW" if r["write_mode"] == "copy-on-write" else "MoR"
        incremental = r["incremental_mode"] == "incremental"
        engine = (r["incremental_engine"] or "-") if incremental else "full"
        print(
            f"{r['base_rows']:>11,} {mode:4} {r['shape']:20} {r['delta']:21} "
            f"{r['incremental_seconds']:>8.2f} {r['full_seconds']:>8.2f} "
            f"{('x' + str(r['speedup'])):>8} {engine:6} {reads:>24}  "
            f"{_phases(r['incremental_phases'])}"
        )


def _rest_catalog(workdir: Path, cleanup: contextlib.ExitStack) -> dict[str, str]:
    """Start the tests' REST catalog server on a new database; stopped and dropped at exit."""
    from urllib.parse import urlsplit

    from tests.conftest import ADMIN_URL, create_database, drop_database, rest_catalog_section
    from tests.support.rest_catalog import start_rest_catalog

    url = create_database(ADMIN_URL)
    cleanup.callback(drop_database, ADMIN_URL, url)
    parts = urlsplit(url)
    server = start_rest_catalog(
        f"jdbc:postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}",
        parts.username,
        (workdir / "warehouse").as_uri(),
        workdir / "rest-server.log",
    )
    cleanup.callback(server.stop)
    return rest_catalog_section(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", default="1000000,10000000,50000000")
    parser.add_argument("--out", default="bench-results/refresh.json")
    parser.add_argument(
        "--catalog",
        default=os.environ.get("ICEMV_BENCH_POSTGRES"),
        help="postgresql:// URL of an empty database (default: embedded)",
    )
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes")
    parser.add_argument(
        "--write-mode",
        default="merge-on-read",
        help="comma-separated: merge-on-read, copy-on-write (each a base table of its own)",
    )
    parser.add_argument(
        "--file-rows", type=int, default=FILE_ROWS, help="rows per data file of the base"
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="apply each delta this many times; print medians"
    )
    parser.add_argument(
        "--chart", help="also draw incremental and full time against base rows (an SVG file)"
    )
    parser.add_argument(
        "--jobs", action="store_true", help="list each incremental refresh's Spark jobs"
    )
    parser.add_argument(
        "--policy",
        default="incremental",
        choices=("incremental", "auto"),
        help="the MVs' refresh policy (auto: the cost estimate may recompute fully)",
    )
    parser.add_argument(
        "--deltas", default=",".join(d[0] for d in DELTAS), help="comma-separated delta labels"
    )
    args = parser.parse_args()  # fmt: skip
    shapes = args.shapes.split(",")
    deltas = args.deltas.split(",")
    unknown = [s for s in shapes if s not in SHAPES] + [
        d for d in deltas if d not in {label for label, _, _ in DELTAS}
    ]
    write_modes = args.write_mode.split(",")
    unknown += [m for m in write_modes if m not in ("merge-on-read", "copy-on-write")]
    if unknown:
        parser.error(f"unknown shapes, deltas or write modes: {', '.join(unknown)}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.file_rows < 1:
        parser.error("--file-rows must be at least 1")
    workdir = Path(tempfile.mkdtemp(prefix="icemv-bench-"))
    kind = os.environ.get("BENCH_CATALOG", "jdbc")
    with contextlib.ExitStack() as cleanup:
        if kind == "rest":
            catalog = _rest_catalog(workdir, cleanup)
        else:
            catalog = {"uri": args.catalog or "embedded"}
        lakehouse = _lakehouse(catalog, workdir)
        results: list[dict[str, Any]] = []
        for rows in (int(r) for r in args.rows.split(",")):
            for write_mode in write_modes:
                results += [
                    {**row, "catalog": kind, "policy": args.policy, "file_rows": args.file_rows}
                    for row in run_scale(
                        lakehouse,
                        rows,
                        shapes,
                        deltas,
                        write_mode,
                        args.policy,
                        args.runs,
                        args.jobs,
                        args.file_rows,
                    )
                ]
        from icemv.engine.spark import stop_spark

        stop_spark()
    print_table(results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine(), "results": results}, indent=2))
    print(f"\nwrote {out}")
    if args.chart:
        chart = Path(args.chart)
        chart.parent.mkdir(parents=True, exist_ok=True)
        chart.write_text(refresh_chart(results))
        print(f"wrote {chart}")


if __name__ == "__main__":
    main()
