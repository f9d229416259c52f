"""The consumer against a real broker (Tansu) and a real PostgreSQL catalog, without Spark.

Poison records (any bytes, control characters, NUL in names, huge or deep JSON, wrong
types in all three formats) must never kill or wedge the consumer: each is counted,
dead-lettered and committed, while the valid events around them still reach the
scheduler. Readiness follows the broker within seconds.

ICEMV_FUZZ_RECORDS (default 30) sets the records per Hypothesis example and
ICEMV_FUZZ_EXAMPLES (default 2) the examples, for a longer local run.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from icemv.config import KafkaConfig
from icemv.errors import BadEventError
from icemv.events.formats.icemv import IcemvCommitEvent
from icemv.events.parse import parse_event
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.result import RefreshResult
from icemv.service.consumer import HANDLER_ERROR, EventConsumer
from icemv.service.dead_letter import HEADER_PREFIX
from icemv.service.metrics import Metrics
from icemv.service.router import EventRouter
from tests.support.kafka_broker import TansuBroker
from tests.support.tables import create_trips
from tests.test_commit_events import VALID_EVENTS, header_lists, json_values, mutated

pytestmark = [pytest.mark.postgres]

FUZZ_RECORDS = int(os.environ.get("ICEMV_FUZZ_RECORDS", "30"))
FUZZ_EXAMPLES = int(os.environ.get("ICEMV_FUZZ_EXAMPLES", "2"))
MV = Identifier(("mvs",), "reader")

Headers = list[tuple[str, bytes]]


@dataclass(frozen=True)
class Outgoing:
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.key is None and self.value is None:  # Kafka needs one of them
            object.__setattr__(self, "key", b"")


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds it took; fails after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Scheduler:
    """Records refresh requests (the scheduler's place); each finishes at once."""

    def __init__(self) -> None:
        self.requests: list[Identifier] = []
        self._lock = threading.Lock()

    def request(self, mv: Identifier, reason: str) -> Future[RefreshResult]:
        with self._lock:
            self.requests.append(mv)
        future: Future[RefreshResult] = Future()
        future.set_result(RefreshResult(mv, "skipped", reason, None, 0, 0, (), 0, 0.0))
        return future

    def count(self) -> int:
        with self._lock:
            return len(self.requests)


class OneMvIndex:
    """One MV reading `table` (building a real index needs Spark to resolve MV SQL)."""

    def __init__(self, table: Identifier) -> None:
        self.table = table

    def readers_of(self, table: Identifier) -> frozenset[Identifier]:
        return frozenset({MV}) if table == self.table else frozenset()


class Pipeline:
    """Router (real parse, dedup, catalog look-ups) + consumer, wired as the daemon does."""

    def __init__(self, lakehouse: Lakehouse, table: Identifier, config: KafkaConfig) -> None:
        self.metrics = Metrics()
        self.scheduler = Scheduler()
        self.router = EventRouter(
            lakehouse.catalog_name,
            OneMvIndex(table),
            self.metrics,
            lakehouse.table_exists,
            self.scheduler.request,
            lambda: None,
        )
        self.rejected: list[tuple[str, bool]] = []
        self.consumer = self.make_consumer(config, self.router.handle)

    def make_consumer(
        self, config: KafkaConfig, handle: Callable[[Any], Sequence[Future[Any]]]
    ) -> EventConsumer:
        def on_rejected(reason: str, dead_lettered: bool) -> None:
            self.rejected.append((reason, dead_lettered))
            self.metrics.record_rejected_event(reason, dead_lettered)

        return EventConsumer(
            config,
            handle,
            on_connected=self.metrics.set_kafka_connected,
            on_rejected=on_rejected,
        )

    def connected_gauge(self) -> float | None:
        return self.metrics.registry.get_sample_value("icemv_kafka_connected")


@contextmanager
def running(consumer: EventConsumer) -> Iterator[EventConsumer]:
    consumer.start()
    try:
        wait_for(consumer.assigned, 30, "the consumer to join its group")
        yield consumer
    finally:
        consumer.stop(timeout=30)


def kafka_config(broker: TansuBroker, topic: str, dead_letter_topic: str | None) -> KafkaConfig:
    return KafkaConfig(
        bootstrap_servers=[broker.bootstrap],
        topics=[topic],
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        dead_letter_topic=dead_letter_topic,
    )


def new_topics(broker: TansuBroker) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    topic, dlq = f"events-{suffix}", f"dlq-{suffix}"
    broker.create_topic(topic, partitions=1)
    broker.create_topic(dlq, partitions=1)
    return topic, dlq


def send(broker: TansuBroker, topic: str, records: Sequence[Outgoing]) -> int:
    """Produce in order; returns the end offset of partition 0 afterwards."""
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, enable_idempotence=False, max_request_size=8 << 20
    )
    try:
        last = None
        for record in records:
            last = producer.send(topic, key=record.key, value=record.value, headers=record.headers)
        producer.flush(timeout=30)
        assert last is not None
        return int(last.get(timeout=30).offset) + 1
    finally:
        producer.close()


def committed(broker: TansuBroker, topic: str, group: str) -> int:
    probe = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group)
    with closing(probe):
        return probe.committed(TopicPartition(topic, 0)) or 0


def read_all(broker: TansuBroker, topic: str, count: int, timeout: float = 30) -> list[Any]:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", fetch_max_bytes=64 << 20
    )
    records: list[Any] = []
    with closing(consumer):
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        # Nothing beyond `count` either.
        records.extend(r for b in consumer.poll(timeout_ms=1000).values() for r in b)
    return records


def expected_reason(record: Outgoing) -> str | None:
    """The oracle: the reason `parse_event` gives, None for a record it accepts."""
    try:
        parse_event(record.value, record.headers, record.key)
    except BadEventError as error:
        return error.reason
    return None


# --- records -------------------------------------------------------------------------------

# Text with everything a name should not hold, and raw bytes that are no UTF-8 at all.
nasty_text = st.text(
    st.characters(codec=None, categories=("Cc", "Cs", "Zs", "Lu", "So", "Pd")), max_size=40
)
events_with_nasty_names = (
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["table-commit", "view-commit"]),
            "namespace": st.lists(nasty_text, max_size=3) | nasty_text,
            "name": nasty_text | st.integers() | st.none(),
        }
    )
    | st.fixed_dictionaries(
        {
            "event_type": st.sampled_from(["AFTER_UPDATE_TABLE", "AFTER_COMMIT_TRANSACTION"]),
            "table_identifier": st.lists(nasty_text, max_size=4),
        }
    )
    | st.fixed_dictionaries(
        {
            "specversion": st.just("1.0"),
            "type": st.sampled_from(["updateTable", "createView"]),
            "namespace": nasty_text,
            "name": nasty_text,
            "data": json_values,
        }
    )
)


def encoded(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", errors="surrogatepass")


junk_records = st.one_of(
    st.builds(Outgoing, st.none() | st.binary(max_size=40), st.binary(min_size=1, max_size=300)),
    st.builds(
        Outgoing,
        st.none(),
        nasty_text.map(lambda t: t.encode("utf-8", errors="surrogatepass")),
    ),
    st.builds(Outgoing, st.none(), events_with_nasty_names.map(encoded)),
    st.builds(Outgoing, st.none(), st.sampled_from(VALID_EVENTS).flatmap(mutated).map(encoded)),
    st.builds(
        Outgoing,
        st.none(),
        st.none() | st.sampled_from(VALID_EVENTS).map(encoded),
        header_lists.map(lambda hs: [(n, v or b"") for n, v in hs]),
    ),
)

# Every batch also carries these: deep and huge JSON, and names no catalog can hold.
FIXED_POISON = [
    Outgoing(None, b"[" * 100_000 + b"]" * 100_000),  # deep: RecursionError in json
    Outgoing(None, json.dumps({"type": "table-commit", "pad": "x" * (2 << 20)}).encode()),
    Outgoing(None, encoded({"type": "table-commit", "namespace": ["n"], "name": "t\x00x"})),
    Outgoing(None, encoded({"type": "table-commit", "namespace": ["n"], "name": "n" * 300_000})),
    Outgoing(b"\xff" * 5000, encoded({"type": "table-commit", "namespace": 5, "name": []})),
]


class ValidEvents:
    """Valid commits of the one table an MV reads, each a new snapshot (never a duplicate)."""

    def __init__(self, table: Identifier, table_uuid: str) -> None:
        self.table, self.table_uuid = table, table_uuid
        self.snapshot = 0

    def next(self) -> Outgoing:
        self.snapshot += 1
        key, value = IcemvCommitEvent(
            self.table.namespace,
            self.table.name,
            table_uuid=self.table_uuid,
            snapshot_id=self.snapshot,
        ).encode()
        return Outgoing(key, value)


# --- tests ---------------------------------------------------------------------------------


@pytest.fixture
def table(lakehouse: Lakehouse, namespace: str) -> tuple[Identifier, str]:
    created = create_trips(lakehouse, namespace, name="events_base")
    return Identifier((namespace,), "events_base"), str(created.metadata.table_uuid)


def test_fuzzed_poison_records_are_dead_lettered_and_valid_events_still_routed(
    lakehouse: Lakehouse, kafka_broker: TansuBroker, table: tuple[Identifier, str]
) -> None:
    topic, dlq = new_topics(kafka_broker)
    config = kafka_config(kafka_broker, topic, dlq)
    pipeline = Pipeline(lakehouse, table[0], config)
    valid = ValidEvents(*table)
    totals: Counter[str] = Counter()
    reasons: Counter[str] = Counter()

    with running(pipeline.consumer) as consumer:

        @settings(
            max_examples=FUZZ_EXAMPLES,
            deadline=None,
            database=None,
            phases=(Phase.generate,),  # each example costs seconds of broker time: no shrinking
            suppress_health_check=list(HealthCheck),
        )
        @given(junk=st.lists(junk_records, min_size=FUZZ_RECORDS, max_size=FUZZ_RECORDS))
        def check(junk: list[Outgoing]) -> None:
            batch: list[Outgoing] = []
            for record in [*junk, *FIXED_POISON]:
                batch += [record, valid.next()]  # every bad record between two valid ones
            bad = Counter(r for r in map(expected_reason, batch) if r is not None)
            routed_before = pipeline.scheduler.count()
            rejected_before = len(pipeline.rejected)

            end = send(kafka_broker, topic, batch)
            wait_for(lambda: committed(kafka_broker, topic, config.group_id) == end, 90, "commit")

            assert consumer.connected
            new_rejections = pipeline.rejected[rejected_before:]
            assert Counter(reason for reason, _ in new_rejections) == bad
            assert all(dead_lettered for _, dead_lettered in new_rejections)
            valid_count = len(junk) + len(FIXED_POISON)
            assert pipeline.scheduler.count() - routed_before == valid_count
            totals.update(sent=len(batch), bad=sum(bad.values()), valid_routed=valid_count)
            reasons.update(bad)

        check()

    letters = read_all(kafka_broker, dlq, totals["bad"])
    assert len(letters) == totals["bad"]
    headers = [dict(letter.headers) for letter in letters]
    assert Counter(h[HEADER_PREFIX + "reason"].decode() for h in headers) == reasons
    assert all(h[HEADER_PREFIX + "topic"] == topic.encode() for h in headers)
    # Verbatim copies, except one too big for the broker, which says so.
    dropped = [h for h in headers if HEADER_PREFIX + "value-dropped" in h]
    assert len(dropped) <= FUZZ_EXAMPLES
    rejected_metric = sum(
        pipeline.metrics.registry.get_sample_value(
            "icemv_events_dead_lettered_total", {"reason": reason}
        )
        or 0
        for reason in reasons
    )
    assert rejected_metric == totals["bad"]
    print(
        f"\nfuzz: sent={totals['sent']} bad={totals['bad']} dead-lettered={len(letters)} "
        f"(value dropped: {len(dropped)}) valid-routed={totals['valid_routed']} "
        f"reasons={dict(reasons)}"
    )


def test_nul_in_a_table_name_is_committed_and_the_next_event_processed(
    lakehouse: Lakehouse, kafka_broker: TansuBroker, table: tuple[Identifier, str]
) -> None:
    """Issue 12 item 1: the catalog refused the name, the consumer died and re-read it forever."""
    topic, dlq = new_topics(kafka_broker)
    config = kafka_config(kafka_broker, topic, dlq)
    pipeline = Pipeline(lakehouse, table[0], config)
    valid = ValidEvents(*table)
    nul = encoded({"type": "table-commit", "namespace": [table[0].namespace[0]], "name": "a\x00b"})
    with running(pipeline.consumer) as consumer:
        end = send(kafka_broker, topic, [Outgoing(None, nul), valid.next()])
        wait_for(lambda: pipeline.scheduler.count() == 1, 30, "the event after the poison one")
        wait_for(lambda: committed(kafka_broker, topic, config.group_id) == end, 30, "commit")
        assert consumer.connected
    assert pipeline.rejected == [("bad-identifier", True)]
    [letter] = read_all(kafka_broker, dlq, 1)
    assert letter.value == nul


def test_a_handler_that_raises_cannot_wedge_the_consumer_either(
    lakehouse: Lakehouse, kafka_broker: TansuBroker, table: tuple[Identifier, str]
) -> None:
    """The class, not the instance: a handler passing the raw name to the catalog (as before
    names were checked) raises ValueError from the database driver; that record is given up,
    the next one handled."""
    topic, dlq = new_topics(kafka_broker)
    config = kafka_config(kafka_broker, topic, dlq)
    pipeline = Pipeline(lakehouse, table[0], config)
    seen: list[bool] = []

    def unchecked(record: Any) -> Sequence[Future[Any]]:
        event = json.loads(record.value)
        seen.append(lakehouse.table_exists(Identifier(tuple(event["namespace"]), event["name"])))
        return []

    consumer = pipeline.make_consumer(config, unchecked)
    namespace = table[0].namespace[0]
    nul = encoded({"type": "table-commit", "namespace": [namespace], "name": "a\x00b"})
    ok = encoded({"type": "table-commit", "namespace": [namespace], "name": table[0].name})
    with running(consumer):
        end = send(kafka_broker, topic, [Outgoing(None, nul), Outgoing(None, ok)])
        wait_for(lambda: committed(kafka_broker, topic, config.group_id) == end, 30, "commit")
    assert seen == [True]
    assert pipeline.rejected == [(HANDLER_ERROR, True)]
    [letter] = read_all(kafka_broker, dlq, 1)
    headers = dict(letter.headers)
    assert headers[HEADER_PREFIX + "error"] == b"ValueError"
    assert b"NUL" in headers[HEADER_PREFIX + "detail"]


def test_a_catalog_outage_holds_the_offset_and_retries(
    lakehouse: Lakehouse, kafka_broker: TansuBroker, table: tuple[Identifier, str]
) -> None:
    """Retryable failures are not poison: nothing is dead-lettered, the record is handled
    once the catalog answers again."""
    topic, dlq = new_topics(kafka_broker)
    config = kafka_config(kafka_broker, topic, dlq)
    pipeline = Pipeline(lakehouse, table[0], config)
    outage = threading.Event()
    outage.set()
    attempts: list[bool] = []

    def flaky(record: Any) -> Sequence[Future[Any]]:
        attempts.append(outage.is_set())
        if outage.is_set():
            raise ConnectionRefusedError("catalog database unreachable")
        return pipeline.router.handle(record)

    consumer = pipeline.make_consumer(config, flaky)
    with running(consumer):
        end = send(kafka_broker, topic, [ValidEvents(*table).next()])
        wait_for(lambda: len(attempts) >= 2, 30, "a retry")
        assert committed(kafka_broker, topic, config.group_id) == 0
        outage.clear()
        wait_for(lambda: pipeline.scheduler.count() == 1, 60, "the retried event routed")
        wait_for(lambda: committed(kafka_broker, topic, config.group_id) == end, 30, "commit")
    assert pipeline.rejected == []
    assert read_all(kafka_broker, dlq, 0, timeout=2) == []


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[TansuBroker]:
    """Its own broker: this test stops it."""
    with TansuBroker(tmp_path / "tansu.log") as broker:
        yield broker


def test_readiness_follows_the_broker_within_seconds(
    lakehouse: Lakehouse, private_broker: TansuBroker, table: tuple[Identifier, str]
) -> None:
    """Issue 12 item 4: a 25 s outage used to go unseen. Two outages: a broker that hangs
    (sockets open, nothing answers: a partition) and one that stops (sockets closed)."""
    topic, dlq = new_topics(private_broker)
    config = kafka_config(private_broker, topic, dlq)
    pipeline = Pipeline(lakehouse, table[0], config)
    with running(pipeline.consumer) as consumer:
        wait_for(lambda: consumer.connected, 10, "connected")
        assert pipeline.connected_gauge() == 1

        private_broker.pause()
        try:
            hung = wait_for(lambda: not consumer.connected, 15, "the hung broker to show")
            assert pipeline.connected_gauge() == 0
        finally:
            private_broker.resume()
        back = wait_for(lambda: consumer.connected, 60, "connected after the hang")
        assert hung < 8

        private_broker.stop()
        down = wait_for(lambda: not consumer.connected, 10, "the stopped broker to show")
        assert pipeline.connected_gauge() == 0
        assert down < 5
        private_broker.start()
        private_broker.recreate_topic(topic)
        up = wait_for(lambda: consumer.connected, 60, "reconnected")
        assert pipeline.connected_gauge() == 1
        # And it consumes again (in-memory broker: a new topic, a fresh group offset).
        send(private_broker, topic, [ValidEvents(*table).next()])
        wait_for(lambda: pipeline.scheduler.count() == 1, 60, "an event after the restart")
    print(
        f"\nreadiness: hung broker seen after {hung:.2f}s (back {back:.2f}s after resume), "
        f"stopped broker after {down:.2f}s, reconnected {up:.2f}s after restart"
    )
