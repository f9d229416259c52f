"""Commit-to-fresh latency of the daemon, Kafka vs poll-only, and the event path alone.

    python -m tests.benchmarks.bench_latency --rows 10000000 --commits 100

Each commit appends a small batch to the base table (as another writer would, with
pyiceberg) and, in Kafka mode, publishes icemv's commit event; the next commit waits until
the MV is fresh. Latency = commit time of the source snapshot -> commit time of the storage
snapshot that absorbed it (what `icemv_commit_to_fresh_seconds` measures).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from pyiceberg.table.snapshots import Snapshot

from icemv.config import Config, parse_config
from icemv.events.formats.icemv import IcemvCommitEvent
from icemv.events.publisher import CommitEventPublisher
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.history import refresh_history
from icemv.mv.lifecycle import create_mv
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from icemv.service.daemon import Daemon
from icemv.service.metrics import Metrics
from icemv.service.router import EventRouter
from icemv.service.scheduler import RefreshScheduler
from icemv.service.source_index import SourceIndex
from tests.benchmarks.bench_refresh import ROW_EXPR
from tests.support.kafka_broker import TansuBroker

NAMESPACE = "latency"
MV_SQL = "SELECT day, vendor, count(*) AS n, sum(fare) AS s FROM base GROUP BY day, vendor"


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 3),
        "p95": round(_percentile(values, 0.95), 3),
        "max": round(max(values), 3),
        "mean": round(statistics.fmean(values), 3),
    }


def _wait_absorbed(
    lakehouse: Lakehouse, storage: Identifier, snapshot_id: int, timeout: float
) -> float:
    """Seconds from the source commit to the storage commit that recorded it."""
    base = lakehouse.load_table(Identifier((NAMESPACE,), "base"))
    committed = base.snapshot_by_id(snapshot_id)
    assert committed is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for record in refresh_history(lakehouse.load_table(storage)):
            ids = {s.snapshot_id for s in record.state.tables()}
            if snapshot_id in ids:
                return (record.timestamp_ms - committed.timestamp_ms) / 1000.0
        time.sleep(0.05)
    raise TimeoutError(f"snapshot {snapshot_id} not absorbed within {timeout}s")


def _run_mode(
    lakehouse: Lakehouse,
    config: Config,
    commits: int,
    publisher: CommitEventPublisher | None,
    topic: str,
) -> list[float]:
    storage = Identifier((NAMESPACE,), "agg__storage")
    latencies = []
    base = Identifier((NAMESPACE,), "base")
    with running(Daemon(config, lakehouse=lakehouse)):
        for i in range(commits):
            snapshot = append_batch(lakehouse, base, 10**9 + i * 100, 100, publisher)
            latencies.append(_wait_absorbed(lakehouse, storage, snapshot.snapshot_id, 120))
    return latencies


@contextlib.contextmanager
def running(daemon: Daemon) -> Iterator[Daemon]:
    """The daemon in a thread, ready and (with Kafka) in its consumer group; stopped after."""
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    try:
        assert daemon.ready.wait(180), "daemon not ready"
        deadline = time.monotonic() + 60
        while daemon.consumer is not None and not (
            daemon.consumer.connected and daemon.consumer.assigned()
        ):  # a commit published before the group is joined would wait for the next poll
            assert time.monotonic() < deadline, "consumer did not join its group"
            time.sleep(0.1)
        yield daemon
    finally:
        daemon.stop()
        thread.join(120)


def append_batch(
    lakehouse: Lakehouse,
    base: Identifier,
    start: int,
    rows: int,
    publisher: CommitEventPublisher | None,
) -> Snapshot:
    """Append `rows` rows with pyiceberg, as another writer would, and (given a publisher)
    publish icemv's commit event for the new snapshot."""
    table = lakehouse.load_table(base)
    table.append(_batch(table, start, rows))
    snapshot = lakehouse.load_table(base).current_snapshot()
    assert snapshot is not None
    if publisher is not None:
        publisher.publish(IcemvCommitEvent(
            list(base.namespace), base.name, table_uuid=str(table.metadata.table_uuid),
            snapshot_id=snapshot.snapshot_id, timestamp_ms=snapshot.timestamp_ms,
        ))  # fmt: skip
    return snapshot


def _batch(table: Any, start: int, rows: int) -> Any:
    """Rows shaped like ROW_EXPR's, written by pyiceberg as another writer would."""
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    ids = range(start, start + rows)
    epoch = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    columns = {
        "id": list(ids),
        "key": [i // 4 for i in ids],
        "zone_id": [i % 1000 for i in ids],
        "vendor": [f"v{i % 5}" for i in ids],
        "fare": [(i % 97) * 1.5 for i in ids],
        "day": [dt.date(2024, 1, 1) + dt.timedelta(days=i % 365) for i in ids],
        "amount": [Decimal(i % 9700) / 100 for i in ids],
        "ts": [epoch + dt.timedelta(seconds=i % 31536000) for i in ids],
    }
    return pa.Table.from_pydict(columns, schema=table.schema().as_arrow())


def event_path_rate(lakehouse: Lakehouse, events: int) -> float:
    """Events per second through parse, dedup, route and coalesce (no refresh runs)."""
    index = SourceIndex(lakehouse)
    index.rebuild()
    mv = Identifier((NAMESPACE,), "agg")
    done: RefreshResult = RefreshResult(mv, "skipped", "bench", None, 0, 0, (), 0, 0.0)
    scheduler = RefreshScheduler(
        lambda _: done, lakehouse.config.refresh.model_copy(update={"coalesce_seconds": 3600})
    )
    scheduler.start()
    router = EventRouter(
        lakehouse.catalog_name,
        index,
        Metrics(),
        lakehouse.table_exists,
        scheduler.request,
        lambda: None,
    )
    records = []
    for i in range(events):
        key, value = IcemvCommitEvent(
            [NAMESPACE], "base", table_uuid=str(uuid.UUID(int=1)), snapshot_id=i
        ).encode()
        records.append(_Record("bench", 0, i, key, value))
    started = time.perf_counter()
    futures: list[Future[RefreshResult]] = []
    for record in records:
        futures += router.handle(record)
    elapsed = time.perf_counter() - started
    scheduler.stop(0)
    assert len(futures) == events
    return events / elapsed


class _Record:
    def __init__(self, topic: str, partition: int, offset: int, key: bytes, value: bytes) -> None:
        self.topic, self.partition, self.offset, self.key, self.value = (
            topic,
            partition,
            offset,
            key,
            value,
        )
        self.headers: list[tuple[str, bytes]] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--out", default="bench-results/latency.json")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="icemv-latency-"))
    broker = TansuBroker(workdir / "tansu.log")
    broker.start()
    topic = "icemv-commits"
    broker.create_topic(topic, partitions=1)
    config = parse_config(
        {
            "home": str(workdir / "home"),
            "warehouse": {"location": str(workdir / "warehouse")},
            "spark": {"driver_memory": "6g", "shuffle_partitions": 4},
            "metrics": {"port": 0},
            "logging": {"level": "WARNING"},
            "refresh": {"coalesce_seconds": 0.05},
        }
    )
    lakehouse = Lakehouse(config)
    spark = lakehouse.spark
    lakehouse.catalog.create_namespace(NAMESPACE)
    started = time.time()
    spark.range(0, args.rows, numPartitions=max(1, args.rows // 1_000_000)).selectExpr(
        *ROW_EXPR
    ).writeTo(f"`lake`.`{NAMESPACE}`.`base`").tableProperty("format-version", "2").create()
    print(f"base table: {args.rows:,} rows in {time.time() - started:.1f} s", flush=True)
    mv = Identifier((NAMESPACE,), "agg")
    create_mv(lakehouse, mv, MV_SQL, properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, mv)

    rate = event_path_rate(lakehouse, args.events)
    print(f"event path (parse, dedup, route, coalesce): {rate:,.0f} events/s", flush=True)

    kafka_config = config.model_copy(
        update={
            "kafka": config.kafka.model_copy(
                update={"bootstrap_servers": [broker.bootstrap], "topics": [topic],
                        "group_id": "bench", "session_timeout_ms": 6000,
                        "auto_offset_reset": "earliest"}
            ),
            "polling": config.polling.model_copy(update={"interval_seconds": 600}),
        }
    )  # fmt: skip
    poll_config = config.model_copy(
        update={
            "polling": config.polling.model_copy(update={"interval_seconds": args.poll_interval})
        }
    )
    results: dict[str, Any] = {
        "rows": args.rows,
        "commits": args.commits,
        "event_path_per_second": round(rate),
    }
    with CommitEventPublisher(kafka_config.kafka, topic) as publisher:
        kafka = _run_mode(lakehouse, kafka_config, args.commits, publisher, topic)
    results["kafka"] = _summary(kafka)
    print(f"kafka:     {results['kafka']}", flush=True)
    polled = _run_mode(lakehouse, poll_config, args.commits, None, topic)
    results["poll_only"] = {**_summary(polled), "poll_interval_seconds": args.poll_interval}
    print(f"poll-only: {results['poll_only']}", flush=True)
    broker.stop()

    print(f"\ncommit-to-fresh latency, {args.commits} commits, {args.rows:,}-row table (seconds)")
    print(f"{'mode':22} {'p50':>7} {'p95':>7} {'max':>7}")
    for mode in ("kafka", "poll_only"):
        s = results[mode]
        print(f"{mode:22} {s['p50']:>7.2f} {s['p95']:>7.2f} {s['max']:>7.2f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
