"""Pure parts of the Arrow change read under deletes (refresh/changes/arrow_changes.py):
which row groups hold deleted positions, and cancelling a rewrite's moved rows."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from icemv.errors import ArrowUnsupportedError
from icemv.refresh.changes.arrow_changes import cancel_moved, row_groups_for, trim_common
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


def _rows(ids: list[int | None], fares: list[float | None] | None = None) -> pa.Table:
    fares = fares if fares is not None else [float(i or 0) for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "fare": pa.array(fares, pa.float64())})


def test_a_rewrite_keeps_only_the_rows_it_deleted_or_changed() -> None:
    old = _rows(list(range(10)))
    deleted = _rows([0, 1, 2, 6, 7, 8, 9])  # 3, 4, 5 deleted
    gone, came = trim_common(old, deleted)
    assert gone.column("id").to_pylist() == [3, 4, 5] and came.num_rows == 0
    updated = _rows(list(range(10)), [0, 1, 2, 30, 4, 50, 6, 7, 8, 9])
    gone, came = trim_common(old, updated)
    assert gone.column("id").to_pylist() == [3, 4, 5]
    assert came.column("fare").to_pylist() == [30.0, 4.0, 50.0]
    assert trim_common(old, old)[0].num_rows == 0
    gone, came = trim_common(old, _rows([0, 1]))  # a prefix: the rest deleted
    assert gone.column("id").to_pylist() == list(range(2, 10)) and came.num_rows == 0


def test_trimming_compares_nulls_as_equal_and_floats_by_their_bits() -> None:
    old = _rows([None, 1, 2, None], [None, 0.0, 1.0, None])
    gone, came = trim_common(old, _rows([None, 1, 2, None], [None, -0.0, 1.0, None]))
    assert gone.column("fare").to_pylist() == [0.0] and came.column("fare").to_pylist() == [-0.0]
    assert str(came.column("fare")[0]) == "-0.0"


def test_a_column_that_cannot_be_compared_trims_nothing() -> None:
    nested = pa.table({"xs": pa.array([[1], [2]], pa.list_(pa.int64()))})
    assert trim_common(nested, nested) == (nested, nested)


@given(
    st.lists(st.integers(0, 3), max_size=12),
    st.lists(st.integers(0, 3), max_size=12),
)
def test_trimming_keeps_the_net_difference(old_ids: list[int], new_ids: list[int]) -> None:
    """Whatever the two files hold, the rows trimmed are the same on both sides: the
    multiset difference (removed minus added) is unchanged."""
    old, new = _rows(list(old_ids)), _rows(list(new_ids))
    gone, came = trim_common(old, new)
    net = Counter(old.column("id").to_pylist())
    net.subtract(new.column("id").to_pylist())
    trimmed = Counter(gone.column("id").to_pylist())
    trimmed.subtract(came.column("id").to_pylist())
    assert +net == +trimmed and -net == -trimmed
    assert old.num_rows - gone.num_rows == new.num_rows - came.num_rows


def test_trimming_crosses_blocks() -> None:
    """Files longer than one comparison block: the change is found wherever it lies."""
    size = 50_000
    old = _rows(list(range(size)))
    for at in (0, 9_000, 30_000, size - 1):
        kept = [i for i in range(size) if i != at]
        gone, came = trim_common(old, _rows(kept))
        assert gone.column("id").to_pylist() == [at] and came.num_rows == 0
