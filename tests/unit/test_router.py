"""EventRouter outcome codes, without Kafka or a catalog: every outcome is counted once."""

from __future__ import annotations

import json
from concurrent.futures import Future
from dataclasses import dataclass

import pytest

from icemv.errors import BadEventError
from icemv.identifiers import Identifier
from icemv.refresh.result import RefreshResult
from icemv.service.metrics import Metrics
from icemv.service.router import EventRouter

TABLE = Identifier(("n",), "t")
MV = Identifier(("n",), "mv")
UUID = "6891e4cd-ebac-4e4a-b511-dd3bcb3b6798"


@dataclass
class Record:
    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] | None = None
    topic: str = "commits"
    partition: int = 0
    offset: int = 0


def record(event: object) -> Record:
    return Record(json.dumps(event).encode())


def commit(name: str = "t", fields: dict[str, object] | None = None) -> Record:
    return record({"type": "table-commit", "namespace": ["n"], "name": name, **(fields or {})})


class Harness:
    def __init__(self, exists: set[Identifier] | None = None) -> None:
        self.metrics = Metrics()
        self.requests: list[tuple[Identifier, str]] = []
        self.view_changes = 0
        self.exists = {TABLE} if exists is None else exists
        self.router = EventRouter(
            "lake", self, self.metrics, self.table_exists, self.request, self.view_changed
        )
        self.fail_lookups: Exception | None = None

    def readers_of(self, table: Identifier) -> frozenset[Identifier]:
        return frozenset({MV}) if table == TABLE else frozenset()

    def table_exists(self, table: Identifier) -> bool:
        if self.fail_lookups is not None:
            raise self.fail_lookups
        return table in self.exists

    def request(self, mv: Identifier, reason: str) -> Future[RefreshResult]:
        self.requests.append((mv, reason))
        return Future()

    def view_changed(self) -> None:
        self.view_changes += 1

    def count(self, outcome: str, format: str = "icemv") -> float:
        value = self.metrics.registry.get_sample_value(
            "icemv_events_total", {"format": format, "outcome": outcome}
        )
        return value or 0.0


def test_a_commit_to_a_table_with_readers_is_routed() -> None:
    h = Harness()
    futures = h.router.handle(commit())
    assert len(futures) == 1 and h.requests == [(MV, "event")]
    assert h.count("routed") == 1


def test_the_same_snapshot_twice_is_a_duplicate() -> None:
    h = Harness()
    h.router.handle(commit("t", {"table-uuid": UUID, "snapshot-id": 1}))
    assert h.router.handle(commit("t", {"table-uuid": UUID, "snapshot-id": 1})) == []
    assert h.count("routed") == 1 and h.count("duplicate") == 1
    assert len(h.requests) == 1


@pytest.mark.parametrize(
    ("event", "outcome"),
    [
        ({"type": "table-commit", "namespace": ["n"], "name": "other"}, "no-dependents"),
        ({"type": "table-commit", "namespace": ["n"], "name": "gone"}, "unknown-table"),
        (
            {"type": "table-commit", "namespace": ["n"], "name": "t", "catalog": "x"},
            "other-catalog",
        ),
        ({"type": "view-commit"}, "view-change"),
    ],
)
def test_outcomes_that_request_nothing(event: object, outcome: str) -> None:
    h = Harness(exists={TABLE, Identifier(("n",), "other")})
    assert h.router.handle(record(event)) == []
    assert h.count(outcome) == 1
    assert h.requests == []
    assert h.view_changes == (1 if outcome == "view-change" else 0)


def test_ignored_events_are_counted_by_format() -> None:
    h = Harness()
    polaris = {"event_type": "AFTER_CREATE_NAMESPACE", "event_id": "e1"}
    assert h.router.handle(record(polaris)) == []
    assert h.count("ignored", "polaris") == 1


def test_bad_records_raise_for_the_consumer_to_dead_letter() -> None:
    h = Harness()
    with pytest.raises(BadEventError) as bad:
        h.router.handle(Record(b"not json"))
    assert bad.value.reason == "not-json"
    with pytest.raises(BadEventError) as bad:
        h.router.handle(commit("t\x00"))
    assert bad.value.reason == "bad-identifier"
    assert h.requests == []


def test_a_failed_lookup_is_not_remembered_so_its_retry_is_routed() -> None:
    h = Harness()
    event = commit("other", {"table-uuid": UUID, "snapshot-id": 7})
    h.fail_lookups = ConnectionError("catalog down")
    with pytest.raises(ConnectionError):
        h.router.handle(event)
    h.fail_lookups = None
    h.exists.add(Identifier(("n",), "other"))
    assert h.router.handle(event) == []
    assert h.count("no-dependents") == 1 and h.count("duplicate") == 0
