"""Pure parts of the Arrow change read under deletes (refresh/changes/arrow_changes.py):
which row groups hold deleted positions, and cancelling a rewrite's moved rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from icemv.errors import ArrowUnsupportedError
from icemv.refresh.changes.arrow_changes import cancel_moved, row_groups_for
from icemv.sql.names import WEIGHT


def test_only_the_row_groups_holding_positions_are_read() -> None:
    # Groups of 10, 5, 10 rows: rows 0-9, 10-14, 15-24.
    assert row_groups_for([10, 5, 10], [0, 9, 15, 24]) == ([0, 2], [0, 9, 10, 19])
    assert row_groups_for([10, 5, 10], [11, 12]) == ([1], [1, 2])
    assert row_groups_for([10, 5, 10], [10, 14, 15]) == ([1, 2], [0, 4, 5])
    assert row_groups_for([10, 5, 10], []) == ([], [])


def test_a_position_beyond_the_file_is_refused() -> None:
    with pytest.raises(ArrowUnsupportedError):
        row_groups_for([10, 5], [15])


def _weighted(rows: list[tuple[object, ...]]) -> pa.Table:
    return pa.table({
        "id": pa.array([r[0] for r in rows], pa.int64()),
        "fare": pa.array([r[1] for r in rows], pa.float64()),
        WEIGHT: pa.array([r[2] for r in rows], pa.int32()),
    })  # fmt: skip


def _net(table: pa.Table) -> set[tuple[object, ...]]:
    return set(zip(*(c.to_pylist() for c in table.columns), strict=True))


def test_moved_rows_cancel_on_every_column() -> None:
    rows = _weighted([
        (1, 2.0, 1), (1, 2.0, -1),  # moved: gone
        (2, None, 1), (2, None, -1),  # NULLs group together
        (3, 0.0, 1), (3, -0.0, -1),  # -0.0 is not 0.0: both stay
        (4, 5.0, -1), (4, 5.0, -1), (4, 5.0, 1),  # copies net to one deletion
        (5, 1.0, 1),
    ])  # fmt: skip
    net = cancel_moved(rows)
    assert net.schema == rows.schema
    assert _net(net) == {(3, 0.0, 1), (3, -0.0, -1), (4, 5.0, -1), (5, 1.0, 1)}
    signs = {(r[0], str(r[1])): r[2] for r in _net(net)}
    assert signs[(3, "0.0")] == 1 and signs[(3, "-0.0")] == -1


def test_one_signed_rows_are_kept_as_they_are() -> None:
    rows = _weighted([(1, 2.0, 1), (1, 2.0, 1)])
    assert cancel_moved(rows) is rows
