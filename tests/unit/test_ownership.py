"""Which replica owns which MV (service/ownership.py): stable, balanced, moved by the group."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from icemv.identifiers import Identifier
from icemv.service.ownership import Ownership, owner_partition

MVS = [Identifier(("ns",), f"mv_{i}") for i in range(300)]


def test_the_owner_partition_is_stable_across_processes() -> None:
    """Not Python's salted hash(): another interpreter (another replica) agrees."""
    code = (
        "from icemv.identifiers import Identifier;"
        "from icemv.service.ownership import owner_partition;"
        "print([owner_partition(Identifier(('ns',), f'mv_{i}'), 7) for i in range(300)])"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )  # fmt: skip
    assert other.stdout.strip() == str([owner_partition(mv, 7) for mv in MVS])


def test_mvs_spread_over_every_partition() -> None:
    counts = [0] * 4
    for mv in MVS:
        counts[owner_partition(mv, 4)] += 1
    assert min(counts) > 300 / 4 * 0.7, counts


def test_namespace_and_name_are_not_confused() -> None:
    """("a.b", "c") and ("a", "b.c") are different MVs with the same dotted text."""
    first = [owner_partition(Identifier(("a.b",), f"c{i}"), 1000) for i in range(20)]
    second = [owner_partition(Identifier(("a",), f"b.c{i}"), 1000) for i in range(20)]
    assert first != second


def test_a_topic_has_partitions() -> None:
    with pytest.raises(ValueError):
        owner_partition(MVS[0], 0)


def test_replicas_holding_disjoint_partitions_own_each_mv_exactly_once() -> None:
    replicas = [Ownership("t") for _ in range(3)]
    for ownership, partitions in zip(replicas, ([0, 3], [1], [2]), strict=True):
        ownership.assign(partitions, 4)
    for mv in MVS:
        assert sum(r.owns(mv) for r in replicas) == 1
    # A replica leaves: the coordinator gives its partitions to the others.
    replicas[0].revoke()
    replicas[1].assign([0, 1], 4)
    replicas[2].assign([2, 3], 4)
    assert not any(replicas[0].owns(mv) for mv in MVS)
    for mv in MVS:
        assert replicas[1].owns(mv) + replicas[2].owns(mv) == 1


def test_split_sends_the_others_to_their_partitions() -> None:
    ownership = Ownership("t")
    ownership.assign([1], 3)
    split = ownership.split(MVS)
    assert set(split.mine) == {mv for mv in MVS if owner_partition(mv, 3) == 1}
    assert set(split.elsewhere) == {0, 2}
    for partition, mvs in split.elsewhere.items():
        assert mvs and all(owner_partition(mv, 3) == partition for mv in mvs)
    assert len(split.mine) + sum(len(m) for m in split.elsewhere.values()) == len(MVS)


def test_poll_only_owns_everything() -> None:
    ownership = Ownership.everything()
    assert ownership.known()
    assert ownership.owns_everything() and all(ownership.owns(mv) for mv in MVS)
    assert ownership.split(MVS[:5]).mine == tuple(MVS[:5])


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_replica_that_never_joined_owns_nothing_until_the_fallback() -> None:
    clock = Clock()
    ownership = Ownership("t", fallback_seconds=10, clock=clock)
    clock.now += 60  # joining takes a while: still nothing while the broker answers
    assert not ownership.owns(MVS[0]) and not ownership.known()
    ownership.connected(False)  # the broker is unreachable
    clock.now += 9
    assert not ownership.owns(MVS[0]) and not ownership.known()
    clock.now += 1
    assert ownership.owns(MVS[0]), "no broker for a session timeout: refresh everything"
    assert ownership.known()
    ownership.assign([0], 2)
    assert ownership.owns(MVS[0]) == (owner_partition(MVS[0], 2) == 0)


def test_a_replica_cut_off_from_its_broker_falls_back_to_everything() -> None:
    clock = Clock()
    ownership = Ownership("t", fallback_seconds=10, clock=clock)
    ownership.assign([0], 2)
    ownership.connected(True)
    mine = [mv for mv in MVS if ownership.owns(mv)]
    assert 0 < len(mine) < len(MVS)
    ownership.connected(False)
    clock.now += 9.9
    ownership.connected(False)  # reported again on every consumer poll: the start stays
    assert [mv for mv in MVS if ownership.owns(mv)] == mine
    clock.now += 0.1
    assert ownership.owns_everything()
    ownership.connected(True)
    assert [mv for mv in MVS if ownership.owns(mv)] == mine
