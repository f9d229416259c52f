"""`icemv demo`'s pacing: it shows an incremental refresh even on a slow machine."""

from __future__ import annotations

import pytest

from icemv.cli.demo import _keep_writing


@pytest.mark.parametrize(
    ("elapsed", "shown", "expected"),
    [
        (10.0, False, True),  # within the planned time
        (10.0, True, True),  # planned time is always used
        (31.0, False, True),  # past it, no incremental refresh yet: keep going
        (31.0, True, False),  # past it and shown: stop
        (300.0, False, False),  # the cap ends it regardless
    ],
)
def test_keep_writing(elapsed: float, shown: bool, expected: bool) -> None:
    assert _keep_writing(elapsed, 30.0, 300.0, shown) is expected


def test_zero_seconds_runs_until_interrupted() -> None:
    assert _keep_writing(1e9, 0.0, 300.0, shown=True)


def test_the_demo_quiets_spark_unless_the_config_names_a_level() -> None:
    from icemv.cli.demo import quiet_spark
    from icemv.config import parse_config

    assert quiet_spark(parse_config({})).logging.spark_level == "ERROR"
    named = parse_config({"logging": {"spark_level": "INFO"}})
    assert quiet_spark(named).logging.spark_level == "INFO"


def test_a_state_that_is_not_fresh_says_why() -> None:
    from icemv.mv.report import state_with_reason

    assert state_with_reason("stale", "source-changed") == "stale (source-changed)"
    assert state_with_reason("invalid", "never-refreshed") == "invalid (never-refreshed)"
    assert state_with_reason("fresh", None) == "fresh"
