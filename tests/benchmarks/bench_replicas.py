"""Refresh attempts and storage commit conflicts per commit with several daemon replicas.

    python -m tests.benchmarks.bench_replicas [--replicas 3] [--poll-seconds 3] [--out FILE]

Starts a Tansu broker, a catalog database of its own (on the tests' PostgreSQL) and
`--replicas` daemons on one consumer group, as threads of this process sharing one Spark
session. Two base tables, six MVs (aggregates and filters over each, one join of both),
polls every `--poll-seconds`. Then five commits by another writer (pyiceberg), one at a
time: three announced by an icemv commit event, two left to the polls. After each, it waits
until every MV is fresh, every replica idle and every replica has polled twice more, and
prints how many refreshes the replicas started and how many storage commits they lost to
each other. Counted by wrapping the refresh entry point the daemon calls (`refresh_mv`),
so it measures any icemv build (`PYTHONPATH=<build>/daemon:.`).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from kafka import KafkaProducer

import icemv.service.daemon
from icemv.catalog.namespaces import ensure_namespace
from icemv.config import parse_config
from icemv.events.formats.icemv import IcemvCommitEvent
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.service.metrics import CONFLICT_ERRORS
from tests.conftest import ADMIN_URL, create_database, drop_database
from tests.support.daemon import RunningDaemon, daemon_config, is_fresh, kafka_settings, wait_for
from tests.support.kafka_broker import TansuBroker
from tests.support.tables import append_trips, create_trips

AGG = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM {t} GROUP BY vendor"
FILTER = "SELECT id, vendor, fare FROM {t} WHERE fare > 1.5"
JOIN = (
    "SELECT a.vendor, count(*) AS n FROM trips_a a JOIN trips_b b ON a.vendor = b.vendor "
    "GROUP BY a.vendor"
)
SHAPES = {
    "agg_a": (AGG.format(t="trips_a"), {"trips_a"}),
    "filter_a": (FILTER.format(t="trips_a"), {"trips_a"}),
    "agg_b": (AGG.format(t="trips_b"), {"trips_b"}),
    "filter_b": (FILTER.format(t="trips_b"), {"trips_b"}),
    "join_ab": (JOIN, {"trips_a", "trips_b"}),
    "agg2_a": (AGG.format(t="trips_a"), {"trips_a"}),
}
COMMITS = [("trips_a", True), ("trips_b", True), ("trips_a", True), ("trips_b", False),
           ("trips_a", False)]  # fmt: skip


class Tally:
    """Refreshes started and storage commits lost, per MV, across every replica."""

    def __init__(self) -> None:
        self.attempts: Counter[Identifier] = Counter()
        self.conflicts: Counter[Identifier] = Counter()
        self.lock = threading.Lock()

    def install(self) -> None:
        """Wrap the refresh entry point every replica calls (the daemon module's name)."""
        refresh = icemv.service.daemon.refresh_mv
        tally = self

        def counted(lakehouse: Any, mv: Identifier, *rest: Any) -> Any:
            with tally.lock:
                tally.attempts[mv] += 1
            try:
                result = refresh(lakehouse, mv, *rest)
            except CONFLICT_ERRORS:
                with tally.lock:
                    tally.conflicts[mv] += 1
                raise
            with tally.lock:
                tally.conflicts[mv] += result.attempts - 1  # re-plans after lost commits
            return result

        icemv.service.daemon.refresh_mv = counted

    def totals(self) -> tuple[int, int]:
        with self.lock:
            return sum(self.attempts.values()), sum(self.conflicts.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--poll-seconds", type=float, default=3.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    tally = Tally()
    tally.install()
    root = Path(tempfile.mkdtemp(prefix="icemv-bench-replicas-"))
    database = create_database(ADMIN_URL)
    broker = TansuBroker(root / "tansu.log")
    broker.start()
    try:
        results = run(args, tally, root, database, broker)
    finally:
        broker.stop()
        drop_database(ADMIN_URL, database)
    for line in results:
        print(
            f"commit {line['commit']} to {line['table']} ({line['trigger']}): "
            f"{line['stale_mvs']} MVs stale, {line['attempts']} attempts, "
            f"{line['conflicts']} conflicts"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))


def run(
    args: argparse.Namespace, tally: Tally, root: Path, database: str, broker: TansuBroker
) -> list[dict[str, Any]]:
    config = parse_config(
        {
            "home": str(root),
            "catalog": {"uri": database},
            "warehouse": {"location": str(root / "warehouse")},
            "spark": {"master": "local[2]", "driver_memory": "1g", "shuffle_partitions": 2},
        }
    )
    lakehouse = Lakehouse(config)
    ensure_namespace(lakehouse.catalog, ("bench",))
    tables = {
        name: create_trips(lakehouse, "bench", name=name, rows=[(1, "a", 1.0, None)])
        for name in ("trips_a", "trips_b")
    }
    mvs = {Identifier(("bench",), name): shape for name, shape in SHAPES.items()}
    for mv, (sql, _) in mvs.items():
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental"})
    topic = "commits"
    broker.create_topic(topic, partitions=4)
    settings = daemon_config(
        config,
        kafka=kafka_settings(broker, topic),
        polling={"interval_seconds": args.poll_seconds},
        refresh={"coalesce_seconds": 0.5},
    )
    running = [RunningDaemon(settings) for _ in range(args.replicas)]
    replicas = [r.__enter__() for r in running]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)

    def idle() -> bool:
        return all(not d.scheduler.pending() for d in replicas)

    def settle() -> None:
        for mv in mvs:
            wait_for(lambda mv=mv: is_fresh(lakehouse, mv), 300, f"{mv} fresh")
        wait_for(idle, 120, "replicas idle")
        polls = [d.reconciler.polls for d in replicas]
        wait_for(
            lambda: all(d.reconciler.polls >= p + 2 for d, p in zip(replicas, polls, strict=True)),
            120,
            "two more polls on every replica",
        )
        wait_for(idle, 120, "replicas idle")

    results: list[dict[str, Any]] = []
    try:
        wait_for(lambda: all(d.consumer and d.consumer.assigned() for d in replicas), 120, "group")
        settle()
        for number, (table, event) in enumerate(COMMITS, start=1):
            attempts, conflicts = tally.totals()
            snapshot = append_trips(lakehouse, "bench", [(100 + number, "a", 2.0, None)], table)
            if event:
                key, value = IcemvCommitEvent(
                    ["bench"], table, table_uuid=str(tables[table].metadata.table_uuid),
                    snapshot_id=snapshot,
                ).encode()  # fmt: skip
                producer.send(topic, key=key, value=value).get(timeout=30)
            settle()
            after_attempts, after_conflicts = tally.totals()
            results.append(
                {
                    "commit": number,
                    "table": table,
                    "trigger": "event + polls" if event else "polls only",
                    "replicas": args.replicas,
                    "stale_mvs": sum(table in tables_read for _, tables_read in mvs.values()),
                    "attempts": after_attempts - attempts,
                    "conflicts": after_conflicts - conflicts,
                }
            )
    finally:
        producer.close()
        for r in running:
            r.__exit__(None, None, None)
    return results


if __name__ == "__main__":
    main()
