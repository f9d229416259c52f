"""The daemon end to end: real broker (Tansu), real Spark, real catalogs (JDBC and REST)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer

from icemv.config import Config
from icemv.events.formats.icemv import IcemvCommitEvent
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from tests.conftest import CATALOG_KINDS
from tests.support.daemon import (
    RunningDaemon,
    daemon_config,
    is_fresh,
    kafka_settings,
    metric,
    wait_for,
)
from tests.support.kafka_broker import TansuBroker
from tests.support.oracle import assert_matches_oracle
from tests.support.s3 import STORAGE_KINDS
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres, CATALOG_KINDS]

ROWS = [(1, "a", 10.0, None), (2, "b", 5.0, None)]
SQL = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor"


@pytest.fixture
def topic(kafka_broker: TansuBroker) -> str:
    name = f"commits-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name, partitions=1)
    return name


@pytest.fixture
def producer(kafka_broker: TansuBroker) -> Iterator[KafkaProducer]:
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, enable_idempotence=False)
    yield producer
    producer.close()


def storage_identifier(mv: Identifier) -> Identifier:
    return Identifier(mv.namespace, f"{mv.name}__storage")


def trips_and_mv(lakehouse: Lakehouse, namespace: str) -> tuple[str, Identifier]:
    """The base table (its uuid) and an incrementally refreshed aggregate MV over it."""
    table_uuid = str(create_trips(lakehouse, namespace, rows=ROWS).metadata.table_uuid)
    mv = Identifier((namespace,), "agg")
    create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": "incremental"})
    return table_uuid, mv


@pytest.mark.parametrize("storage_kind", STORAGE_KINDS, indirect=True)
def test_event_makes_the_mv_fresh_and_bad_events_are_counted(
    lakehouse: Lakehouse,
    namespace: str,
    test_config: Config,
    kafka_broker: TansuBroker,
    topic: str,
    producer: KafkaProducer,
) -> None:
    table_uuid, mv = trips_and_mv(lakehouse, namespace)
    config = daemon_config(
        test_config,
        kafka=kafka_settings(kafka_broker, topic),
        polling={"interval_seconds": 600},  # events only
        refresh={"coalesce_seconds": 0.2},
    )
    with RunningDaemon(config) as daemon:
        port = daemon.http_port
        assert port
        wait_for(lambda: is_fresh(lakehouse, mv), 60, "first refresh (startup poll)")
        wait_for(lambda: daemon.consumer is not None and daemon.consumer.connected, 30, "kafka")

        snapshot = append_trips(lakehouse, namespace, [(3, "a", 1.5, None)])
        assert not is_fresh(lakehouse, mv)
        for value in (
            b"not json",
            b'{"type": "table-commit"}',
            json.dumps({"type": "nope"}).encode(),
        ):
            producer.send(topic, value=value)
        key, value = IcemvCommitEvent(
            [namespace], "trips", table_uuid=table_uuid, snapshot_id=snapshot
        ).encode()
        producer.send(topic, key=key, value=value)
        producer.send(topic, key=key, value=value)  # duplicate: same table uuid and snapshot
        missing_key, missing = IcemvCommitEvent(
            [namespace], "no_such_table", snapshot_id=1
        ).encode()
        producer.send(topic, key=missing_key, value=missing)
        producer.flush()

        wait_for(lambda: is_fresh(lakehouse, mv), 60, "refresh after the event")
        assert_matches_oracle(lakehouse, mv)
        wait_for(
            lambda: metric(port, "icemv_events_total", {"outcome": "duplicate"}) >= 1, 20, "dup"
        )
        assert metric(port, "icemv_events_total", {"format": "icemv", "outcome": "routed"}) >= 1
        assert metric(port, "icemv_events_total", {"outcome": "not-json"}) == 1
        assert metric(port, "icemv_events_total", {"outcome": "missing-table-name"}) == 1
        assert metric(port, "icemv_events_total", {"outcome": "unknown-type"}) == 1
        assert metric(port, "icemv_events_total", {"outcome": "unknown-table"}) == 1
        labels = {"mv": mv.dotted, "outcome": "success"}
        assert metric(port, "icemv_refreshes_total", {**labels, "mode": "incremental"}) >= 1
        wait_for(  # published by the check after the refresh (service/after_refresh.py)
            lambda: metric(port, "icemv_mv_state", {"mv": mv.dotted, "state": "fresh"}) == 1,
            20,
            "freshness published",
        )
        assert metric(port, "icemv_commit_to_fresh_seconds_count", {"mv": mv.dotted}) >= 1
        assert metric(port, "icemv_ready", {}) == 1
        ready = urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5)
        assert ready.status == 200 and json.loads(ready.read())["checks"]["kafka"] is True
        # The daemon is still consuming after the bad events.
        latest = append_trips(lakehouse, namespace, [(4, "c", 2.0, None)])
        key, value = IcemvCommitEvent([namespace], "trips", snapshot_id=latest).encode()
        producer.send(topic, key=key, value=value).get(timeout=10)
        wait_for(lambda: is_fresh(lakehouse, mv), 60, "refresh after a later event")
        # A late (reordered) event for the older snapshot: a hint, found unnecessary.
        storage = lakehouse.load_table(Identifier((namespace,), "agg__storage"))
        assert storage.location().startswith("s3://") == test_config.warehouse.on_s3
        commits = len(storage.snapshots())
        skipped = metric(port, "icemv_refreshes_total", {"mv": mv.dotted, "outcome": "skipped"})
        key, value = IcemvCommitEvent([namespace], "trips", snapshot_id=snapshot).encode()
        producer.send(topic, key=key, value=value).get(timeout=10)
        wait_for(
            lambda: (
                metric(port, "icemv_refreshes_total", {"mv": mv.dotted, "outcome": "skipped"})
                > skipped
            ),
            30,
            "the late event to be handled",
        )
        assert len(lakehouse.load_table(storage_identifier(mv)).snapshots()) == commits


def test_poll_only_mode_and_manual_refresh(
    lakehouse: Lakehouse, namespace: str, test_config: Config
) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = Identifier((namespace,), "agg")
    create_mv(lakehouse, mv, SQL, properties={"icemv.max-staleness": "4s"})
    config = daemon_config(
        test_config, polling={"interval_seconds": 3}, refresh={"coalesce_seconds": 0.1}
    )
    with RunningDaemon(config) as daemon:
        port = daemon.http_port
        assert port and daemon.consumer is None
        wait_for(lambda: is_fresh(lakehouse, mv), 60, "first refresh")
        append_trips(lakehouse, namespace, [(3, "a", 1.5, None)])
        wait_for(lambda: is_fresh(lakehouse, mv), 30, "poll-driven refresh")
        assert_matches_oracle(lakehouse, mv)
        assert metric(port, "icemv_mv_max_staleness_seconds", {"mv": mv.dotted}) == 4

        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/mvs/{mv.dotted}/refresh", method="POST"
        )
        assert urllib.request.urlopen(request, timeout=5).status == 202
        unknown = urllib.request.Request(
            f"http://127.0.0.1:{port}/mvs/nope.nope/refresh", method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(unknown, timeout=5)
        assert error.value.code == 404
        wait_for(
            lambda: (
                metric(port, "icemv_refreshes_total", {"mv": mv.dotted, "outcome": "skipped"}) >= 1
            ),
            20,
            "manual refresh (already fresh: skipped)",
        )


def test_broker_outage_falls_back_to_polling_and_recovers(
    lakehouse: Lakehouse,
    namespace: str,
    test_config: Config,
    kafka_broker: TansuBroker,
    topic: str,
) -> None:
    table_uuid, mv = trips_and_mv(lakehouse, namespace)
    config = daemon_config(
        test_config,
        kafka=kafka_settings(kafka_broker, topic),
        polling={"interval_seconds": 3},
        refresh={"coalesce_seconds": 0.2},
    )
    with RunningDaemon(config) as daemon:
        port = daemon.http_port
        assert port and daemon.consumer is not None
        consumer = daemon.consumer
        wait_for(lambda: consumer.connected, 30, "kafka connected")
        kafka_broker.stop()
        try:
            wait_for(lambda: not consumer.connected, 60, "the outage to be noticed")
            ready = urllib.request.Request(f"http://127.0.0.1:{port}/readyz")
            with pytest.raises(urllib.error.HTTPError) as error:
                urllib.request.urlopen(ready, timeout=5)
            assert error.value.code == 503
            # Commits go on; the poll keeps the MV fresh without events.
            append_trips(lakehouse, namespace, [(7, "a", 1.0, None)])
            wait_for(lambda: is_fresh(lakehouse, mv), 60, "poll-driven refresh during the outage")
        finally:
            kafka_broker.restart()  # in-memory: topics are gone
        kafka_broker.recreate_topic(topic)
        wait_for(lambda: consumer.connected, 90, "kafka reconnected")
        routed = metric(port, "icemv_events_total", {"outcome": "routed"})
        snapshot = append_trips(lakehouse, namespace, [(8, "b", 2.0, None)])
        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, enable_idempotence=False)
        try:
            key, value = IcemvCommitEvent(
                [namespace], "trips", table_uuid=table_uuid, snapshot_id=snapshot
            ).encode()
            producer.send(topic, key=key, value=value).get(timeout=30)
        finally:
            producer.close()
        wait_for(
            lambda: metric(port, "icemv_events_total", {"outcome": "routed"}) > routed,
            90,
            "an event consumed after the restart",
        )
        wait_for(lambda: is_fresh(lakehouse, mv), 60, "fresh after the restart")
        assert_matches_oracle(lakehouse, mv)
