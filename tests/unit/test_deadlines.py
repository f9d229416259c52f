"""One thread keeps the HTTP server's request deadlines (service/deadlines.py)."""

from __future__ import annotations

import threading
import time

from icemv.service.deadlines import Deadlines
from tests.support.daemon import wait_for


def test_due_callbacks_run_in_order_and_cancelled_ones_never() -> None:
    deadlines = Deadlines("test-deadlines")
    deadlines.start()
    ran: list[str] = []
    try:
        started = time.monotonic()
        deadlines.add(0.3, lambda: ran.append("late"))
        token = deadlines.add(0.1, lambda: ran.append("cancelled"))
        deadlines.add(0.2, lambda: ran.append("soon"))
        deadlines.cancel(token)
        wait_for(lambda: len(ran) == 2, 10, "two deadlines")
        assert ran == ["soon", "late"]
        assert time.monotonic() - started >= 0.3
    finally:
        deadlines.stop()


def test_a_failing_callback_does_not_stop_the_others() -> None:
    deadlines = Deadlines("test-deadlines")
    deadlines.start()
    done = threading.Event()

    def fail() -> None:
        raise RuntimeError("boom")

    try:
        deadlines.add(0.05, fail)
        deadlines.add(0.1, done.set)
        assert done.wait(10)
    finally:
        deadlines.stop()


def test_stop_drops_pending_deadlines() -> None:
    deadlines = Deadlines("test-deadlines")
    deadlines.start()
    ran = threading.Event()
    deadlines.add(0.2, ran.set)
    deadlines.stop()
    assert not ran.wait(0.5)
