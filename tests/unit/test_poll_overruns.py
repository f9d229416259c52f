"""A poll that overruns its interval is counted every time and logged once per episode."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any, cast

import pytest
import structlog
from structlog.testing import capture_logs

from icemv.identifiers import Identifier
from icemv.refresh.result import RefreshResult
from icemv.service.metrics import Metrics
from icemv.service.poller import Reconciler


def no_request(mv: Identifier, reason: str) -> Future[RefreshResult]:
    raise AssertionError("no refresh expected")


@pytest.fixture
def reconciler() -> Iterator[tuple[Reconciler, Metrics]]:
    metrics = Metrics()
    # Only the timing bookkeeping is exercised: no catalog, no index.
    yield Reconciler(cast(Any, None), cast(Any, None), metrics, no_request, 2.0), metrics
    structlog.reset_defaults()


def overruns(metrics: Metrics) -> float:
    value = metrics.registry.get_sample_value("icemv_poll_overruns_total")
    return 0.0 if value is None else value


def test_each_overrun_counts_and_each_episode_logs_once(
    reconciler: tuple[Reconciler, Metrics],
) -> None:
    poller, metrics = reconciler
    durations = [1.0, 2.5, 3.0, 9.0, 1.5, 2.0, 4.0, 0.1, 2.01]
    with capture_logs() as logs:
        for seconds in durations:
            poller.poll_finished(seconds)
    # A poll exactly as long as the interval is in time; three episodes, five overruns.
    assert overruns(metrics) == 5
    lines = [line for line in logs if line["event"] == "poll_overrun"]
    assert [line["duration_seconds"] for line in lines] == [2.5, 4.0, 2.01]
    assert all(line["interval_seconds"] == 2.0 for line in lines)
    assert all(line["log_level"] == "warning" for line in lines)
    finished = [line for line in logs if line["event"] == "poll_finished"]
    assert [line["overran"] for line in finished] == [s > 2.0 for s in durations]


def test_stop_before_start_is_quiet(reconciler: tuple[Reconciler, Metrics]) -> None:
    """A daemon whose start fails before its polls are scheduled shuts down through
    `stop()`: that must not raise (it would hide the failure that stopped the start)."""
    poller, _ = reconciler
    poller.stop()
    poller.stop()
