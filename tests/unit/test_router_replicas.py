"""EventRouter with several replicas: readers another replica owns are forwarded to their
partition, and a forwarded request is refreshed by the replica that reads it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from concurrent.futures import Future

import pytest

from icemv.errors import BadEventError
from icemv.events.formats.refresh_request import encode_refresh_request
from icemv.identifiers import Identifier
from icemv.refresh.result import RefreshResult
from icemv.service.metrics import Metrics
from icemv.service.ownership import Ownership, owner_partition
from icemv.service.router import EventRouter
from tests.unit.test_router import TABLE, Record, commit

READERS = frozenset(Identifier(("n",), f"mv_{i}") for i in range(12))
PARTITIONS = 3


class Replica:
    def __init__(self, partitions: list[int], group: str = "icemv") -> None:
        self.metrics = Metrics()
        self.known = set(READERS)
        self.rebuilds = 0
        self.requests: list[tuple[Identifier, str]] = []
        self.forwarded: list[tuple[dict[int, tuple[Identifier, ...]], str]] = []
        self.ownership = Ownership("commits")
        self.ownership.assign(partitions, PARTITIONS)
        self.broker_down = False
        self.router = EventRouter(
            "lake",
            self,
            self.metrics,
            lambda _table: True,
            self.request,
            self.rebuild,
            ownership=self.ownership,
            forward=self.forward,
            group=group,
            is_mv=lambda mv: mv in self.known,
        )

    def rebuild(self) -> None:
        self.rebuilds += 1

    def readers_of(self, table: Identifier) -> frozenset[Identifier]:
        return READERS if table == TABLE else frozenset()

    def request(self, mv: Identifier, reason: str) -> Future[RefreshResult]:
        self.requests.append((mv, reason))
        return Future()

    def forward(self, by_partition: Mapping[int, Sequence[Identifier]], reason: str) -> int:
        if self.broker_down:
            raise ConnectionError("broker down")
        self.forwarded.append(({p: tuple(m) for p, m in by_partition.items()}, reason))
        return len(by_partition)

    def count(self, outcome: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "icemv_events_total", {"format": "icemv", "outcome": outcome}
        )
        return value or 0.0


def request_record(
    mvs: Sequence[Identifier], partition: int, group: str = "icemv", catalog: str = "lake"
) -> Record:
    value = encode_refresh_request([(m.namespace, m.name) for m in mvs], group, "event", catalog)
    return Record(value, partition=partition)


def test_an_event_refreshes_owned_readers_here_and_forwards_the_rest() -> None:
    replica = Replica([0])
    futures = replica.router.handle(commit())
    mine = {mv for mv in READERS if owner_partition(mv, PARTITIONS) == 0}
    assert {mv for mv, _ in replica.requests} == mine and len(futures) == len(mine)
    ((by_partition, reason),) = replica.forwarded
    assert reason == "event" and set(by_partition) == {1, 2}
    for partition, mvs in by_partition.items():
        assert {owner_partition(mv, PARTITIONS) for mv in mvs} == {partition}
    assert replica.count("routed") == 1
    forwarded = replica.metrics.registry.get_sample_value(
        "icemv_refresh_requests_forwarded_total", {}
    )
    assert forwarded == len(READERS) - len(mine)


def test_three_replicas_route_one_event_into_one_request_per_mv() -> None:
    """Whichever replica reads the event, every reader is requested exactly once in all."""
    replicas = {p: Replica([p]) for p in range(PARTITIONS)}
    reader = replicas[1]
    reader.router.handle(commit())
    for by_partition, _ in reader.forwarded:
        for partition, mvs in by_partition.items():
            replicas[partition].router.handle(request_record(mvs, partition))
    requested = [mv for r in replicas.values() for mv, _ in r.requests]
    assert sorted(requested) == sorted(READERS)
    for partition, replica in replicas.items():
        assert all(owner_partition(mv, PARTITIONS) == partition for mv, _ in replica.requests)


def test_a_forward_that_fails_raises_before_anything_is_requested() -> None:
    """The consumer holds the record and retries it: no local refresh is requested twice."""
    replica = Replica([0])
    replica.broker_down = True
    with pytest.raises(ConnectionError):
        replica.router.handle(commit("t", {"table-uuid": "6891e4cd-ebac-4e4a-b511-dd3bcb3b6798"}))
    assert replica.requests == []
    replica.broker_down = False
    assert replica.router.handle(commit("t")) and replica.forwarded


def test_requests_of_another_group_or_catalog_are_left_alone() -> None:
    replica = Replica([0])
    mv = sorted(READERS)[0]
    assert replica.router.handle(request_record([mv], 0, group="other")) == []
    assert replica.router.handle(request_record([mv], 0, catalog="elsewhere")) == []
    assert replica.requests == []
    assert replica.count("other-group") == 1 and replica.count("other-catalog") == 1
    assert len(replica.router.handle(request_record([mv], 0))) == 1
    assert replica.requests == [(mv, "event")] and replica.count("requested") == 1


def test_a_request_for_an_mv_the_index_lacks_rebuilds_it_and_skips_what_is_gone() -> None:
    replica = Replica([0])
    known, dropped = sorted(READERS)[0], Identifier(("n",), "dropped")
    futures = replica.router.handle(request_record([known, dropped], 0))
    assert replica.rebuilds == 1 and replica.requests == [(known, "event")] and len(futures) == 1
    assert replica.router.handle(request_record([dropped], 0)) == []
    assert replica.count("unknown-mv") == 1 and replica.rebuilds == 2


def test_a_malformed_request_is_a_bad_event() -> None:
    replica = Replica([0])
    bad = {"type": "mv-refresh", "group": "icemv", "reason": "event", "mvs": [{"name": "x"}]}
    with pytest.raises(BadEventError) as error:
        replica.router.handle(Record(json.dumps(bad).encode()))
    assert error.value.reason == "missing-namespace"
    odd = {**bad, "reason": "because", "mvs": [{"namespace": ["n"], "name": "x"}]}
    with pytest.raises(BadEventError):
        replica.router.handle(Record(json.dumps(odd).encode()))
    with pytest.raises(BadEventError):
        replica.router.handle(Record(json.dumps({**bad, "mvs": []}).encode()))
    assert replica.requests == []


def test_without_ownership_every_reader_is_refreshed_here() -> None:
    """Poll-only mode and single replicas: Ownership.everything()."""
    replica = Replica([0])
    replica.router = EventRouter(
        "lake",
        replica,
        replica.metrics,
        lambda _table: True,
        replica.request,
        lambda: None,
        ownership=Ownership.everything(),
        forward=replica.forward,
        group="icemv",
    )
    replica.router.handle(commit())
    assert {mv for mv, _ in replica.requests} == READERS and replica.forwarded == []
