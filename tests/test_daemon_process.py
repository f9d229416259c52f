"""`icemv run` as a real process: SIGTERM mid-refresh, two replicas on one consumer group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaProducer

from icemv.config import Config
from icemv.events.formats.icemv import IcemvCommitEvent
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.history import refresh_history
from icemv.mv.lifecycle import create_mv
from icemv.service.ownership import owner_partition
from tests.support.daemon import (
    LogLines,
    RunningDaemon,
    daemon_config,
    is_fresh,
    kafka_settings,
    wait_for,
)
from tests.support.kafka_broker import TansuBroker, free_port
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

SQL = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor"


@pytest.fixture
def run_process(tmp_path: Path) -> Iterator[Any]:
    processes: list[subprocess.Popen[str]] = []

    def start(
        config: dict[str, Any], own_group: bool = False
    ) -> tuple[subprocess.Popen[str], LogLines, int]:
        port = free_port()
        config = {**config, "metrics": {"host": "127.0.0.1", "port": port}}
        path = tmp_path / f"icemv-{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(yaml.safe_dump(config))
        icemv = Path(sys.executable).parent / "icemv"
        process = subprocess.Popen(
            [str(icemv), "run", "--config", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "ICEMV_LOGGING__FORMAT": "json", "ICEMV_LOGGING__LEVEL": "DEBUG"},
            # As a shell job or a container's PID 1: a group that a signal can address whole.
            start_new_session=own_group,
        )
        processes.append(process)
        logs = LogLines(process.stderr)  # type: ignore[arg-type]

        def ready() -> bool:
            try:
                return (
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status
                    == 200
                )
            except OSError:
                assert process.poll() is None, f"daemon exited early: {logs.raw[-5:]}"
                return False

        wait_for(ready, 120, "daemon /readyz")
        return process, logs, port

    yield start
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def base_config(test_config: Config) -> dict[str, Any]:
    raw = test_config.model_dump(mode="json", exclude={"materialized_views"})
    raw["catalog"]["password"] = None
    return raw


def test_sigterm_during_a_refresh_exits_zero_without_partial_commit(
    lakehouse: Lakehouse, namespace: str, test_config: Config, run_process: Any
) -> None:
    create_trips(lakehouse, namespace, rows=[(i, f"v{i % 7}", float(i), None) for i in range(200)])
    mv = Identifier((namespace,), "agg")
    created = create_mv(lakehouse, mv, SQL)
    config = base_config(test_config)
    config["polling"] = {"interval_seconds": 1}
    config["refresh"] = {"coalesce_seconds": 0, "shutdown_grace_seconds": 60}
    process, logs, _ = run_process(config)
    wait_for(lambda: is_fresh(lakehouse, mv), 90, "first refresh")

    append_trips(lakehouse, namespace, [(1000, "v1", 1.0, None)])
    wait_for(
        lambda: logs.seen("refresh_started", mv=mv.dotted, reason="poll"), 30, "a refresh to start"
    )
    process.send_signal(signal.SIGTERM)
    assert process.wait(90) == 0
    assert any(line.get("event") == "daemon_stopped" for line in logs.lines)

    storage = lakehouse.load_table(created.storage)
    history = refresh_history(storage)
    # Every storage snapshot is a whole refresh; no private branch is left behind.
    assert len(history) == len(storage.snapshots())
    assert set(storage.metadata.refs) == {"main"}
    assert_matches_oracle(lakehouse, mv)


# Each source row makes Spark sleep this long in a refresh: a deterministically slow one,
# longer than the log pipe lags behind on a loaded machine.
PAUSE_MS = 10_000
SLOW_SQL = (
    "SELECT vendor, count(*) AS n FROM trips "
    f"WHERE reflect('java.lang.Thread', 'sleep', CAST({PAUSE_MS} AS BIGINT)) IS NULL "
    "GROUP BY vendor"
)


def test_sigterm_to_the_process_group_mid_refresh_exits_zero(
    lakehouse: Lakehouse, namespace: str, test_config: Config, run_process: Any
) -> None:
    """Kubernetes and shells signal the whole group; the Spark JVM must not die first."""
    create_trips(lakehouse, namespace, rows=[(1, "v1", 1.0, None)])
    mv = Identifier((namespace,), "slow")
    created = create_mv(lakehouse, mv, SLOW_SQL, properties={"icemv.refresh-policy": "full"})
    config = base_config(test_config)
    config["polling"] = {"interval_seconds": 1}
    config["refresh"] = {"coalesce_seconds": 0, "shutdown_grace_seconds": 120}
    process, logs, _ = run_process(config, own_group=True)
    wait_for(lambda: is_fresh(lakehouse, mv), 120, "first refresh")

    # The first refresh may have been a poll's too: wait for one that starts after the append.
    started_before = logs.count("refresh_started", mv=mv.dotted)
    append_trips(lakehouse, namespace, [(2, "v2", 2.0, None)])
    wait_for(
        lambda: logs.count("refresh_started", mv=mv.dotted) > started_before,
        30,
        "a refresh of the new commit to start",
    )
    os.killpg(process.pid, signal.SIGTERM)
    assert process.wait(180) == 0, logs.raw[-10:]
    events = [line.get("event") for line in logs.lines]
    stopping = events.index("daemon_stopping")
    # The refresh was in flight at the signal, and it finished during the grace.
    assert "refresh" in events[stopping:], events[stopping:]
    assert not any(line.get("event") == "refresh_failed" for line in logs.lines)
    assert "daemon_stopped" in events[stopping:]

    storage = lakehouse.load_table(created.storage)
    assert len(refresh_history(storage)) == len(storage.snapshots())
    assert set(storage.metadata.refs) == {"main"}
    assert is_fresh(lakehouse, mv)


def test_two_replicas_share_the_group_and_apply_each_change_once(
    lakehouse: Lakehouse,
    namespace: str,
    test_config: Config,
    kafka_broker: TansuBroker,
    run_process: Any,
) -> None:
    topic = f"commits-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=4)
    tables = [f"trips_{i}" for i in range(4)]
    mvs = []
    for table in tables:
        create_trips(lakehouse, namespace, name=table, rows=[(1, "a", 1.0, None)])
        mv = Identifier((namespace,), f"agg_{table}")
        create_mv(
            lakehouse,
            mv,
            SQL.replace("trips", table),
            properties={"icemv.refresh-policy": "incremental"},
        )
        mvs.append(mv)
    kafka = kafka_settings(kafka_broker, topic)
    config = base_config(test_config)
    config["kafka"] = kafka
    config["polling"] = {"interval_seconds": 600}
    config["refresh"] = {"coalesce_seconds": 0.2}
    _, logs, _ = run_process(config)
    local = daemon_config(
        test_config,
        kafka=kafka,
        polling={"interval_seconds": 600},
        refresh={"coalesce_seconds": 0.2},
    )
    with RunningDaemon(local) as daemon:
        consumer = daemon.consumer
        assert consumer is not None

        def both_assigned() -> bool:
            remote = [
                line for line in logs.lines if line.get("event") == "kafka_partitions_assigned"
            ]
            mine = consumer._consumer.assignment() if consumer._consumer else set()
            return bool(mine) and bool(remote) and bool(remote[-1]["partitions"]) and len(mine) < 4

        wait_for(both_assigned, 90, "both replicas to own partitions")
        for mv in mvs:
            wait_for(lambda mv=mv: is_fresh(lakehouse, mv), 90, f"startup refresh of {mv}")

        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, enable_idempotence=False)
        try:
            for round_ in range(2):
                for table in tables:
                    snapshot = append_trips(
                        lakehouse, namespace, [(10 + round_, "b", 2.0, None)], name=table
                    )
                    key, value = IcemvCommitEvent([namespace], table, snapshot_id=snapshot).encode()
                    producer.send(topic, key=key, value=value)
                producer.flush()
                for mv in mvs:
                    wait_for(
                        lambda mv=mv: is_fresh(lakehouse, mv), 90, f"{mv} after round {round_}"
                    )
        finally:
            producer.close()
        for mv in mvs:
            assert_matches_oracle(lakehouse, mv)
            storage = lakehouse.load_table(Identifier((namespace,), f"{mv.name}__storage"))
            absorbed = [r.state.tables()[0].snapshot_id for r in refresh_history(storage)]
            assert len(absorbed) == len(set(absorbed)), "a source snapshot was refreshed twice"


def test_emit_publishes_the_tables_current_snapshot(
    lakehouse: Lakehouse,
    namespace: str,
    test_config: Config,
    kafka_broker: TansuBroker,
    tmp_path: Path,
) -> None:
    from kafka import KafkaConsumer, TopicPartition

    from icemv.events.hints import TableCommitHint
    from icemv.events.parse import parse_event

    table = create_trips(lakehouse, namespace, rows=[(1, "a", 1.0, None)])
    topic = f"emit-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=1)
    config = base_config(test_config)
    config["kafka"] = {"bootstrap_servers": [kafka_broker.bootstrap], "topics": [topic]}
    path = tmp_path / "emit.yaml"
    path.write_text(yaml.safe_dump(config))
    icemv = Path(sys.executable).parent / "icemv"
    done = subprocess.run(
        [str(icemv), "emit", f"{namespace}.trips", "--config", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, consumer_timeout_ms=20_000)
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        record = next(iter(consumer))
    finally:
        consumer.close()
    (hint,) = parse_event(record.value, record.headers, record.key)
    assert isinstance(hint, TableCommitHint)
    snapshot = table.current_snapshot()
    assert snapshot is not None
    assert (hint.namespace, hint.name, hint.snapshot_id) == (
        (namespace,),
        "trips",
        snapshot.snapshot_id,
    )
    assert hint.table_uuid == str(table.metadata.table_uuid)

    missing = subprocess.run(
        [str(icemv), "emit", f"{namespace}.nope", "--config", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 2 and "nope" in missing.stderr


def test_a_killed_replicas_mvs_move_to_the_survivor(
    lakehouse: Lakehouse,
    namespace: str,
    test_config: Config,
    kafka_broker: TansuBroker,
    run_process: Any,
) -> None:
    """SIGKILL: no leaving the group; the coordinator moves its partitions after the session
    timeout, and the survivor refreshes every MV, each once per commit."""
    topic = f"commits-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=2)
    table = create_trips(lakehouse, namespace, rows=[(1, "a", 1.0, None)])
    mvs = []
    for i in range(4):  # names that put two MVs on each partition
        k = 0
        while owner_partition(Identifier((namespace,), f"agg_{i}_{k}"), 2) != i % 2:
            k += 1
        mvs.append(Identifier((namespace,), f"agg_{i}_{k}"))
    for mv in mvs:
        create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": "incremental"})
    kafka = kafka_settings(kafka_broker, topic)
    config = base_config(test_config)
    config["kafka"] = kafka
    config["polling"] = {"interval_seconds": 600}
    config["refresh"] = {"coalesce_seconds": 0.2}
    process, logs, _ = run_process(config)
    local = daemon_config(
        test_config,
        kafka=kafka,
        polling={"interval_seconds": 600},
        refresh={"coalesce_seconds": 0.2},
    )
    with RunningDaemon(local) as daemon:

        def split() -> bool:
            remote = [line for line in logs.lines if line.get("event") == "ownership_changed"]
            mine = daemon.ownership.split(mvs).mine
            return bool(remote) and len(remote[-1]["partitions"]) == 1 and len(mine) == 2

        wait_for(split, 120, "the two replicas to hold a partition each")
        for mv in mvs:
            wait_for(lambda mv=mv: is_fresh(lakehouse, mv), 120, f"startup refresh of {mv}")
        process.kill()
        process.wait(30)
        wait_for(lambda: all(daemon.ownership.owns(mv) for mv in mvs), 60, "the take-over")
        wait_for(lambda: not daemon.scheduler.pending(), 60, "the survivor idle")
        before = {
            mv: daemon.metrics.registry.get_sample_value(
                "icemv_refresh_attempts_total", {"mv": mv.dotted}
            )
            or 0.0
            for mv in mvs
        }
        snapshot = append_trips(lakehouse, namespace, [(5, "b", 2.0, None)])
        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, enable_idempotence=False)
        try:
            key, value = IcemvCommitEvent(
                [namespace], "trips", table_uuid=str(table.metadata.table_uuid),
                snapshot_id=snapshot,
            ).encode()  # fmt: skip
            producer.send(topic, key=key, value=value).get(timeout=30)
        finally:
            producer.close()
        for mv in mvs:
            wait_for(lambda mv=mv: is_fresh(lakehouse, mv), 120, f"{mv} after the kill")
        wait_for(lambda: not daemon.scheduler.pending(), 60, "the survivor idle again")
        for mv in mvs:
            after = daemon.metrics.registry.get_sample_value(
                "icemv_refresh_attempts_total", {"mv": mv.dotted}
            )
            assert after == before[mv] + 1, f"{mv}: {before[mv]} -> {after}"
    for mv in mvs:
        assert_matches_oracle(lakehouse, mv)
