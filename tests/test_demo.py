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
