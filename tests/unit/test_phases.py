"""The refresh phase clock: time charged to the phase that ends, phases named by the path."""

from __future__ import annotations

import time

import pytest

from icemv.refresh.phases import PHASES, PhaseClock


def test_each_end_charges_the_time_since_the_previous_mark() -> None:
    clock = PhaseClock(started=time.perf_counter() - 0.5)
    clock.end("plan")
    clock.end("patch")
    assert clock.seconds["plan"] >= 0.5
    assert 0 <= clock.seconds["patch"] < 0.5
    assert list(clock.seconds) == ["plan", "patch"]


def test_a_phase_ended_twice_accumulates() -> None:
    clock = PhaseClock(started=time.perf_counter() - 0.2)
    clock.end("plan")  # planned, then a fallback plans again
    clock.end("patch")
    time.sleep(0.01)  # the time that passes is what is measured here, not a wait on anything
    clock.end("plan")
    assert clock.seconds["plan"] >= 0.21
    assert list(clock.seconds) == ["plan", "patch"]


def test_phases_follow_the_refresh_path_and_unknown_names_are_refused() -> None:
    assert PHASES == ("plan", "changes", "patch", "commit", "record")
    with pytest.raises(ValueError, match="unknown refresh phase 'delta'"):
        PhaseClock().end("delta")


def test_cpu_is_charged_to_the_phase_that_spent_it_not_to_waits() -> None:
    clock = PhaseClock()
    busy_until = time.thread_time() + 0.03
    while time.thread_time() < busy_until:  # 30 ms of this thread's CPU
        pass
    clock.end("patch")
    time.sleep(0.05)  # a wait: wall time, no CPU (what is measured, not a wait on anything)
    clock.end("commit")
    assert clock.cpu_seconds["patch"] >= 0.029
    assert clock.cpu_seconds["commit"] < 0.02 <= clock.seconds["commit"]
