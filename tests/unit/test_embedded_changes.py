"""Pure parts of the driver's change read under deletes (refresh/embedded/changes.py):
which row groups hold deleted positions."""

from __future__ import annotations

import pytest

from icemv.errors import EngineRefusedError
from icemv.refresh.embedded.changes import row_groups_for


def test_only_the_row_groups_holding_positions_are_read() -> None:
    # Groups of 10, 5, 10 rows: rows 0-9, 10-14, 15-24.
    assert row_groups_for([10, 5, 10], [0, 9, 15, 24]) == ([0, 2], [0, 9, 10, 19])
    assert row_groups_for([10, 5, 10], [11, 12]) == ([1], [1, 2])
    assert row_groups_for([10, 5, 10], [10, 14, 15]) == ([1, 2], [0, 4, 5])
    assert row_groups_for([10, 5, 10], []) == ([], [])


def test_a_position_beyond_the_file_is_refused() -> None:
    with pytest.raises(EngineRefusedError):
        row_groups_for([10, 5], [15])
