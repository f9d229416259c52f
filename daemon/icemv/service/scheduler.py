"""When refreshes run: coalescing, per-MV exclusivity, a concurrency cap, retries, dependents.

The scheduler knows nothing about how an MV is refreshed (it is handed a callable), so it is
pure concurrency logic. One dispatcher thread sleeps on a condition variable until the
earliest due time in a heap, then hands due MVs to a pool of ``max_concurrent`` threads
(plus ``queue_ahead``, see the class).

Per MV there is at most one entry, in one of three states:

* ``queued``: waiting for its coalescing window to close. Requests merge into it; the window
  is fixed from the first request, so a steady stream of events cannot postpone it forever.
  A poll's or a schedule's request has no window of its own (due at once): a poll already
  folds every commit since the last poll into one request per MV, so waiting would only add
  latency (a burst of events does wait, then merges).
* ``running``: a worker is refreshing it. New requests are *not* merged into the run (it may
  have pinned its sources before their commits); they form one follow-up batch that is
  queued when the run ends.
* ``retrying``: the last attempt raised; it waits out its backoff without holding a worker.
  Requests merge into the retry but never shorten the backoff, so an event storm cannot
  turn backoff into a hot loop. The retry starts after those requests, so it sees their
  commits and may answer them.

Futures stay pending until the batch they belong to succeeds; callers may cancel theirs,
which only detaches them (the refresh still runs for everybody else).
"""

from __future__ import annotations

import heapq
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Literal

import structlog

from icemv.config import RefreshConfig
from icemv.identifiers import Identifier
from icemv.refresh.result import RefreshResult

log = structlog.get_logger(__name__)

State = Literal["queued", "running", "retrying"]
# Modes that changed (or confirmed) the storage table, so readers of it may be stale.
_PROPAGATING_MODES = frozenset({"full", "incremental", "no-op"})
_UPSTREAM_REASON = "upstream-refreshed"
# Requests that are one per MV per poll (or schedule tick) already: due without a window.
_COALESCED_REASONS = frozenset({"poll", "schedule"})


@dataclass
class _Entry:
    state: State
    reason: str
    futures: list[Future[RefreshResult]]
    # Failures of the current batch so far; the next attempt is number `failures + 1`.
    failures: int = 0
    # Requests that arrived while running, and when the first of them arrived.
    follow_ups: list[Future[RefreshResult]] = field(default_factory=list)
    follow_up_reason: str = ""
    follow_up_since: float = 0.0


class RefreshScheduler:
    """Runs ``refresh(mv)`` when requested, at most once per MV at a time.

    ``queue_ahead``: refreshes handed out beyond ``max_concurrent``, for a ``refresh`` that
    queues its work elsewhere and bounds what runs itself (the daemon's worker processes:
    each has its next refresh waiting, so it does not idle while the daemon handles the
    result it just returned). ``on_failure(mv, error, attempt, delay)`` is told of every
    failed attempt and the delay before the next one; ``dependents(mv)`` names the MVs
    reading ``mv``'s storage table, requested after each propagating success. ``clock`` must
    tick in seconds (the dispatcher waits real time derived from it); it is injectable so
    timing logic can be tested.
    """

    def __init__(
        self,
        refresh: Callable[[Identifier], RefreshResult],
        config: RefreshConfig,
        on_result: Callable[[RefreshResult], None] | None = None,
        on_failure: Callable[[Identifier, BaseException, int, float], None] | None = None,
        dependents: Callable[[Identifier], Iterable[Identifier]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        queue_ahead: int = 0,
    ) -> None:
        self._refresh = refresh
        self._config = config
        self._on_result = on_result
        self._on_failure = on_failure
        self._dependents = dependents
        self._clock = clock
        self._cond = threading.Condition()
        self._entries: dict[Identifier, _Entry] = {}
        self._heap: list[tuple[float, Identifier]] = []
        self._running = 0
        self._limit = config.max_concurrent + queue_ahead  # refreshes handed out at once
        self._inflight: set[Future[None]] = set()
        self._stopping = False
        self._executor = ThreadPoolExecutor(self._limit, "icemv-refresh")
        self._dispatcher: threading.Thread | None = None

    def request(self, mv: Identifier, reason: str = "event") -> Future[RefreshResult]:
        """A future for a refresh of ``mv`` that starts after this call.

        After ``stop()`` the future comes back already cancelled rather than raising: event
        sources racing with shutdown need no special case, and the future says it won't run.
        """
        future: Future[RefreshResult] = Future()
        with self._cond:
            if self._stopping:
                _settle([future], None)
                return future
            self._enqueue(mv, reason, future)
        return future

    def start(self) -> None:
        with self._cond:
            if self._dispatcher is not None or self._stopping:
                return
            self._dispatcher = threading.Thread(
                target=self._dispatch, name="icemv-refresh-dispatcher", daemon=True
            )
            self._dispatcher.start()

    def stop(self, grace_seconds: float | None = None) -> bool:
        """Stop accepting requests, cancel waiting work, wait up to the grace for running work.

        Returns whether every running refresh finished within the grace. Those that did not
        keep their worker thread until they end; their futures still resolve then, but they
        are not retried.
        """
        grace = self._config.shutdown_grace_seconds if grace_seconds is None else grace_seconds
        with self._cond:
            self._stopping = True
            cancelled: list[Future[RefreshResult]] = []
            for mv, entry in list(self._entries.items()):
                cancelled += entry.follow_ups
                entry.follow_ups = []
                if entry.state != "running":
                    cancelled += entry.futures
                    del self._entries[mv]
            self._heap.clear()
            inflight = set(self._inflight)
            self._cond.notify_all()
        _settle(cancelled, None)
        if self._dispatcher is not None:
            self._dispatcher.join()
        # Not cancel_futures: a submitted task is a refresh we already marked running.
        self._executor.shutdown(wait=False)
        _, not_done = wait(inflight, timeout=max(grace, 0.0))
        log.info("refresh_scheduler_stopped", cancelled=len(cancelled), unfinished=len(not_done))
        return not not_done

    def pending(self) -> dict[Identifier, str]:
        """Every MV with work queued, running or retrying, and which of those it is."""
        with self._cond:
            return {mv: entry.state for mv, entry in self._entries.items()}

    def _enqueue(self, mv: Identifier, reason: str, future: Future[RefreshResult]) -> None:
        """Add a request to the MV's entry, creating one if needed. Caller holds the lock."""
        entry = self._entries.get(mv)
        now = self._clock()
        if entry is None:
            window = 0.0 if reason in _COALESCED_REASONS else self._config.coalesce_seconds
            due = now + window
            self._entries[mv] = _Entry("queued", reason, [future])
            heapq.heappush(self._heap, (due, mv))
            self._cond.notify_all()
            log.info("refresh_scheduled", mv=str(mv), reason=reason, due_in=due - now)
        elif entry.state == "running":
            if not entry.follow_ups:
                entry.follow_up_since, entry.follow_up_reason = now, reason
                log.info("refresh_follow_up_scheduled", mv=str(mv), reason=reason)
            entry.follow_ups.append(future)
        else:
            entry.futures.append(future)

    def _dispatch(self) -> None:
        with self._cond:
            while not self._stopping:
                now = self._clock()
                while self._heap and self._heap[0][0] <= now and self._running < self._limit:
                    _, mv = heapq.heappop(self._heap)
                    entry = self._entries[mv]
                    entry.state = "running"
                    self._running += 1
                    task = self._executor.submit(self._run, mv, entry.reason, entry.failures + 1)
                    self._inflight.add(task)
                    task.add_done_callback(self._inflight_done)
                timeout = None
                if self._heap and self._running < self._limit:
                    timeout = self._heap[0][0] - now
                self._cond.wait(timeout)

    def _inflight_done(self, task: Future[None]) -> None:
        with self._cond:
            self._inflight.discard(task)

    def _run(self, mv: Identifier, reason: str, attempt: int) -> None:
        log.debug("refresh_started", mv=str(mv), reason=reason, attempt=attempt)
        try:
            result = self._refresh(mv)
        except BaseException as exc:  # noqa: BLE001 (a worker must always settle its MV's state)
            self._failed(mv, exc, attempt)
        else:
            self._succeeded(mv, result)

    def _succeeded(self, mv: Identifier, result: RefreshResult) -> None:
        self._call("on_result", mv, self._on_result, result)
        if result.mode in _PROPAGATING_MODES and self._dependents is not None:
            try:
                downstream = [d for d in self._dependents(mv) if d != mv]
            except Exception:
                log.exception("refresh_dependents_failed", mv=str(mv))
                downstream = []
            with self._cond:
                for dependent in downstream:
                    if not self._stopping:
                        self._enqueue(dependent, _UPSTREAM_REASON, Future())
        with self._cond:
            entry = self._entries.pop(mv)
            self._running -= 1
            if entry.follow_ups and not self._stopping:
                due = max(self._clock(), entry.follow_up_since + self._config.coalesce_seconds)
                self._entries[mv] = _Entry("queued", entry.follow_up_reason, entry.follow_ups)
                heapq.heappush(self._heap, (due, mv))
            self._cond.notify_all()
        _settle(entry.futures, result)

    def _failed(self, mv: Identifier, exc: BaseException, attempt: int) -> None:
        base = self._config.retry_initial_seconds * 2.0 ** min(attempt - 1, 64)
        # Jitter downwards only, so retry_max_seconds stays a true cap.
        delay = min(base, self._config.retry_max_seconds) * random.uniform(0.9, 1.0)
        self._call("on_failure", mv, self._on_failure, mv, exc, attempt, delay)
        with self._cond:
            entry = self._entries[mv]
            self._running -= 1
            if self._stopping:
                # No retries after stop: tell the waiters why instead of leaving them hanging.
                del self._entries[mv]
                abandoned = entry.futures
                log.warning("refresh_failed_after_stop", mv=str(mv), error=repr(exc))
            else:
                # The retry starts after the follow-up requests, so it answers them too.
                entry.futures += entry.follow_ups
                entry.follow_ups = []
                entry.state, entry.failures = "retrying", attempt
                heapq.heappush(self._heap, (self._clock() + delay, mv))
                abandoned = []
                log.warning(
                    "refresh_retry_scheduled",
                    mv=str(mv),
                    attempt=attempt,
                    delay=round(delay, 3),
                    error=repr(exc),
                )
            self._cond.notify_all()
        _settle(abandoned, exc)

    @staticmethod
    def _call(
        name: str, mv: Identifier, callback: Callable[..., None] | None, *args: object
    ) -> None:
        """Run a caller's callback; its bug must not wedge the MV's state."""
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:
            log.exception("refresh_callback_failed", mv=str(mv), callback=name)


def _settle(
    futures: Iterable[Future[RefreshResult]], outcome: RefreshResult | BaseException | None
) -> None:
    """Resolve futures this scheduler created, each exactly once; ``None`` cancels them.

    Going through ``set_running_or_notify_cancel`` (as executors do) marks cancelled futures
    as notified, without which ``concurrent.futures.wait`` never counts them as done; it also
    skips futures the caller cancelled, so no ``InvalidStateError`` can arise.
    """
    for future in futures:
        if outcome is None:
            future.cancel()
            future.set_running_or_notify_cancel()
        elif not future.set_running_or_notify_cancel():  # the caller cancelled it
            continue
        elif isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
