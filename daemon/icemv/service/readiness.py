"""What `/readyz` says about the catalog and Spark, checked in the background.

A probe used to list the catalog's namespaces and ask the Spark JVM whether its context
runs, on every request: a burst of probes was a burst of catalog round trips, and a
catalog that hung made every probe hang with it. `ReadinessMonitor` runs both checks every
`CHECK_SECONDS` on a thread of its own and keeps the answers, so a probe only reads them
(the daemon adds what it keeps anyway: start-up done, Kafka connected; a stopped broker
still shows on the next probe).

A catalog check that has not come back within `STALE_SECONDS` (a hung catalog database)
counts as unreachable, as a probe waiting on it would have timed out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog

log = structlog.get_logger(__name__)

CHECK_SECONDS = 2.0
STALE_SECONDS = 10.0

Check = Callable[[], bool]


def _passes(check: Check) -> bool:
    try:
        return bool(check())
    except Exception:  # noqa: BLE001 (a probe: any failure means no)
        return False


class ReadinessMonitor:
    def __init__(
        self,
        catalog_reachable: Check,
        spark_ready: Check,
        *,
        interval_seconds: float = CHECK_SECONDS,
        stale_seconds: float = STALE_SECONDS,
        on_checked: Callable[[], None] | None = None,
    ) -> None:
        """`on_checked()` runs after each round (the daemon updates its `icemv_ready`)."""
        self._catalog_check = catalog_reachable
        self._spark_check = spark_ready
        self._interval = interval_seconds
        self._stale = stale_seconds
        self._on_checked = on_checked
        self._lock = threading.Lock()
        self._catalog_ok = False
        self._spark_ok = False
        # When the last catalog check came back (monotonic); None before the first one.
        self._catalog_at: float | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("readiness monitor already started")
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="icemv-readiness", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops checking; a check under way (a hung catalog) is not waited for long."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(self._interval + 1.0)

    def check_now(self) -> None:
        """One round of checks, on the caller's thread."""
        catalog = _passes(self._catalog_check)
        spark = _passes(self._spark_check)
        with self._lock:
            changed = (catalog, spark) != (self._catalog_ok, self._spark_ok)
            self._catalog_ok, self._spark_ok = catalog, spark
            self._catalog_at = time.monotonic()
        if changed:
            log.info("readiness_checks_changed", catalog=catalog, spark=spark)
        if self._on_checked is not None:
            self._on_checked()

    def catalog(self) -> bool:
        """Whether the last catalog check passed and came back within `stale_seconds`."""
        with self._lock:
            at, ok = self._catalog_at, self._catalog_ok
        return ok and at is not None and time.monotonic() - at < self._stale

    def spark(self) -> bool:
        with self._lock:
            return self._spark_ok

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.check_now()
            except Exception as exc:  # noqa: BLE001 (on_checked failing must not end the checks)
                log.warning("readiness_check_failed", error=type(exc).__name__)
            self._stopping.wait(self._interval)
