"""The readiness monitor: probes read its kept answers, never the catalog itself."""

from __future__ import annotations

import threading

from icemv.service.readiness import ReadinessMonitor
from tests.support.daemon import wait_for


class Checks:
    def __init__(self) -> None:
        self.catalog_ok = True
        self.spark_ok = True
        self.catalog_calls = 0
        self.hang = threading.Event()  # set: the catalog check blocks until released
        self.release = threading.Event()

    def catalog(self) -> bool:
        self.catalog_calls += 1
        if self.hang.is_set():
            self.release.wait(30)
        if not self.catalog_ok:
            raise ConnectionError("password=hunter2 refused")
        return True

    def spark(self) -> bool:
        return self.spark_ok


def test_answers_are_kept_between_rounds() -> None:
    checks = Checks()
    monitor = ReadinessMonitor(checks.catalog, checks.spark, interval_seconds=60)
    assert (monitor.catalog(), monitor.spark()) == (False, False)  # nothing checked yet
    monitor.check_now()
    for _ in range(100):
        assert monitor.catalog() and monitor.spark()
    assert checks.catalog_calls == 1
    checks.catalog_ok, checks.spark_ok = False, False
    monitor.check_now()
    assert (monitor.catalog(), monitor.spark()) == (False, False)


def test_the_thread_follows_changes_and_reports_each_round() -> None:
    checks, rounds = Checks(), []
    monitor = ReadinessMonitor(
        checks.catalog, checks.spark, interval_seconds=0.05, on_checked=lambda: rounds.append(1)
    )
    monitor.start()
    try:
        wait_for(monitor.catalog, 10, "the catalog check to pass")
        checks.catalog_ok = False
        wait_for(lambda: not monitor.catalog(), 10, "the catalog check to fail")
        assert len(rounds) >= 2
    finally:
        monitor.stop()


def test_a_hung_catalog_check_goes_stale() -> None:
    checks = Checks()
    monitor = ReadinessMonitor(
        checks.catalog, checks.spark, interval_seconds=0.05, stale_seconds=0.5
    )
    monitor.start()
    try:
        wait_for(monitor.catalog, 10, "the catalog check to pass")
        checks.hang.set()
        wait_for(lambda: not monitor.catalog(), 10, "the hung check to count as unreachable")
        assert monitor.spark()  # Spark's last answer stands
        checks.hang.clear()
        checks.release.set()
        wait_for(monitor.catalog, 10, "the catalog to be reachable again")
    finally:
        checks.release.set()
        monitor.stop()
