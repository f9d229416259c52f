"""The checks after a refresh come in rounds: what arrives within a window is one round."""

from __future__ import annotations

import queue
import threading

import pytest

from icemv.identifiers import Identifier
from icemv.mv.history import RefreshRecord
from icemv.service.after_refresh import AfterRefreshChecks, Round

A, B, C = (Identifier(("ns",), name) for name in "abc")
DEADLINE = 10.0


def _record(snapshot_id: int) -> RefreshRecord:
    return RefreshRecord(snapshot_id, snapshot_id, 0, None, {})  # type: ignore[arg-type]


class _Clock:
    """Time that moves only when the test says so (the thread waits real time, rechecks)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


def _checks(clock: _Clock, check_round: object) -> AfterRefreshChecks:
    checks = AfterRefreshChecks(check_round, window_seconds=0.05, clock=clock)  # type: ignore[arg-type]
    checks.start()
    return checks


def test_results_within_the_window_are_one_round_the_later_result_of_an_mv_checked(
    clock: _Clock,
) -> None:
    rounds: queue.Queue[Round] = queue.Queue()
    checks = _checks(clock, rounds.put)
    try:
        checks.add(A, _record(1))
        checks.add(B, None)
        checks.add(A, _record(2))
        with pytest.raises(queue.Empty):  # the window has not passed
            rounds.get(timeout=0.3)
        clock.now = 1.0
        taken = rounds.get(timeout=DEADLINE)
        assert taken == {B: None, A: _record(2)}
        assert rounds.empty()
    finally:
        checks.stop()


def test_a_result_arriving_during_a_round_waits_for_the_next(clock: _Clock) -> None:
    rounds: queue.Queue[Round] = queue.Queue()
    release = threading.Event()

    def check_round(refreshed: Round) -> None:
        rounds.put(refreshed)
        assert release.wait(DEADLINE)

    checks = _checks(clock, check_round)
    try:
        checks.add(A, None)
        clock.now = 1.0
        assert rounds.get(timeout=DEADLINE) == {A: None}
        checks.add(C, None)
        clock.now = 1.01  # within the new result's window
        release.set()
        with pytest.raises(queue.Empty):
            rounds.get(timeout=0.3)
        clock.now = 2.0
        assert rounds.get(timeout=DEADLINE) == {C: None}
    finally:
        release.set()
        checks.stop()


def test_a_failing_round_does_not_stop_the_next(clock: _Clock) -> None:
    rounds: queue.Queue[Round] = queue.Queue()

    def check_round(refreshed: Round) -> None:
        rounds.put(refreshed)
        if A in refreshed:
            raise RuntimeError("catalog down")

    checks = _checks(clock, check_round)
    try:
        checks.add(A, None)
        clock.now = 1.0
        assert rounds.get(timeout=DEADLINE) == {A: None}
        checks.add(B, None)
        clock.now = 2.0
        assert rounds.get(timeout=DEADLINE) == {B: None}
    finally:
        checks.stop()


def test_stop_drops_what_waits_and_ends_the_thread(clock: _Clock) -> None:
    rounds: queue.Queue[Round] = queue.Queue()
    checks = _checks(clock, rounds.put)
    checks.add(A, None)
    checks.stop()
    clock.now = 1.0
    assert not any(t.name == "icemv-after-refresh" and t.is_alive() for t in threading.enumerate())
    assert rounds.empty()
    checks.add(B, None)  # after stop: kept nowhere, checked never
    assert rounds.empty()
