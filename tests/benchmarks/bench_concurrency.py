"""Do refreshes of different MVs overlap? Time until N MVs are fresh by `max_concurrent`.

N aggregate MVs over one source (each its own filter, so they are distinct views), all
refreshed once; then per `max_concurrent` setting: append a small batch to the source,
request a refresh of every MV from a `RefreshScheduler` (as the daemon does) and time
until every future is done. Prints the wall time, the sum of refresh durations, the
largest number of refreshes that ran at once (from each result's start and duration) and
the median phase figures.

    python -m tests.benchmarks.bench_concurrency --mvs 20 --rows 1000000 --concurrency 1,2,4
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import threading
import time
import uuid
from concurrent.futures import wait
from pathlib import Path

from icemv.catalog.namespaces import ensure_namespace
from icemv.config import Config, RefreshConfig, parse_config
from icemv.engine.spark import activate, use_scheduler_pool
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.refresh.phases import PHASES
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from icemv.service.daemon import Daemon
from icemv.service.scheduler import RefreshScheduler
from tests.support.daemon import max_overlap

ROW_EXPR = [
    "id",
    "CAST(id % 1000 AS INT) AS zone_id",
    "concat('v', CAST(id % 5 AS STRING)) AS vendor",
    "CAST(id % 97 AS DOUBLE) * 1.5 AS fare",
]


def _lakehouse(catalog_uri: str, workdir: Path, master: str, fifo: bool) -> Lakehouse:
    config = parse_config(
        {
            "home": str(workdir / "home"),
            "catalog": {"uri": catalog_uri},
            "warehouse": {"location": str(workdir / "warehouse")},
            "spark": {"driver_memory": os.environ.get("ICEMV_BENCH_DRIVER_MEMORY", "4g"),
                      "shuffle_partitions": 4, "master": master,
                      "conf": {"spark.scheduler.mode": "FIFO"} if fifo else {}},
            "logging": {"level": "WARNING"},
        }
    )  # fmt: skip
    return Lakehouse(config)


def run_round(lakehouse: Lakehouse, mvs: list[Identifier], max_concurrent: int) -> None:
    def refresh(mv: Identifier) -> RefreshResult:
        activate(lakehouse.spark)
        use_scheduler_pool(lakehouse.spark, threading.current_thread().name)
        return refresh_mv(lakehouse, mv)

    config = RefreshConfig(coalesce_seconds=0, max_concurrent=max_concurrent)
    scheduler = RefreshScheduler(refresh, config)
    scheduler.start()
    started = time.time()
    futures = [scheduler.request(mv, "bench") for mv in mvs]
    wait(futures)
    wall = time.time() - started
    scheduler.stop()
    results = [f.result() for f in futures]
    modes = sorted({str(r.mode) for r in results})
    small = [r.duration_seconds for r in results if r.mode != "full"]
    small_fresh = max(
        r.started_ms / 1000 + r.duration_seconds - started for r in results if r.mode != "full"
    )
    full = [r.duration_seconds for r in results if r.mode == "full"]
    busy = sum(r.duration_seconds for r in results)
    phases = {p: statistics.median(r.phase_seconds.get(p, 0.0) for r in results) for p in PHASES}
    print(
        f"max_concurrent={max_concurrent}: all {len(mvs)} fresh after {wall:6.2f} s; "
        f"sum of refreshes {busy:6.2f} s (x{busy / wall:.2f} overlap); "
        f"peak running {max_overlap(results)}; modes {modes}; "
        f"incremental median {statistics.median(small):.2f} s, "
        f"all fresh after {small_fresh:.2f} s; "
        + (f"full {statistics.median(full):.2f} s; " if full else "")
        + "median phases "
        + " ".join(f"{p}={s:.3f}" for p, s in phases.items()),
        flush=True,
    )


class _RecordingDaemon(Daemon):
    def __init__(self, config: Config, lakehouse: Lakehouse) -> None:
        self.results: list[RefreshResult] = []
        super().__init__(config, lakehouse=lakehouse)

    def _on_result(self, result: RefreshResult) -> None:
        self.results.append(result)
        super()._on_result(result)


def run_poll_round(lakehouse: Lakehouse, mvs: list[Identifier], max_concurrent: int) -> None:
    """The daemon's path without events: one poll finds the MVs stale and requests them."""
    config = lakehouse.config.model_copy(
        update={
            "refresh": RefreshConfig(max_concurrent=max_concurrent),
            "metrics": lakehouse.config.metrics.model_copy(update={"port": 0}),
        }
    )
    daemon = _RecordingDaemon(config, lakehouse=lakehouse)
    results = daemon.results
    daemon.index.rebuild()
    daemon.scheduler.start()
    started = time.time()
    daemon.reconciler.poll()
    polled = time.time() - started
    deadline = time.monotonic() + 600
    while len({r.mv for r in results}) < len(mvs) and time.monotonic() < deadline:
        time.sleep(0.05)
    wall = time.time() - started
    daemon.scheduler.stop()
    busy = sum(r.duration_seconds for r in results)
    print(
        f"poll, max_concurrent={max_concurrent}: all {len(mvs)} fresh after {wall:6.2f} s "
        f"(the poll took {polled:.2f} s); sum of refreshes {busy:6.2f} s; "
        f"peak running {max_overlap(results)}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mvs", type=int, default=20)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--append", type=int, default=1000)
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--fifo", action="store_true", help="Spark's FIFO scheduler instead of icemv's FAIR"
    )
    parser.add_argument(
        "--full-mvs",
        type=int,
        default=0,
        help="this many more MVs (a self-join) that always recompute fully: large jobs "
        "the small deltas share the executors with",
    )
    parser.add_argument(
        "--path",
        default="scheduler",
        choices=("scheduler", "poll"),
        help="scheduler: request every MV at once; poll: the daemon's poll requests them",
    )
    parser.add_argument(
        "--catalog",
        default=os.environ.get("ICEMV_BENCH_POSTGRES"),
        help="postgresql:// URL of an empty database (default: a new database on the "
        "tests' PostgreSQL, ICEMV_TEST_POSTGRES)",
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="icemv-bench-"))
    with contextlib.ExitStack() as cleanup:
        catalog = args.catalog
        if catalog is None:
            from tests.conftest import ADMIN_URL, create_database, drop_database

            catalog = create_database(ADMIN_URL)
            cleanup.callback(drop_database, ADMIN_URL, catalog)
        run(args, _lakehouse(catalog, workdir, args.master, args.fifo))


def run(args: argparse.Namespace, lakehouse: Lakehouse) -> None:
    spark = lakehouse.spark
    namespace = f"bench_{uuid.uuid4().hex[:6]}"
    ensure_namespace(lakehouse.catalog, (namespace,))
    base = lakehouse.quoted(Identifier((namespace,), "base"))
    spark.range(args.rows).selectExpr(*ROW_EXPR).writeTo(base).tableProperty(
        "format-version", "2"
    ).create()
    mvs = []
    for n in range(args.mvs):
        mv = Identifier((namespace,), f"mv{n}")
        sql = (
            "SELECT vendor, zone_id % 10 AS zone, count(*) AS n, sum(fare) AS s "
            f"FROM base WHERE zone_id >= {n} GROUP BY vendor, zone_id % 10"
        )
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental"})
        refresh_mv(lakehouse, mv)
        mvs.append(mv)
    for n in range(args.full_mvs):
        mv = Identifier((namespace,), f"full{n}")
        sql = (
            "SELECT a.vendor, count(*) AS n, sum(b.fare) AS s FROM base a "
            "JOIN base b ON a.id = b.id GROUP BY a.vendor"
        )
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "full"})
        refresh_mv(lakehouse, mv)
        mvs.insert(0, mv)  # requested first, as if a large recompute were under way
    print(f"{args.mvs} MVs over {args.rows:,} rows, appends of {args.append:,}", flush=True)
    next_id = args.rows
    for _ in range(args.repeat):
        for max_concurrent in (int(c) for c in args.concurrency.split(",")):
            spark.range(next_id, next_id + args.append).selectExpr(*ROW_EXPR).writeTo(base).append()
            next_id += args.append
            if args.path == "poll":
                run_poll_round(lakehouse, mvs, max_concurrent)
            else:
                run_round(lakehouse, mvs, max_concurrent)
    from icemv.engine.spark import stop_spark

    stop_spark()


if __name__ == "__main__":
    main()
