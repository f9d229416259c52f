"""`icemv run` with JSON logging writes nothing but JSON lines (issue 16).

A real daemon process, on the PostgreSQL JDBC catalog and a Tansu broker of its own, goes
through commits (event-driven refreshes), a Kafka outage (stopped broker, then restarted)
and polls that overrun their interval; every line it writes to stdout and stderr (its own
events, APScheduler's, kafka-python's, py4j's, the Spark JVM's) must parse as one JSON
object. Overrunning polls show up in `icemv_poll_overruns_total` and as one `poll_overrun`
line per episode of consecutive overruns, never as APScheduler's per-interval line.

The overrun is real: a catalog that does not answer. The test takes PostgreSQL's ACCESS
EXCLUSIVE lock on the catalog's `iceberg_tables` (as a migration or a `VACUUM FULL` would)
until the daemon's poll has waited several intervals on it, then lets go.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import yaml
from kafka import KafkaProducer

from icemv.config import Config
from icemv.events.formats.icemv import IcemvCommitEvent
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from tests.support.daemon import LogLines, is_fresh, kafka_settings, metric, wait_for
from tests.support.kafka_broker import TansuBroker, free_port
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

SQL = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor"
POLL_INTERVAL_SECONDS = 0.5
# How long the daemon's catalog reads wait on the lock: several poll intervals.
BLOCKED_SECONDS = 4 * POLL_INTERVAL_SECONDS


def every_line_json(name: str, output: LogLines) -> list[dict[str, Any]]:
    """Each line parsed; the first one that is not exactly one JSON object fails the test."""
    parsed = []
    for number, line in enumerate(output.raw, 1):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            pytest.fail(f"{name} line {number} is not JSON: {line!r}")
        if not isinstance(value, dict):
            pytest.fail(f"{name} line {number} is not a JSON object: {line!r}")
        parsed.append(value)
    return parsed


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[TansuBroker]:
    """A broker of this test's own: it is stopped and restarted."""
    with TansuBroker(tmp_path / "tansu.log") as broker:
        yield broker


@pytest.fixture
def daemon_process() -> Iterator[list[subprocess.Popen[str]]]:
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def send_commit(broker: TansuBroker, topic: str, namespace: str, snapshot: int) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    try:
        key, value = IcemvCommitEvent([namespace], "trips", snapshot_id=snapshot).encode()
        producer.send(topic, key=key, value=value).get(timeout=30)
    finally:
        producer.close()


@contextmanager
def catalog_locked(url: str) -> Iterator[Callable[[float], int]]:
    """Hold an ACCESS EXCLUSIVE lock on the catalog table; yields a count of the other
    sessions that have waited on a lock for longer than a number of seconds."""
    holder = psycopg2.connect(url)
    try:
        with holder.cursor() as cursor:
            cursor.execute("SET lock_timeout = '60s'")
            cursor.execute("LOCK TABLE iceberg_tables IN ACCESS EXCLUSIVE MODE")

            def blocked_readers(seconds: float) -> int:
                with psycopg2.connect(url) as probe, probe.cursor() as query:
                    query.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event_type = 'Lock' AND pid <> %s"
                        " AND now() - query_start > make_interval(secs => %s)",
                        (holder.get_backend_pid(), seconds),
                    )
                    row = query.fetchone()
                probe.close()
                return int(row[0]) if row else 0

            yield blocked_readers
    finally:
        holder.rollback()
        holder.close()


def test_every_line_is_json_through_commits_an_outage_and_overrunning_polls(
    lakehouse: Lakehouse,
    namespace: str,
    test_config: Config,
    broker: TansuBroker,
    daemon_process: list[subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    create_trips(lakehouse, namespace, rows=[(i, f"v{i % 3}", float(i), None) for i in range(30)])
    mv = Identifier((namespace,), "agg")
    create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": "incremental"})
    topic = f"commits-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic)

    port = free_port()
    raw = test_config.model_dump(mode="json", exclude={"materialized_views"})
    raw["catalog"]["password"] = None
    raw["kafka"] = kafka_settings(broker, topic)
    raw["polling"] = {"interval_seconds": POLL_INTERVAL_SECONDS}
    raw["refresh"] = {"coalesce_seconds": 0.2}
    raw["metrics"] = {"host": "127.0.0.1", "port": port}
    # Everything at its most talkative: the Spark JVM at INFO, kafka-python too.
    raw["logging"] = {
        "format": "json",
        "level": "DEBUG",
        "spark_level": "INFO",
        "levels": {"kafka": "INFO"},
    }
    config_path = tmp_path / "icemv.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    icemv = Path(sys.executable).parent / "icemv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEMV_")}
    process = subprocess.Popen(
        [str(icemv), "run", "--config", str(config_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    daemon_process.append(process)
    assert process.stdout is not None and process.stderr is not None
    stdout, stderr = LogLines(process.stdout), LogLines(process.stderr)

    def ready() -> bool:
        assert process.poll() is None, f"daemon exited early: {stderr.raw[-5:]}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def value(name: str, **labels: str) -> float:
        return metric(port, name, labels)

    def scenario() -> float:
        """Commits, an outage, overruns; the overrun count seen before SIGTERM."""
        wait_for(ready, 180, "daemon /readyz")
        wait_for(lambda: is_fresh(lakehouse, mv), 120, "the first refresh")

        # Commits, announced on Kafka.
        for round_ in range(2):
            routed = value("icemv_events_total", outcome="routed")
            snapshot = append_trips(lakehouse, namespace, [(100 + round_, "v1", 1.0, None)])
            send_commit(broker, topic, namespace, snapshot)
            wait_for(
                lambda routed=routed: value("icemv_events_total", outcome="routed") > routed,
                90,
                f"commit event {round_} consumed",
            )
            wait_for(lambda: is_fresh(lakehouse, mv), 90, f"refresh after commit {round_}")

        # A Kafka outage: noticed, survived, recovered from (in-memory broker: topics are gone).
        wait_for(lambda: value("icemv_kafka_connected") == 1, 60, "kafka connected")
        broker.stop()
        try:
            wait_for(lambda: value("icemv_kafka_connected") == 0, 90, "the outage to be noticed")
            append_trips(lakehouse, namespace, [(200, "v2", 2.0, None)])
            wait_for(lambda: is_fresh(lakehouse, mv), 90, "a poll-driven refresh during the outage")
        finally:
            broker.start()
        broker.recreate_topic(topic)
        wait_for(lambda: value("icemv_kafka_connected") == 1, 120, "kafka reconnected")
        routed = value("icemv_events_total", outcome="routed")
        snapshot = append_trips(lakehouse, namespace, [(300, "v0", 3.0, None)])
        send_commit(broker, topic, namespace, snapshot)
        wait_for(
            lambda: value("icemv_events_total", outcome="routed") > routed,
            90,
            "an event consumed after the restart",
        )
        wait_for(lambda: is_fresh(lakehouse, mv), 90, "fresh after the restart")

        # A catalog that does not answer for several poll intervals: an overrunning poll.
        before = value("icemv_poll_overruns_total")
        with catalog_locked(test_config.catalog.uri) as blocked_readers:
            wait_for(
                lambda: blocked_readers(BLOCKED_SECONDS) > 0,
                60,
                f"the daemon's catalog reads to wait {BLOCKED_SECONDS}s on the lock",
            )
        wait_for(lambda: value("icemv_poll_overruns_total") > before, 60, "an overrun counted")
        wait_for(lambda: stderr.count("poll_overrun") >= 1, 30, "the poll_overrun line")
        return value("icemv_poll_overruns_total")

    try:
        overruns = scenario()
        process.send_signal(signal.SIGTERM)
        assert process.wait(120) == 0
    except BaseException:
        print("".join(stderr.raw[-60:]))  # pytest shows it with the failure
        raise
    stdout.join(30)
    stderr.join(30)
    (tmp_path / "daemon-stderr.log").write_text("".join(stderr.raw))  # to read after a failure
    assert every_line_json("stdout", stdout) == []
    lines = every_line_json("stderr", stderr)

    events = [line.get("event") for line in lines]
    assert "daemon_stopped" in events
    # Library and JVM lines came through as JSON too (the outage makes kafka-python talk).
    loggers = {line.get("logger") for line in lines}
    assert any(str(name).startswith("kafka") for name in loggers), sorted(map(str, loggers))
    jvm = [line for line in lines if line.get("logger") == "spark"]
    assert {line["event"] for line in jvm} <= {"jvm_log", "jvm_output"}
    assert any(line.get("level") == "info" for line in jvm), "no INFO line of the JVM"
    # Its last words (shutdown hooks) came before the daemon exited.
    assert any("ShutdownHookManager" in str(line.get("java_logger")) for line in jvm)
    assert not any("maximum number of running instances" in line for line in stderr.raw)

    # An episode is a run of consecutive overrunning polls; each has exactly one line.
    finished = [line for line in lines if line.get("event") == "poll_finished"]
    overran = [bool(line["overran"]) for line in finished]
    episodes = sum(1 for i, late in enumerate(overran) if late and (i == 0 or not overran[i - 1]))
    reported = [line for line in lines if line.get("event") == "poll_overrun"]
    assert len(reported) == episodes >= 1
    assert sum(overran) >= overruns >= 1
    assert all(line["level"] == "warning" for line in reported)
    assert all(line["duration_seconds"] > POLL_INTERVAL_SECONDS for line in reported)
    # The blocked poll spanned several intervals, whose skipped runs logged nothing.
    assert max(line["duration_seconds"] for line in reported) > 2 * POLL_INTERVAL_SECONDS
    assert_matches_oracle(lakehouse, mv)
