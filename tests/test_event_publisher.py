"""The publisher against a real Kafka-compatible broker (Tansu): what icemv publishes comes back
as the same hint through a consumer group, and Lakekeeper binary-mode records parse from the
headers a consumer hands out."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from pydantic import SecretStr

from icemv.config import KafkaConfig
from icemv.events.formats.icemv import IcemvCommitEvent
from icemv.events.hints import TableCommitHint, ViewChangeHint
from icemv.events.kafka import kafka_client_kwargs
from icemv.events.parse import parse_event
from icemv.events.publisher import CommitEventPublisher, publish_commit_event
from tests.support.kafka_broker import TansuBroker, free_port, kafka_broker  # noqa: F401

TABLE_UUID = "6891e4cd-ebac-4e4a-b511-dd3bcb3b6798"


@pytest.fixture
def topic(kafka_broker: TansuBroker) -> str:  # noqa: F811
    name = f"icemv-commits-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name)
    return name


def group_consumer(bootstrap: str, topic: str, group: str) -> KafkaConsumer:
    return KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
    )


def consume(consumer: KafkaConsumer, count: int, timeout: float = 30.0) -> list[Any]:
    """Exactly `count` records, polling until a deadline; a little longer to catch extras."""
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    for batch in consumer.poll(timeout_ms=500).values():
        records.extend(batch)
    assert len(records) == count, records
    return records


def test_client_kwargs_map_every_security_setting() -> None:
    config = KafkaConfig(
        bootstrap_servers=["k1:9093", "k2:9093"],
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="icemv",
        sasl_password=SecretStr("s3cret"),
        ssl_cafile="/ca.pem",
        ssl_certfile="/cert.pem",
        ssl_keyfile="/key.pem",
    )
    assert kafka_client_kwargs(config) == {
        "bootstrap_servers": ["k1:9093", "k2:9093"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "icemv",
        "sasl_plain_password": "s3cret",
        "ssl_cafile": "/ca.pem",
        "ssl_certfile": "/cert.pem",
        "ssl_keyfile": "/key.pem",
    }
    assert "s3cret" not in repr(config)
    plain = KafkaConfig(bootstrap_servers=["k:9092"])
    assert kafka_client_kwargs(plain) == {
        "bootstrap_servers": ["k:9092"],
        "security_protocol": "PLAINTEXT",
    }
    with pytest.raises(ValueError, match="bootstrap_servers"):
        kafka_client_kwargs(KafkaConfig())


def test_published_events_come_back_through_a_group_with_manual_commits(
    kafka_broker: TansuBroker,  # noqa: F811
    topic: str,
) -> None:
    config = KafkaConfig(bootstrap_servers=[kafka_broker.bootstrap])
    group = f"icemv-{uuid.uuid4().hex[:8]}"
    publish_commit_event(
        config,
        topic,
        IcemvCommitEvent(
            ["nyc"],
            "taxis",
            catalog="lake",
            table_uuid=TABLE_UUID,
            snapshot_id=3838051412002077211,
            parent_snapshot_id=3838051412002077000,
            sequence_number=7,
            operation="append",
            timestamp_ms=1711842668070,
            metadata_location="file:///w/nyc/taxis/metadata/00007.metadata.json",
        ),
    )
    with closing(group_consumer(kafka_broker.bootstrap, topic, group)) as consumer:
        [record] = consume(consumer, 1)
        assert record.key == b"nyc.taxis"
        assert parse_event(record.value, record.headers, record.key) == [
            TableCommitHint(
                ("nyc",),
                "taxis",
                "icemv",
                TABLE_UUID,
                3838051412002077211,
                1711842668070,
                None,
                "lake",
            )
        ]
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, record.partition)) == record.offset + 1

    # A new member of the group resumes after the committed offset: it sees only the next event.
    with CommitEventPublisher(config, topic) as publisher:
        publisher.publish(IcemvCommitEvent(("nyc", "raw"), "trips", snapshot_id=2))
    with closing(group_consumer(kafka_broker.bootstrap, topic, group)) as consumer:
        [record] = consume(consumer, 1)
        assert parse_event(record.value, record.headers, record.key) == [
            TableCommitHint(("nyc", "raw"), "trips", "icemv", snapshot_id=2)
        ]


def test_lakekeeper_binary_mode_records_parse_from_consumed_headers(
    kafka_broker: TansuBroker,  # noqa: F811
    topic: str,
) -> None:
    event_id = str(uuid.uuid4())
    commit = {
        "identifier": {"namespace": ["nyc"], "name": "taxis"},
        "requirements": [],
        "updates": [
            {"action": "add-snapshot", "snapshot": {"snapshot-id": 42, "timestamp-ms": 1000}}
        ],
    }
    attributes = {
        "ce_specversion": "1.0",
        "ce_id": event_id,
        "ce_source": "uri:iceberg-catalog-service:catalog-0",
        "ce_time": "2025-01-01T00:00:00Z",
        "ce_tabular-type": "Table",
        "ce_tabular-id": TABLE_UUID,
        "ce_name": "taxis",
        "ce_namespace": "nyc",
        "ce_num-events": "1",
        "ce_sequence-number": "0",
    }
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    try:
        for kind, value in (
            ("updateTable", json.dumps(commit).encode()),
            ("dropTable", b"null"),
            ("updateView", json.dumps({"requirements": [], "updates": []}).encode()),
        ):
            headers = [(name, text.encode()) for name, text in attributes.items()]
            headers += [("ce_type", kind.encode()), ("content-type", b"application/json")]
            producer.send(topic, value=value, key=TABLE_UUID.encode(), headers=headers)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)

    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest")
    with closing(consumer):
        consumer.assign([TopicPartition(topic, 0)])
        records = consume(consumer, 3)
    hints = [parse_event(r.value, r.headers, r.key) for r in records]
    assert hints == [
        [TableCommitHint(("nyc",), "taxis", "lakekeeper", TABLE_UUID, 42, 1000, event_id)],
        [
            TableCommitHint(
                ("nyc",), "taxis", "lakekeeper", TABLE_UUID, None, 1735689600000, event_id
            )
        ],
        [ViewChangeHint(("nyc",), "taxis", "lakekeeper", event_id)],
    ]


def test_publish_to_an_unreachable_broker_fails_within_its_timeout() -> None:
    config = KafkaConfig(bootstrap_servers=[f"127.0.0.1:{free_port()}"])
    started = time.monotonic()
    with pytest.raises(KafkaError):
        publish_commit_event(
            config, "icemv-commits", IcemvCommitEvent(["n"], "t"), timeout_seconds=1
        )
    assert time.monotonic() - started < 10


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[TansuBroker]:
    """Its own broker, since a restart wipes every topic of the shared one."""
    with TansuBroker(tmp_path / "tansu.log") as broker:
        yield broker


def test_publisher_survives_a_broker_restart(private_broker: TansuBroker) -> None:
    bootstrap = private_broker.bootstrap
    private_broker.create_topic("commits")
    config = KafkaConfig(bootstrap_servers=[bootstrap])
    with CommitEventPublisher(config, "commits", timeout_seconds=15) as publisher:
        publisher.publish(IcemvCommitEvent(["n"], "before"))
        private_broker.restart()
        assert private_broker.bootstrap == bootstrap
        probe = KafkaConsumer(bootstrap_servers=bootstrap)
        with closing(probe):
            assert "commits" not in probe.topics()  # in-memory storage: topics are gone
        private_broker.create_topic("commits")
        # No idempotent producer id to lose, so the same producer keeps working.
        publisher.publish(IcemvCommitEvent(["n"], "after"))
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    with closing(consumer):
        consumer.assign([TopicPartition("commits", 0)])
        [record] = consume(consumer, 1)
    assert parse_event(record.value) == [TableCommitHint(("n",), "after", "icemv")]
