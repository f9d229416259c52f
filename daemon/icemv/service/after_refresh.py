"""After a refresh: its MV's freshness checked again, in rounds that share the loads.

A refresh records the source snapshots it pinned; by the time its result reaches the
daemon a source may have moved on, so the daemon loads the sources again, publishes the
MV's freshness and requests another refresh if one did. When one commit makes many MVs
stale their results arrive one after another, and one catalog request per result for the
same source was most of the daemon's work per refresh. Here the results are checked in
rounds: a round starts `window_seconds` after the first result it takes arrived (or when
the round before it ends, if later), takes every result that arrived by then, and hands
them to `check_round` together, which loads each source once for all of them.

Why that is as exact as a check per result: a round's loads all begin after it started,
so after each of its refreshes pinned its sources, and a source that moved on since a pin
is seen moved on. Of two results of one MV in a round (refreshes of one MV run one after
another) the later is checked. The refresh's own metrics (duration, commit-to-fresh) are
published when its result arrives; only its freshness series wait, at most the window and
the round before. A stop drops the results not yet checked: a start polls every MV.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

from icemv.identifiers import Identifier
from icemv.mv.history import RefreshRecord

log = structlog.get_logger(__name__)

# The MVs of one commit's refreshes arrive over about a second per 100 (2 cores): a tenth
# of a second makes ~10 rounds of them instead of 100 checks, each with its own loads.
WINDOW_SECONDS = 0.1

Round = dict[Identifier, RefreshRecord | None]


class AfterRefreshChecks:
    """Collects refreshed MVs (with the refresh record each committed, when known) and
    calls `check_round` with them from a thread of its own, a round at a time."""

    def __init__(
        self,
        check_round: Callable[[Round], None],
        window_seconds: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._check_round = check_round
        self._window = window_seconds
        self._clock = clock
        self._cond = threading.Condition()
        self._waiting: Round = {}
        self._first_at = 0.0  # when the first result of the waiting ones arrived
        self._stopping = False
        self._thread: threading.Thread | None = None

    def add(self, mv: Identifier, record: RefreshRecord | None) -> None:
        with self._cond:
            if not self._waiting:
                self._first_at = self._clock()
            self._waiting.pop(mv, None)  # the later result of an MV is the one checked
            self._waiting[mv] = record
            self._cond.notify()

    def start(self) -> None:
        with self._cond:
            if self._thread is not None or self._stopping:
                return
            self._thread = threading.Thread(
                target=self._run, name="icemv-after-refresh", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._waiting = {}
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def _next_round(self) -> Round | None:
        """The results of the next round, once its window has passed; None when stopping."""
        with self._cond:
            while not self._stopping:
                if self._waiting:
                    left = self._first_at + self._window - self._clock()
                    if left <= 0:
                        taken, self._waiting = self._waiting, {}
                        return taken
                    self._cond.wait(left)
                else:
                    self._cond.wait()
            return None

    def _run(self) -> None:
        while (taken := self._next_round()) is not None:
            try:
                self._check_round(taken)
            except Exception:  # the next round checks again, and the next poll
                log.exception("freshness_checks_failed", mvs=len(taken))
