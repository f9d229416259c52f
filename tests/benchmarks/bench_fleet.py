"""A fleet of MVs over one hot table, with the daemon running: `make bench-fleet`.

    python -m tests.benchmarks.bench_fleet --rows 1000000 --mvs 10,30,100 --commits 3

One source table of `--rows` rows and a 1,000-row dimension table (PostgreSQL catalog,
local Spark); for each N in `--mvs`, N MVs over the source, of seven shapes in turn
(filter; GROUP BY with COUNT/SUM; GROUP BY with AVG; join with the dimension + GROUP BY; a
filter on DECIMAL money; DECIMAL sums by `CAST(ts AS DATE)` and by `date_trunc('HOUR', ts)`),
each with its own filter so the views differ. The fleet grows: N=30 keeps N=10's MVs.

Per N and mode (`poll`: polling every `--poll-interval` s; `kafka`: a Tansu broker and
icemv's commit event per commit, polling off) the daemon (`Daemon.run` in a thread, as
`icemv run` runs it) starts, brings the fleet fresh, then:

- idle for `--idle-seconds`: polls run, catalog requests are counted (SQL statements on the
  catalog database; the JVM's own catalog reads are not), and the CPU time of this process
  and its children (the daemon's threads and Spark's JVM; the bench only waits) is taken;
- `--commits` times: another writer (pyiceberg) appends `--append` rows; the time until all
  N MVs have absorbed the commit, each MV's commit->fresh (the source commit's timestamp to
  the storage commit's, as `icemv_commit_to_fresh_seconds`), and the median of each refresh
  phase (from the daemon's results, which its `refresh` log lines and
  `icemv_refresh_phase_seconds` carry), and the CPU seconds this process (the daemon's
  threads and the bench's append) and the refresh workers spent meanwhile.

With `--processes 0,2`, each N and mode runs once per value of `refresh.processes` (0: every
refresh in the daemon's process; 2: the embedded engine's refreshes in two worker
processes), one after the other on the same fleet, and prints the workers' resident memory.

Prints a line per idle window and per commit, a summary table of medians over the commits,
and writes JSON (`--out`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from icemv.catalog.namespaces import ensure_namespace
from icemv.config import Config
from icemv.events.publisher import CommitEventPublisher
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.logs import configure_logging
from icemv.mv.lifecycle import create_mv
from icemv.mv.model import load_materialized_view
from icemv.refresh.phases import PHASES
from icemv.refresh.result import RefreshResult
from tests.benchmarks.bench_concurrency import _lakehouse, _RecordingDaemon
from tests.benchmarks.bench_latency import _summary, append_batch, running
from tests.benchmarks.bench_poll import Counts
from tests.benchmarks.bench_refresh import _write_rows, machine, print_header, write_zones
from tests.support.daemon import daemon_config, is_fresh, kafka_settings, wait_for
from tests.support.kafka_broker import TansuBroker

SHAPES: tuple[Callable[[int], str], ...] = (
    lambda n: f"SELECT id, vendor, fare FROM base WHERE zone_id % 100 = {n % 100}",
    lambda n: (
        "SELECT vendor, zone_id % 10 AS zone, count(*) AS n, sum(fare * 2) AS s "
        f"FROM base WHERE zone_id >= {n} GROUP BY vendor, zone_id % 10"
    ),
    lambda n: (
        f"SELECT day, count(*) AS n, avg(fare) AS mean FROM base WHERE zone_id >= {n} GROUP BY day"
    ),
    lambda n: (
        "SELECT z.region, b.vendor, count(*) AS n, sum(b.fare) AS s FROM base b "
        f"JOIN zones z ON b.zone_id = z.zone_id WHERE b.zone_id >= {n} "
        "GROUP BY z.region, b.vendor"
    ),
    # The types real tables have: a filter on DECIMAL money, sums by day and by hour.
    lambda n: f"SELECT id, vendor, amount, ts FROM base WHERE amount > {n % 90}.50",
    lambda n: (
        "SELECT CAST(ts AS DATE) AS day, vendor, count(*) AS n, sum(amount) AS total "
        f"FROM base WHERE zone_id >= {n} GROUP BY CAST(ts AS DATE), vendor"
    ),
    lambda n: (
        "SELECT date_trunc('HOUR', ts) AS hour, sum(amount) AS total, avg(amount) AS mean "
        f"FROM base WHERE zone_id >= {n} GROUP BY date_trunc('HOUR', ts)"
    ),
)
SHAPE_NAMES = ("filter", "sum", "avg", "join", "decimal_filter", "decimal_by_day", "by_hour")


def mv_sql(n: int) -> str:
    """The n-th MV's view SQL: the shapes in turn, each with a filter of its own."""
    return SHAPES[n % len(SHAPES)](n)


class Fleet:
    """The source, the dimension and the MVs over them, in one namespace."""

    def __init__(self, lakehouse: Lakehouse, rows: int) -> None:
        self.lakehouse = lakehouse
        self.namespace = f"fleet_{uuid.uuid4().hex[:6]}"
        ensure_namespace(lakehouse.catalog, (self.namespace,))
        self.base = Identifier((self.namespace,), "base")
        started = time.time()
        _write_rows(lakehouse, lakehouse.quoted(self.base), 0, rows, "merge-on-read")
        write_zones(lakehouse, lakehouse.quoted(Identifier((self.namespace,), "zones")))
        print(f"source: {rows:,} rows in {time.time() - started:.1f} s", flush=True)
        self.next_id = rows
        self.storage: dict[Identifier, Identifier] = {}
        self.worker_of: dict[Identifier, int | None] = {}  # the worker of each MV's last refresh

    def grow(self, mvs: int) -> None:
        for n in range(len(self.storage), mvs):
            mv = Identifier((self.namespace,), f"mv{n:03d}_{SHAPE_NAMES[n % len(SHAPES)]}")
            create_mv(
                self.lakehouse, mv, mv_sql(n), properties={"icemv.refresh-policy": "incremental"}
            )
            self.storage[mv] = load_materialized_view(self.lakehouse, mv).storage

    def all_fresh(self) -> bool:
        return all(is_fresh(self.lakehouse, mv) for mv in self.storage)


def cpu_seconds(process: psutil.Process) -> float:
    """User + system CPU of a process and its live children (Spark's JVM)."""
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            total += times.user + times.system
    return total


def workers() -> list[psutil.Process]:
    """The refresh worker processes (spawned children of this one)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "multiprocessing.spawn" in " ".join(child.cmdline()):
                found.append(child)
    return found


def worker_memory_mb() -> list[int]:
    """Resident memory of each refresh worker process."""
    found = []
    for worker in workers():
        with contextlib.suppress(psutil.Error):
            found.append(round(worker.memory_info().rss / 2**20))
    return sorted(found)


def cpu_split() -> dict[str, float]:
    """CPU seconds so far of this process (the bench, the daemon's threads) and of the
    refresh workers: where a commit's CPU went, beside its wall-clock time."""
    own = psutil.Process().cpu_times()
    total = 0.0
    for worker in workers():
        with contextlib.suppress(psutil.Error):
            times = worker.cpu_times()
            total += times.user + times.system
    return {"daemon": own.user + own.system, "workers": total}


def _overruns(daemon: _RecordingDaemon) -> float:
    return daemon.metrics.registry.get_sample_value("icemv_poll_overruns_total") or 0.0


def idle_window(daemon: _RecordingDaemon, seconds: float) -> dict[str, Any]:
    """Catalog requests, polls and CPU while nothing changes (the window is the measurement)."""
    polls = [0]
    poll = daemon.reconciler.poll

    def counted_poll() -> None:
        polls[0] += 1
        poll()

    daemon.reconciler.poll = counted_poll  # type: ignore[method-assign]
    counts = Counts()
    process = psutil.Process()
    overruns = _overruns(daemon)
    with counts.installed(daemon.lakehouse):
        cpu, started = cpu_seconds(process), time.monotonic()
        time.sleep(seconds)
        cpu, elapsed = cpu_seconds(process) - cpu, time.monotonic() - started
    daemon.reconciler.poll = poll  # type: ignore[method-assign]
    taken = counts.take()
    requests = taken.get("sql", 0) + taken.get("http", 0)
    return {
        "seconds": round(elapsed, 1),
        "polls": polls[0],
        "catalog_requests": requests,
        "catalog_requests_per_poll": round(requests / polls[0], 1) if polls[0] else None,
        "metadata_reads": taken.get("table_metadata_reads", 0)
        + taken.get("view_metadata_reads", 0),
        "poll_overruns": int(_overruns(daemon) - overruns),
        "cpu_percent_of_one_core": round(100 * cpu / elapsed, 1),
    }


def one_commit(
    fleet: Fleet,
    daemon: _RecordingDaemon,
    rows: int,
    publisher: CommitEventPublisher | None,
    timeout: float,
) -> dict[str, Any]:
    """Append, wait until every MV absorbed the commit, and time it from the storage commits."""
    lakehouse = fleet.lakehouse
    daemon.results.clear()
    cpu = cpu_split()
    snapshot = append_batch(lakehouse, fleet.base, fleet.next_id, rows, publisher)
    fleet.next_id += rows
    absorbed: dict[Identifier, RefreshResult] = {}

    def all_absorbed() -> bool:
        for result in list(daemon.results):
            ids = {s.snapshot_id for s in result.sources if s.type == "table"}
            if result.committed and snapshot.snapshot_id in ids:
                absorbed.setdefault(result.mv, result)
        return len(absorbed) == len(fleet.storage)

    wait_for(all_absorbed, timeout, f"all {len(fleet.storage)} MVs absorbed the commit")
    # The bench's append (pyiceberg) counts as the daemon's; a worker replaced meanwhile
    # loses its CPU from the sum.
    cpu = {k: round(v - cpu[k], 2) for k, v in cpu_split().items()}
    latencies = []
    for mv, result in absorbed.items():
        assert result.storage_snapshot_id is not None
        stored = lakehouse.load_table(fleet.storage[mv]).snapshot_by_id(result.storage_snapshot_id)
        assert stored is not None
        latencies.append((stored.timestamp_ms - snapshot.timestamp_ms) / 1000)
    results = list(absorbed.values())
    # MVs refreshed by another worker than last time (what a worker keeps of an MV, its
    # trees and storage rows, serves only its own next refresh).
    moved = sum(1 for r in results if fleet.worker_of.get(r.mv, r.worker_pid) != r.worker_pid)
    fleet.worker_of.update({r.mv: r.worker_pid for r in results})
    return {
        "moved_workers": moved,
        "all_fresh_seconds": round(max(latencies), 3),
        "per_mv": _summary(latencies),
        "phases_median": {
            p: round(statistics.median(r.phase_seconds.get(p, 0.0) for r in results), 3)
            for p in PHASES
        },
        # CPU of the thread that ran each refresh (a worker's, or the daemon's), by phase.
        "phases_cpu_median_ms": {
            p: round(1000 * statistics.median(r.phase_cpu_seconds.get(p, 0.0) for r in results), 1)
            for p in PHASES
        },
        "cpu_ms_per_refresh_median": round(
            1000 * statistics.median(sum(r.phase_cpu_seconds.values()) for r in results), 1
        ),
        "modes": sorted({str(r.mode) for r in results}),
        # Who computed each delta (duckdb / spark), and why not DuckDB.
        "engines": dict(Counter(str(r.engine) for r in results)),
        "spark_reasons": sorted({r.engine_reason for r in results if r.engine_reason}),
        "refreshes": len(daemon.results),
        "cpu_seconds": cpu,
    }


def run_mode(
    fleet: Fleet, config: Config, args: argparse.Namespace, publisher: CommitEventPublisher | None
) -> dict[str, Any]:
    label = f"N={len(fleet.storage)} {'kafka' if publisher else 'poll'}"
    daemon = _RecordingDaemon(config, fleet.lakehouse)
    with running(daemon):
        started = time.monotonic()
        wait_for(fleet.all_fresh, args.timeout, "the fleet fresh before the first commit")
        wait_for(lambda: not daemon.scheduler.pending(), args.timeout, "refreshes done")
        print(f"{label}: fleet fresh after start in {time.monotonic() - started:.1f} s", flush=True)
        # The rehearsals after start warm the workers (refresh/rehearsal.py): done before
        # the idle window, which they would otherwise count.
        wait_for(daemon.rehearsed.is_set, args.timeout, "the rehearsals after start")
        print(f"{label}: rehearsed after start in {time.monotonic() - started:.1f} s", flush=True)
        idle = idle_window(daemon, args.idle_seconds)
        print(f"{label} idle: {idle}", flush=True)
        commits = []
        for i in range(args.commits):
            commit = one_commit(fleet, daemon, args.append, publisher, args.timeout)
            commits.append(commit)
            print(
                f"{label} commit {i + 1}: all fresh {commit['all_fresh_seconds']:.2f} s; per MV "
                f"p50 {commit['per_mv']['p50']:.2f} s p95 {commit['per_mv']['p95']:.2f} s; "
                f"phases {commit['phases_median']}; CPU ms per refresh "
                f"{commit['cpu_ms_per_refresh_median']} {commit['phases_cpu_median_ms']}; "
                f"modes {commit['modes']}; "
                f"engines {commit['engines']} {commit['spark_reasons']}; "
                f"CPU s {commit['cpu_seconds']}; "
                f"max_concurrent={config.refresh.max_concurrent} "
                f"processes={config.refresh.processes}; "
                f"in workers {sum(1 for r in daemon.results if r.worker_pid)}, "
                f"{commit['moved_workers']} on another worker than last time",
                flush=True,
            )
        workers_mb = worker_memory_mb()
        if workers_mb:
            print(f"{label}: refresh workers' resident memory (MB) {workers_mb}", flush=True)
    return {
        "mvs": len(fleet.storage),
        "mode": "kafka" if publisher else "poll",
        "worker_rss_mb": workers_mb,
        "max_concurrent": config.refresh.max_concurrent,
        "processes": config.refresh.processes,
        "idle": idle,
        "commits": commits,
        "median": {
            "all_fresh_seconds": statistics.median(c["all_fresh_seconds"] for c in commits),
            "per_mv_p50": statistics.median(c["per_mv"]["p50"] for c in commits),
            "per_mv_p95": statistics.median(c["per_mv"]["p95"] for c in commits),
            "phases": {
                p: round(statistics.median(c["phases_median"][p] for c in commits), 3)
                for p in PHASES
            },
            "cpu_ms_per_refresh": statistics.median(
                c["cpu_ms_per_refresh_median"] for c in commits
            ),
            "phases_cpu_ms": {
                p: statistics.median(c["phases_cpu_median_ms"][p] for c in commits) for p in PHASES
            },
            "all_fresh_worst_seconds": max(c["all_fresh_seconds"] for c in commits),
        },
    }


def run_with(
    fleet: Fleet,
    lakehouse: Lakehouse,
    mode: str,
    refresh: dict[str, int],
    broker: TansuBroker | None,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One daemon over the fleet: polling only, or Kafka events with polling off."""
    if mode == "poll" or broker is None:
        config = daemon_config(
            lakehouse.config, polling={"interval_seconds": args.poll_interval}, refresh=refresh
        )
        return run_mode(fleet, config, args, None)
    topic = f"fleet-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic)
    config = daemon_config(
        lakehouse.config,
        kafka=kafka_settings(broker, topic),
        polling={"interval_seconds": 3600},  # events only
        refresh=refresh,
    )
    with CommitEventPublisher(config.kafka, topic) as publisher:
        return run_mode(fleet, config, args, publisher)


def print_table(runs: list[dict[str, Any]]) -> None:
    print("\nmedians over the commits (seconds)")
    header = (
        f"{'N':>4} {'mode':6} {'conc':>4} {'proc':>4} {'all fresh':>9} {'worst':>6} "
        f"{'MV p50':>7} {'MV p95':>7} {'req/poll':>8} {'idle CPU %':>10} {'CPU ms':>6}  "
        "CPU ms by phase (median)"
    )
    print_header(header)
    for run in runs:
        m, idle = run["median"], run["idle"]
        per_poll = idle["catalog_requests_per_poll"]
        print(
            f"{run['mvs']:>4} {run['mode']:6} {run['max_concurrent']:>4} {run['processes']:>4} "
            f"{m['all_fresh_seconds']:>9.2f} {m['all_fresh_worst_seconds']:>6.2f} "
            f"{m['per_mv_p50']:>7.2f} {m['per_mv_p95']:>7.2f} "
            f"{'-' if per_poll is None else per_poll:>8} {idle['cpu_percent_of_one_core']:>10} "
            f"{m['cpu_ms_per_refresh']:>6.1f}  "
            + " ".join(f"{p}={s:.1f}" for p, s in m["phases_cpu_ms"].items())
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--mvs", default="10,30,100", help="fleet sizes, growing")
    parser.add_argument("--modes", default="poll,kafka")
    parser.add_argument("--commits", type=int, default=3)
    parser.add_argument("--append", type=int, default=1000)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--max-concurrent", type=int, default=None, help="default: the config's")
    parser.add_argument(
        "--processes",
        default=None,
        help="refresh.processes, one run each (e.g. 0,2; in turn per N and mode); default: "
        "the config's",
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--out", default="bench-results/fleet.json")
    args = parser.parse_args()
    sizes = [int(n) for n in args.mvs.split(",")]
    modes = args.modes.split(",")
    if sizes != sorted(sizes) or not set(modes) <= {"poll", "kafka"}:
        parser.error("--mvs must grow; --modes is poll and/or kafka")
    workdir = Path(tempfile.mkdtemp(prefix="icemv-fleet-"))
    runs: list[dict[str, Any]] = []
    with contextlib.ExitStack() as cleanup:
        from tests.conftest import ADMIN_URL, create_database, drop_database

        catalog = create_database(ADMIN_URL)
        cleanup.callback(drop_database, ADMIN_URL, catalog)
        lakehouse = _lakehouse(catalog, workdir, args.master, fifo=False)
        configure_logging(lakehouse.config.logging)  # warnings only: the bench's own lines
        broker = None
        if "kafka" in modes:
            broker = cleanup.enter_context(TansuBroker(workdir / "tansu.log"))
        fleet = Fleet(lakehouse, args.rows)
        for size in sizes:
            fleet.grow(size)
            for mode in modes:
                for processes in args.processes.split(",") if args.processes else [None]:
                    refresh: dict[str, int] = {}
                    if args.max_concurrent is not None:
                        refresh["max_concurrent"] = args.max_concurrent
                    if processes is not None:
                        refresh["processes"] = int(processes)
                    runs.append(run_with(fleet, lakehouse, mode, refresh, broker, args))
        from icemv.engine.spark import stop_spark

        stop_spark()
    print_table(runs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"rows": args.rows, "append": args.append, "poll_interval_seconds": args.poll_interval,
              "machine": machine(), "runs": runs}  # fmt: skip
    out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
