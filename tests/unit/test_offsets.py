"""OffsetTracker: the committable offset is the end of the longest run of done events."""

from __future__ import annotations

from concurrent.futures import Future

from icemv.service.offsets import OffsetTracker


def done() -> Future[None]:
    future: Future[None] = Future()
    future.set_result(None)
    return future


def test_events_without_refreshes_are_done_at_once() -> None:
    tracker = OffsetTracker()
    tracker.add("p", 5, [])
    tracker.add("p", 6, [])
    assert tracker.advance() == {"p": 7}
    assert tracker.pending("p") == 0
    assert tracker.advance() == {}  # nothing moved since


def test_an_unfinished_event_holds_back_the_offsets_behind_it() -> None:
    tracker = OffsetTracker()
    slow: Future[None] = Future()
    tracker.add("p", 0, [done()])
    tracker.add("p", 1, [slow, done()])
    tracker.add("p", 2, [done()])
    assert tracker.advance() == {"p": 1}
    assert tracker.pending("p") == 2
    slow.set_result(None)
    assert tracker.advance() == {"p": 3}


def test_a_failed_refresh_counts_as_done() -> None:
    # The scheduler retries refreshes itself; a future ends only when it gave up or succeeded.
    tracker = OffsetTracker()
    failed: Future[None] = Future()
    failed.set_exception(RuntimeError("boom"))
    tracker.add("p", 3, [failed])
    assert tracker.advance() == {"p": 4}


def test_partitions_advance_independently() -> None:
    tracker = OffsetTracker()
    slow: Future[None] = Future()
    tracker.add("a", 0, [slow])
    tracker.add("b", 10, [done()])
    assert tracker.advance() == {"b": 11}
    assert tracker.pending("a") == 1 and tracker.pending("b") == 0


def test_forgotten_partitions_are_gone() -> None:
    tracker = OffsetTracker()
    tracker.add("a", 0, [Future()])
    tracker.forget(["a"])
    assert tracker.pending("a") == 0
    assert tracker.advance() == {}
    assert tracker.pending("never-seen") == 0
