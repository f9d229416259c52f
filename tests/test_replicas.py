"""Three daemon replicas on one consumer group split the MVs: one attempt per MV per change.

Real broker (Tansu), real PostgreSQL catalog, real Spark. The replicas are three `Daemon`s
in this process (threads) sharing its one Spark session: three Spark JVMs do not fit the
2-core test box next to everything else. Each has its own catalog clients, Kafka consumer,
scheduler, poller and metrics, as separate processes would.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer

from icemv.config import Config
from icemv.events.formats.icemv import IcemvCommitEvent
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.service.daemon import Daemon
from icemv.service.ownership import owner_partition
from tests.support.daemon import RunningDaemon, daemon_config, is_fresh, kafka_settings, wait_for
from tests.support.kafka_broker import TansuBroker
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

PARTITIONS = 4
AGG = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM {t} GROUP BY vendor"
FILTER = "SELECT id, vendor, fare FROM {t} WHERE fare > 1.5"
JOIN = (
    "SELECT a.vendor, count(*) AS n FROM trips_a a JOIN trips_b b ON a.vendor = b.vendor "
    "GROUP BY a.vendor"
)


def named_mvs(namespace: str) -> dict[Identifier, tuple[str, frozenset[str]]]:
    """MV -> (SQL, tables it reads); names picked so every partition owns at least one."""
    shapes = [
        (AGG.format(t="trips_a"), frozenset({"trips_a"})),
        (FILTER.format(t="trips_a"), frozenset({"trips_a"})),
        (AGG.format(t="trips_b"), frozenset({"trips_b"})),
        (FILTER.format(t="trips_b"), frozenset({"trips_b"})),
        (JOIN, frozenset({"trips_a", "trips_b"})),
        (AGG.format(t="trips_a"), frozenset({"trips_a"})),
    ]
    mvs: dict[Identifier, tuple[str, frozenset[str]]] = {}
    for i, shape in enumerate(shapes):
        wanted = i % PARTITIONS
        k = 0
        while owner_partition(Identifier((namespace,), f"mv{i}_{k}"), PARTITIONS) != wanted:
            k += 1
        mvs[Identifier((namespace,), f"mv{i}_{k}")] = shape
    return mvs


def attempts(daemon: Daemon, mv: Identifier) -> float:
    value = daemon.metrics.registry.get_sample_value(
        "icemv_refresh_attempts_total", {"mv": mv.dotted}
    )
    return value or 0.0


def conflicts(daemon: Daemon, mv: Identifier) -> float:
    total = 0.0
    for family in daemon.metrics.registry.collect():
        for sample in family.samples:
            if (
                sample.name == "icemv_refreshes_total"
                and sample.labels.get("mv") == mv.dotted
                and sample.labels.get("outcome") == "conflict"
            ):
                total += sample.value
    return total


Counts = dict[tuple[int, Identifier], tuple[float, float]]


def counts(replicas: list[Daemon], mvs: list[Identifier]) -> Counts:
    return {
        (i, mv): (attempts(d, mv), conflicts(d, mv)) for i, d in enumerate(replicas) for mv in mvs
    }


def idle(replicas: list[Daemon], mvs: list[Identifier]) -> bool:
    """No replica has work queued, running or retrying for these MVs (the shared test
    catalog holds other tests' MVs, some of them failing on purpose and retrying)."""
    return all(not set(d.scheduler.pending()) & set(mvs) for d in replicas)


@pytest.fixture
def producer(kafka_broker: TansuBroker) -> Iterator[KafkaProducer]:
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, enable_idempotence=False)
    yield producer
    producer.close()


def test_three_replicas_attempt_each_mv_once_per_change_and_take_over_a_stopped_one(
    lakehouse: Lakehouse,
    namespace: str,
    test_config: Config,
    kafka_broker: TansuBroker,
    producer: KafkaProducer,
) -> None:
    topic = f"commits-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=PARTITIONS)
    tables = {name: create_trips(lakehouse, namespace, name=name, rows=[(1, "a", 1.0, None)])
              for name in ("trips_a", "trips_b")}  # fmt: skip
    specs = named_mvs(namespace)
    for mv, (sql, _) in specs.items():
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental"})
    mvs = sorted(specs)
    # A generous session: three daemons and Spark share this process and the 2-core box,
    # and a heartbeat starved for a few seconds must not reshuffle the group mid-count.
    # A stopped replica leaves the group at once, so the take-over does not wait for it.
    config = daemon_config(
        test_config,
        kafka={**kafka_settings(kafka_broker, topic), "session_timeout_ms": 30_000},
        polling={"interval_seconds": 600},  # polls are run by hand below, all at once
        refresh={"coalesce_seconds": 0.5},
    )
    report: list[str] = []

    def commit(table: str, row: int, *, event: bool = True) -> None:
        snapshot = append_trips(lakehouse, namespace, [(row, "a", 2.0, None)], name=table)
        if event:
            key, value = IcemvCommitEvent(
                [namespace], table, table_uuid=str(tables[table].metadata.table_uuid),
                snapshot_id=snapshot,
            ).encode()  # fmt: skip
            producer.send(topic, key=key, value=value).get(timeout=30)

    def settle(replicas: list[Daemon], what: str) -> None:
        for mv in mvs:
            wait_for(lambda mv=mv: is_fresh(lakehouse, mv), 120, f"{mv} fresh after {what}")
        wait_for(lambda: idle(replicas, mvs), 60, f"replicas idle after {what}")

    def poll_all(replicas: list[Daemon]) -> None:
        """Every replica polls at the same moment: only owners may request refreshes."""
        threads = [threading.Thread(target=d.reconciler.poll) for d in replicas]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)

    def check_change(replicas: list[Daemon], table: str, what: str, before: Counts) -> None:
        """Each reader of `table` attempted once, by its owner; the others not; no conflicts."""
        after = counts(replicas, mvs)
        total_attempts = total_conflicts = 0.0
        for mv in mvs:
            tried = [i for i in range(len(replicas)) if after[i, mv][0] > before[i, mv][0]]
            delta = sum(after[i, mv][0] - before[i, mv][0] for i in range(len(replicas)))
            clash = sum(after[i, mv][1] - before[i, mv][1] for i in range(len(replicas)))
            total_attempts += delta
            total_conflicts += clash
            expected = 1 if table in specs[mv][1] else 0
            assert (delta, clash) == (expected, 0), f"{what}: {mv} {delta} attempts {clash} conf"
            assert all(replicas[i].ownership.owns(mv) for i in tried), f"{what}: {mv} not owner"
        readers = sum(table in specs[mv][1] for mv in mvs)
        report.append(
            f"{what}: {readers} MVs read {table}; attempts {total_attempts:g}, "
            f"conflicts {total_conflicts:g}"
        )

    running = [RunningDaemon(config) for _ in range(3)]
    try:
        replicas = [r.__enter__() for r in running]

        def shares(live: list[Daemon]) -> bool:
            """The live replicas' MVs are disjoint and cover every MV."""
            return all(sum(d.ownership.owns(mv) for d in live) == 1 for mv in mvs)

        wait_for(lambda: shares(replicas), 120, "three replicas to split the MVs")
        wait_for(lambda: all(d.ownership.split(mvs).mine for d in replicas), 30, "a share each")
        settle(replicas, "start-up")
        poll_all(replicas)
        wait_for(lambda: idle(replicas, mvs), 60, "replicas idle after the start-up polls")
        assert shares(replicas), "no rebalance expected from here on"

        for round_, table in enumerate(["trips_a", "trips_b", "trips_a"]):
            before = counts(replicas, mvs)
            commit(table, 100 + round_)
            settle(replicas, f"commit {round_ + 1}")
            poll_all(replicas)  # a poll right after must not attempt anything again
            wait_for(lambda: idle(replicas, mvs), 60, "idle after the polls")
            check_change(replicas, table, f"commit {round_ + 1} (event)", before)

        before = counts(replicas, mvs)
        commit("trips_b", 200, event=False)
        poll_all(replicas)
        settle(replicas, "a commit without an event")
        check_change(replicas, "trips_b", "commit 4 (no event, 3 polls at once)", before)

        # Stop the replica owning the most MVs: its partitions move to the other two.
        victim = max(range(3), key=lambda i: len(replicas[i].ownership.split(mvs).mine))
        orphaned = list(replicas[victim].ownership.split(mvs).mine)
        running[victim].__exit__(None, None, None)
        survivors = [d for i, d in enumerate(replicas) if i != victim]
        wait_for(lambda: shares(survivors), 120, "the survivors to take over its partitions")
        wait_for(lambda: idle(survivors, mvs), 60, "survivors idle after the rebalance")
        at_stop = counts(survivors, mvs)
        for round_, table in enumerate(["trips_a", "trips_b"]):
            before = counts(survivors, mvs)
            commit(table, 300 + round_)
            settle(survivors, f"commit {round_ + 5} after the stop")
            check_change(survivors, table, f"commit {round_ + 5} (event, 2 replicas)", before)
        after = counts(survivors, mvs)
        taken_over = [mv for mv in orphaned if any(after[i, mv] > at_stop[i, mv] for i in (0, 1))]
        assert orphaned and taken_over == orphaned, "its MVs were refreshed by the others"
    finally:
        for r in running:
            if r.thread.is_alive():
                r.__exit__(None, None, None)

    for mv in mvs:
        assert_matches_oracle(lakehouse, mv)
    print("\n" + "\n".join(report))
