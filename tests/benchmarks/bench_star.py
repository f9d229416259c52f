"""Star joins, incremental vs full refresh in one run: `make bench-star`.

A fact table (`sales`: DECIMAL amount, TIMESTAMP ts, a BIGINT store key spread over every
data file, 1M rows per file, written in id order) joined to a dimension of a tenth of its
size (`stores`: key and region, 1M rows per file, in key order), aggregated by the
dimension's region and the day, as INNER and as LEFT JOIN; merge-on-read tables. Per
delta, `--runs` times (a different id range each run): apply it (0.1 % of the fact
appended or deleted, 0.1 % of the dimension's rows given a new region), refresh each MV
incrementally (timed: phases, engine and why not DuckDB, the source rows read, the rows
the engine read restricted to the delta's keys and the tables it read whole, the driver's
peak memory and its rise during the refresh, the most of the runs), then recompute it
fully (timed). Prints each run, then a table of medians, and writes JSON.

    python -m tests.benchmarks.bench_star --sizes 10000000:1000000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from icemv.catalog.namespaces import ensure_namespace
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.refresh.embedded.reads import shared_cache
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from icemv.service.heap import freeze_startup_heap
from tests.benchmarks.bench_refresh import (
    _lakehouse,
    _median_phases,
    _phases,
    incremental_then_full,
    machine,
    print_header,
)

SHAPES = {
    "inner": "JOIN",
    "left": "LEFT JOIN",
}
SQL = (
    "SELECT s.region, CAST(f.ts AS DATE) AS day, count(*) AS n, sum(f.amount) AS total "
    "FROM sales f {join} stores s ON f.store_id = s.store_id "
    "GROUP BY s.region, CAST(f.ts AS DATE)"
)
DELTAS = ("fact append", "fact delete", "dimension update")
FILE_ROWS = 1_000_000
_PAGE = 4096


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE


@contextmanager
def peak_memory() -> Iterator[Callable[[], tuple[int, int]]]:
    """The driver's (this Python process's) peak resident memory while the block runs and
    its rise above the level on entry (bytes), sampled every 5 ms. The rise shows what a
    refresh adds; memory the process already holds from earlier refreshes is reused and
    not counted again."""
    base = _rss()
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], _rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield lambda: (peak[0], max(0, peak[0] - base))
    finally:
        done.set()
        sampler.join()


def _write_fact(lakehouse: Lakehouse, table: str, start: int, count: int, stores: int) -> None:
    spark = lakehouse.spark
    frame = spark.range(start, start + count, numPartitions=max(1, count // FILE_ROWS))
    rows = frame.selectExpr(
        "id",
        f"(id * 7919) % {stores} AS store_id",  # each data file meets nearly every store
        "CAST((id % 9700) / 100 AS DECIMAL(12,2)) AS amount",
        "timestamp_seconds(1704067200 + id % 31536000) AS ts",
    )
    if start == 0:
        writer = rows.writeTo(table).tableProperty("format-version", "2")
        for operation in ("delete", "update", "merge"):
            writer = writer.tableProperty(f"write.{operation}.mode", "merge-on-read")
        writer.create()
    else:
        rows.writeTo(table).append()


def _write_dimension(lakehouse: Lakehouse, table: str, stores: int) -> None:
    frame = lakehouse.spark.range(0, stores, numPartitions=max(1, stores // FILE_ROWS))
    writer = (
        frame.selectExpr("id AS store_id", "concat('r', CAST(id % 50 AS STRING)) AS region")
        .writeTo(table)
        .tableProperty("format-version", "2")
    )
    for operation in ("delete", "update", "merge"):
        writer = writer.tableProperty(f"write.{operation}.mode", "merge-on-read")
    writer.create()


def run_size(
    lakehouse: Lakehouse, facts: int, stores: int, runs: int, deltas: list[str]
) -> list[dict[str, Any]]:
    namespace = f"star_{uuid.uuid4().hex[:6]}"
    ensure_namespace(lakehouse.catalog, (namespace,))
    sales = lakehouse.quoted(Identifier((namespace,), "sales"))
    dimension = lakehouse.quoted(Identifier((namespace,), "stores"))
    started = time.time()
    _write_fact(lakehouse, sales, 0, facts, stores)
    _write_dimension(lakehouse, dimension, stores)
    print(
        f"\n[{facts:,} sales x {stores:,} stores] written in {time.time() - started:.1f} s",
        flush=True,
    )
    mvs = {}
    for shape, join in SHAPES.items():
        mv = Identifier((namespace,), shape)
        create_mv(lakehouse, mv, SQL.format(join=join), {"icemv.refresh-policy": "incremental"})
        refresh_mv(lakehouse, mv)
        mvs[shape] = mv
    freeze_startup_heap()  # as the daemon does once started (service/heap.py)
    cache = shared_cache()
    results = []
    next_id = facts
    for delta in deltas:
        timings: dict[str, list[dict[str, Any]]] = {shape: [] for shape in mvs}
        for run in range(runs):
            next_id = _apply(lakehouse, delta, sales, dimension, facts, stores, run, next_id)
            for shape, mv in mvs.items():
                restricted, tables = cache.rows_restricted, cache.tables_read
                with peak_memory() as peak:
                    incremental_s, full_s, incremental, full = incremental_then_full(lakehouse, mv)
                measured = {
                    "incremental_s": incremental_s,
                    "full_s": full_s,
                    "result": incremental,
                    "full": full,
                    "rows_restricted": cache.rows_restricted - restricted,
                    "tables_read_whole": cache.tables_read - tables,
                    "peak_bytes": peak()[0],
                    "rise_bytes": peak()[1],
                }
                timings[shape].append(measured)
                print(
                    f"  {shape:6} {delta:17} run {run + 1}/{runs} {incremental_s:7.2f} s "
                    f"({incremental.mode}, {incremental.engine})  full {full_s:7.2f} s  "
                    f"phases {_phases(incremental.phase_seconds)}  rows read "
                    f"{incremental.source_rows_read or 0:,} + {measured['rows_restricted']:,} "
                    f"restricted, {measured['tables_read_whole']} whole  driver peak "
                    f"{measured['peak_bytes'] / 2**20:.0f} MiB "
                    f"(+{measured['rise_bytes'] / 2**20:.0f})",
                    flush=True,
                )
                if incremental.engine_reason:
                    print(f"      not DuckDB: {incremental.engine_reason}", flush=True)
        for shape, measured_runs in timings.items():
            results.append(_row(facts, stores, shape, delta, measured_runs))
    return results


def _apply(
    lakehouse: Lakehouse,
    delta: str,
    sales: str,
    dimension: str,
    facts: int,
    stores: int,
    run: int,
    next_id: int,
) -> int:
    """One run's delta (each run a different range); the next fact id to append."""
    count = max(1, facts // 1000)
    if delta == "fact append":
        _write_fact(lakehouse, sales, next_id, count, stores)
        return next_id + count
    if delta == "fact delete":
        low = facts // 3 + run * 2 * count
        lakehouse.spark.sql(f"DELETE FROM {sales} WHERE id >= {low} AND id < {low + count}")
        return next_id
    changed = max(1, stores // 1000)
    low = stores // 2 + run * 2 * changed
    lakehouse.spark.sql(
        f"UPDATE {dimension} SET region = concat(region, 'x') "
        f"WHERE store_id >= {low} AND store_id < {low + changed}"
    )
    return next_id


def _row(
    facts: int, stores: int, shape: str, delta: str, runs: list[dict[str, Any]]
) -> dict[str, Any]:
    incremental_s = statistics.median(r["incremental_s"] for r in runs)
    full_s = statistics.median(r["full_s"] for r in runs)
    results: list[RefreshResult] = [r["result"] for r in runs]
    last = results[-1]
    return {
        "fact_rows": facts,
        "dimension_rows": stores,
        "shape": shape,
        "delta": delta,
        "runs": len(runs),
        "incremental_engines": [r.engine if r.mode == "incremental" else "full" for r in results],
        "engine_reason": last.engine_reason,
        "incremental_seconds": round(incremental_s, 3),
        "full_seconds": round(full_s, 3),
        "incremental_seconds_runs": [round(r["incremental_s"], 3) for r in runs],
        "full_seconds_runs": [round(r["full_s"], 3) for r in runs],
        "speedup": round(full_s / incremental_s, 1) if incremental_s else None,
        "rows_read": last.source_rows_read,
        "rows_restricted": runs[-1]["rows_restricted"],
        "tables_read_whole": [r["tables_read_whole"] for r in runs],
        "driver_peak_mib": round(max(r["peak_bytes"] for r in runs) / 2**20, 1),
        "driver_rise_mib": round(max(r["rise_bytes"] for r in runs) / 2**20, 1),
        "incremental_phases": _median_phases(results),
    }


def print_table(results: list[dict[str, Any]]) -> None:
    print()
    header = (
        f"{'fact x dimension':>22} {'join':5} {'delta':17} {'incr s':>7} {'full s':>7} "
        f"{'speedup':>8} {'engine':6} {'peak MiB':>12}  median phases (incr)"
    )
    print_header(header)
    for r in results:
        size = f"{r['fact_rows']:,} x {r['dimension_rows']:,}"
        engines = set(r["incremental_engines"])
        engine = engines.pop() if len(engines) == 1 else "mixed"
        print(
            f"{size:>22} {r['shape']:5} {r['delta']:17} {r['incremental_seconds']:>7.2f} "
            f"{r['full_seconds']:>7.2f} {('x' + str(r['speedup'])):>8} {engine or '-':6} "
            f"{r['driver_peak_mib']:>6.0f} (+{r['driver_rise_mib']:>3.0f})  "
            f"{_phases(r['incremental_phases'])}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--sizes", default="10000000:1000000,50000000:5000000", help="fact:dimension rows, ..."
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--deltas", default=",".join(DELTAS), help="comma-separated")
    parser.add_argument("--out", default="bench-results/star.json")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SETTING=N",
        help="a refresh setting other than its default, e.g. embedded_join_max_rows=100000000",
    )
    args = parser.parse_args()
    deltas = args.deltas.split(",")
    unknown = [d for d in deltas if d not in DELTAS]
    sizes = [tuple(int(n) for n in size.split(":")) for size in args.sizes.split(",")]
    if any("=" not in setting for setting in args.set):
        parser.error("--set takes SETTING=N")
    if unknown or args.runs < 1 or any(len(s) != 2 or min(s) < 1 for s in sizes):
        parser.error(f"bad --deltas ({', '.join(unknown)}), --runs or --sizes")
    settings = dict(setting.split("=", 1) for setting in args.set)
    found = machine()
    workdir = Path(tempfile.mkdtemp(prefix="icemv-star-"))
    lakehouse = _lakehouse({"uri": "embedded"}, workdir)
    if settings:
        config = lakehouse.config
        refresh = config.refresh.model_validate({**config.refresh.model_dump(), **settings})
        lakehouse = Lakehouse(config.model_copy(update={"refresh": refresh}))
        print(f"refresh settings: {settings}")
    results: list[dict[str, Any]] = []
    for facts, stores in sizes:
        results += run_size(lakehouse, facts, stores, args.runs, deltas)
    from icemv.engine.spark import stop_spark

    stop_spark()
    print_table(results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {"machine": found, "settings": settings, "results": results}
    out.write_text(json.dumps(document, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
