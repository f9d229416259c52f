"""RefreshScheduler: pure concurrency, driven by a fake refresh that records and blocks.

Waits use deadlines (TIMEOUT) on Events/Conditions, never fixed sleeps; a manual clock makes
the coalescing window deterministic.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import pytest
from structlog.testing import capture_logs

from icemv.config import RefreshConfig
from icemv.identifiers import Identifier
from icemv.refresh.result import Mode, RefreshResult
from icemv.service.scheduler import RefreshScheduler

TIMEOUT = 5.0
A, B, C, D = (Identifier(("db",), name) for name in "abcd")


class FakeRefresh:
    """Records calls and concurrency; blocks until `release` is set; fails on demand."""

    def __init__(self, block: bool = False) -> None:
        self.release = threading.Event()
        if not block:
            self.release.set()
        self.failures: Counter[Identifier] = Counter()  # failures left per MV
        self.modes: dict[Identifier, Mode] = {}
        self.calls: list[Identifier] = []
        self.call_times: list[float] = []
        self.max_active = 0
        self.max_active_per_mv = 0
        self._active: Counter[Identifier] = Counter()
        self._cond = threading.Condition()

    def __call__(self, mv: Identifier) -> RefreshResult:
        with self._cond:
            self.calls.append(mv)
            self.call_times.append(time.monotonic())
            self._active[mv] += 1
            self.max_active = max(self.max_active, sum(self._active.values()))
            self.max_active_per_mv = max(self.max_active_per_mv, self._active[mv])
            self._cond.notify_all()
        try:
            assert self.release.wait(TIMEOUT), "test never released the refresh"
            with self._cond:
                if self.failures[mv] > 0:
                    self.failures[mv] -= 1
                    raise RuntimeError(f"refresh of {mv} failed")
            return result_for(mv, self.modes.get(mv, "full"))
        finally:
            with self._cond:
                self._active[mv] -= 1

    def wait_calls(self, count: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.calls) >= count, TIMEOUT), self.calls


def result_for(mv: Identifier, mode: Mode = "full") -> RefreshResult:
    return RefreshResult(
        mv=mv,
        mode=mode,
        reason="test",
        storage_snapshot_id=None if mode == "skipped" else 1,
        rows_inserted=0,
        rows_deleted=0,
        sources=(),
        started_ms=0,
        duration_seconds=0.0,
    )


def wait_until(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def make_scheduler() -> Iterator[Callable[..., RefreshScheduler]]:
    made: list[tuple[RefreshScheduler, FakeRefresh]] = []

    def make(
        refresh: FakeRefresh, config: RefreshConfig | None = None, **kw: Any
    ) -> RefreshScheduler:
        scheduler = RefreshScheduler(refresh, config or RefreshConfig(coalesce_seconds=0), **kw)
        scheduler.start()
        made.append((scheduler, refresh))
        return scheduler

    yield make
    for scheduler, refresh in made:
        refresh.release.set()
        assert scheduler.stop(TIMEOUT)


def test_burst_of_requests_coalesces_into_one_refresh(
    make_scheduler: Callable[..., RefreshScheduler],
) -> None:
    refresh, clock = FakeRefresh(), ManualClock()
    scheduler = make_scheduler(refresh, RefreshConfig(coalesce_seconds=0.05), clock=clock)

    futures = [scheduler.request(A) for _ in range(10)]
    assert scheduler.pending() == {A: "queued"}
    clock.now = 1.0  # the window closes; the dispatcher sees it when its 0.05 s wait lapses

    results = [future.result(TIMEOUT) for future in futures]
    assert refresh.calls == [A]
    assert all(result is results[0] for result in results)
    assert scheduler.pending() == {}


def test_a_poll_request_starts_without_the_window(
    make_scheduler: Callable[..., RefreshScheduler],
) -> None:
    """A poll folds the commits since the last poll into one request: no window to wait."""
    refresh, clock = FakeRefresh(), ManualClock()
    scheduler = make_scheduler(refresh, RefreshConfig(coalesce_seconds=60), clock=clock)
    polled = scheduler.request(A, "poll")
    event = scheduler.request(B, "event")
    polled.result(TIMEOUT)  # the clock never moves: only a zero window lets it run
    assert refresh.calls == [A]
    assert scheduler.pending() == {B: "queued"}
    assert not event.done()


def test_request_during_run_schedules_exactly_one_follow_up(
    make_scheduler: Callable[..., RefreshScheduler],
) -> None:
    refresh = FakeRefresh(block=True)
    scheduler = make_scheduler(refresh)
    first = scheduler.request(A)
    refresh.wait_calls(1)
    assert scheduler.pending() == {A: "running"}

    later = [scheduler.request(A) for _ in range(3)]
    assert not any(future.done() for future in later)
    refresh.release.set()

    first_result = first.result(TIMEOUT)
    later_results = [future.result(TIMEOUT) for future in later]
    assert refresh.calls == [A, A]
    assert all(result is later_results[0] for result in later_results)
    assert later_results[0] is not first_result
    assert refresh.max_active_per_mv == 1


def test_global_concurrency_is_capped(make_scheduler: Callable[..., RefreshScheduler]) -> None:
    refresh = FakeRefresh(block=True)
    config = RefreshConfig(coalesce_seconds=0, max_concurrent=2)
    scheduler = make_scheduler(refresh, config)
    futures = [scheduler.request(mv) for mv in (A, B, C, D)]
    refresh.wait_calls(2)
    # The dispatcher holds the other two while both workers are busy.
    assert sorted(scheduler.pending().values()) == ["queued", "queued", "running", "running"]

    refresh.release.set()
    assert {future.result(TIMEOUT).mv for future in futures} == {A, B, C, D}
    assert sorted(refresh.calls) == [A, B, C, D]
    assert refresh.max_active == 2


def test_queue_ahead_hands_out_more_than_max_concurrent(
    make_scheduler: Callable[..., RefreshScheduler],
) -> None:
    """`queue_ahead` refreshes beyond `max_concurrent` are handed out at once (the daemon's
    worker pool queues them); the rest wait in the scheduler."""
    refresh = FakeRefresh(block=True)
    config = RefreshConfig(coalesce_seconds=0, max_concurrent=1)
    scheduler = make_scheduler(refresh, config, queue_ahead=2)
    futures = [scheduler.request(mv) for mv in (A, B, C, D)]
    refresh.wait_calls(3)
    assert sorted(scheduler.pending().values()) == ["queued", "running", "running", "running"]

    refresh.release.set()
    assert {future.result(TIMEOUT).mv for future in futures} == {A, B, C, D}
    assert refresh.max_active == 3


def test_failures_retry_with_growing_backoff_then_resolve_all_futures(
    make_scheduler: Callable[..., RefreshScheduler],
) -> None:
    refresh = FakeRefresh()
    refresh.failures[A] = 4
    failures: list[tuple[Identifier, str, int, float]] = []
    config = RefreshConfig(coalesce_seconds=0, retry_initial_seconds=0.02, retry_max_seconds=0.05)
    scheduler = make_scheduler(
        refresh,
        config,
        on_failure=lambda mv, exc, attempt, delay: failures.append((mv, str(exc), attempt, delay)),
    )

    futures = [scheduler.request(A), scheduler.request(A)]
    results = [future.result(TIMEOUT) for future in futures]

    assert results[0] is results[1] and results[0].mv == A
    assert refresh.calls == [A] * 5
    assert [(mv, attempt) for mv, _, attempt, _ in failures] == [(A, n) for n in (1, 2, 3, 4)]
    assert all(error == "refresh of db.a failed" for _, error, _, _ in failures)
    delays = [delay for *_, delay in failures]
    assert delays[0] < delays[1] < delays[2]  # 0.02, 0.04, then the 0.05 cap (minus jitter)
    for delay, base in zip(delays, (0.02, 0.04, 0.05, 0.05), strict=True):
        assert 0.9 * base <= delay <= base


def test_requests_do_not_shorten_backoff(make_scheduler: Callable[..., RefreshScheduler]) -> None:
    refresh = FakeRefresh()
    refresh.failures[A] = 1
    failed: list[tuple[float, float]] = []
    config = RefreshConfig(coalesce_seconds=0, retry_initial_seconds=0.3)
    scheduler = make_scheduler(
        refresh,
        config,
        on_failure=lambda mv, exc, attempt, delay: failed.append((time.monotonic(), delay)),
    )

    first = scheduler.request(A)
    wait_until(lambda: scheduler.pending() == {A: "retrying"})
    storm = [scheduler.request(A) for _ in range(20)]

    result = first.result(TIMEOUT)
    assert all(future.result(TIMEOUT) is result for future in storm)
    assert refresh.calls == [A, A]
    ((failed_at, delay),) = failed
    assert refresh.call_times[1] - failed_at >= delay


def test_failing_mv_does_not_block_others(make_scheduler: Callable[..., RefreshScheduler]) -> None:
    refresh = FakeRefresh()
    refresh.failures[A] = 1000
    config = RefreshConfig(coalesce_seconds=0, max_concurrent=1, retry_initial_seconds=60)
    scheduler = make_scheduler(refresh, config)

    stuck = scheduler.request(A)
    wait_until(lambda: scheduler.pending() == {A: "retrying"})
    assert scheduler.request(B).result(TIMEOUT).mv == B  # the only worker is free for B

    assert not stuck.done()
    assert scheduler.stop(TIMEOUT)
    assert stuck.cancelled()  # waiting out a backoff counts as queued work
    assert refresh.calls == [A, B]


def test_dependents_refresh_after_upstream_in_order(
    make_scheduler: Callable[..., RefreshScheduler],
) -> None:
    refresh = FakeRefresh()
    graph = {A: [B], B: [C]}
    seen: list[Identifier] = []
    with capture_logs() as logs:
        scheduler = make_scheduler(
            refresh,
            on_result=lambda result: seen.append(result.mv),
            dependents=lambda mv: graph.get(mv, []),
        )
        scheduler.request(A)
        refresh.wait_calls(3)
        wait_until(lambda: scheduler.pending() == {})

    assert refresh.calls == [A, B, C]
    assert seen == [A, B, C]
    reasons = {e["mv"]: e["reason"] for e in logs if e["event"] == "refresh_scheduled"}
    assert reasons == {"db.a": "event", "db.b": "upstream-refreshed", "db.c": "upstream-refreshed"}


def test_skipped_refresh_does_not_request_dependents(
    make_scheduler: Callable[..., RefreshScheduler],
) -> None:
    refresh = FakeRefresh()
    refresh.modes[A] = "skipped"
    scheduler = make_scheduler(refresh, dependents=lambda mv: [B] if mv == A else [])

    assert scheduler.request(A).result(TIMEOUT).mode == "skipped"
    # Dependents are requested before the upstream's futures resolve, so none means none.
    assert scheduler.pending() == {}
    assert refresh.calls == [A]


def test_stop_cancels_queued_and_waits_for_running(
    make_scheduler: Callable[..., RefreshScheduler],
) -> None:
    refresh = FakeRefresh(block=True)
    scheduler = make_scheduler(refresh, RefreshConfig(coalesce_seconds=0, max_concurrent=1))
    running = scheduler.request(A)
    refresh.wait_calls(1)
    queued = scheduler.request(B)  # no free worker
    follow_up = scheduler.request(A)  # waits for A's run

    with ThreadPoolExecutor(1) as pool:
        stopped = pool.submit(scheduler.stop, TIMEOUT)
        done, _ = wait([queued, follow_up], TIMEOUT)
        assert queued.cancelled() and follow_up.cancelled() and len(done) == 2
        assert scheduler.pending() == {A: "running"}
        assert not stopped.done()
        refresh.release.set()
        assert stopped.result(TIMEOUT) is True

    assert running.result(TIMEOUT).mv == A
    assert refresh.calls == [A]
    refused = scheduler.request(C)  # requests after stop are refused this way
    assert refused.cancelled() and wait([refused], 0).done == {refused}


def test_stop_returns_false_when_a_refresh_outlives_the_grace(
    make_scheduler: Callable[..., RefreshScheduler],
) -> None:
    refresh = FakeRefresh(block=True)
    scheduler = make_scheduler(refresh)
    running: Future[RefreshResult] = scheduler.request(A)
    refresh.wait_calls(1)

    began = time.monotonic()
    assert scheduler.stop(0.05) is False
    assert time.monotonic() - began < TIMEOUT

    refresh.release.set()
    assert running.result(TIMEOUT).mv == A  # the late refresh still answers its callers


def test_refresh_failing_after_stop_is_not_retried(
    make_scheduler: Callable[..., RefreshScheduler],
) -> None:
    refresh = FakeRefresh(block=True)
    refresh.failures[A] = 1
    scheduler = make_scheduler(
        refresh, RefreshConfig(coalesce_seconds=0, retry_initial_seconds=0.01)
    )
    running = scheduler.request(A)
    refresh.wait_calls(1)
    assert scheduler.stop(0.01) is False

    refresh.release.set()
    assert isinstance(running.exception(TIMEOUT), RuntimeError)  # waiters learn why
    assert refresh.calls == [A]
    assert scheduler.pending() == {}
