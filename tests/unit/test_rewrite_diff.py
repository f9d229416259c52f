"""What a copy-on-write rewrite changed (refresh/changes/rewrite_diff.py): the rows of the
removed and the added file that a walk in file order could not pair."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from icemv.refresh.changes import rewrite_diff as diff_module
from icemv.refresh.changes.rewrite_diff import diff_files, rewrite_diff


def _rows(ids: list[int | None], fares: list[float | None] | None = None) -> pa.Table:
    fares = fares if fares is not None else [float(i or 0) for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "fare": pa.array(fares, pa.float64())})


def _ids(table: pa.Table) -> list[int]:
    return table.column("id").to_pylist()


def test_deleted_updated_and_inserted_rows_are_what_is_left() -> None:
    old = _rows(list(range(10)))
    gone, came = rewrite_diff(old, _rows([0, 1, 2, 6, 7, 8, 9]))  # 3, 4, 5 deleted
    assert _ids(gone) == [3, 4, 5] and came.num_rows == 0
    fares = [0.0, 1.0, 2.0, 30.0, 4.0, 50.0, 6.0, 7.0, 8.0, 9.0]  # 3 and 5 updated
    gone, came = rewrite_diff(old, _rows(list(range(10)), fares))
    assert _ids(gone) == [3, 5] and came.column("fare").to_pylist() == [30.0, 50.0]
    gone, came = rewrite_diff(old, _rows([0, 1, 20, 2, 3, 4, 5, 6, 7, 8, 9, 90]))
    assert gone.num_rows == 0 and _ids(came) == [20, 90]
    assert rewrite_diff(old, old)[0].num_rows == 0
    gone, came = rewrite_diff(old, _rows([0, 1]))  # the rest deleted
    assert _ids(gone) == list(range(2, 10)) and came.num_rows == 0


def test_scattered_and_clustered_changes_across_blocks() -> None:
    size = 50_000
    old = _rows(list(range(size)))
    scattered = [i for i in range(size) if i % 1000 != 7]  # one row in a thousand
    gone, came = rewrite_diff(old, _rows(scattered))
    assert _ids(gone) == list(range(7, size, 1000)) and came.num_rows == 0
    clustered = [i for i in range(size) if not 20_000 <= i < 30_000]
    gone, came = rewrite_diff(old, _rows(clustered))
    assert _ids(gone) == list(range(20_000, 30_000)) and came.num_rows == 0
    fares = [float(i) + (1 if 40_000 <= i < 45_000 else 0) for i in range(size)]
    gone, came = rewrite_diff(old, _rows(list(range(size)), fares))
    assert _ids(gone) == _ids(came) == list(range(40_000, 45_000))


def test_nulls_compare_equal_and_floats_by_their_bits() -> None:
    old = _rows([None, 1, 2, None], [None, 0.0, 1.0, None])
    gone, came = rewrite_diff(old, _rows([None, 1, 2, None], [None, -0.0, 1.0, None]))
    assert gone.column("fare").to_pylist() == [0.0] and came.column("fare").to_pylist() == [-0.0]
    assert str(came.column("fare")[0]) == "-0.0"


def test_a_column_that_cannot_be_compared_leaves_the_pair_whole() -> None:
    nested = pa.table({"xs": pa.array([[1], [2]], pa.list_(pa.int64()))})
    assert rewrite_diff(nested, nested) == (nested, nested)


def test_past_max_steps_the_rest_comes_back_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diff_module, "MAX_STEPS", 2)
    old = _rows(list(range(100)))
    gone, came = rewrite_diff(old, _rows([i for i in range(100) if i not in (10, 20, 30, 40)]))
    assert _ids(gone)[:2] == [10, 20] and len(_ids(gone)) + came.num_rows > 4
    _assert_same_net(old, _rows([i for i in range(100) if i not in (10, 20, 30, 40)]))


def _assert_same_net(old: pa.Table, new: pa.Table) -> None:
    gone, came = rewrite_diff(old, new)
    net = Counter(zip(_ids(old), old.column("fare").to_pylist(), strict=True))
    net.subtract(zip(_ids(new), new.column("fare").to_pylist(), strict=True))
    left = Counter(zip(_ids(gone), gone.column("fare").to_pylist(), strict=True))
    left.subtract(zip(_ids(came), came.column("fare").to_pylist(), strict=True))
    assert +net == +left and -net == -left
    assert old.num_rows - gone.num_rows == new.num_rows - came.num_rows


@given(
    st.lists(st.integers(0, 3), max_size=30),
    st.lists(st.integers(0, 3), max_size=30),
    st.integers(1, 7),
    st.integers(1, 7),
)
def test_any_two_files_keep_their_net_difference(
    old: list[int], new: list[int], old_chunk: int, new_chunk: int
) -> None:
    """Whatever the files hold (duplicates, reordering), what is left nets as they do;
    files come in chunks as read, each its own chunking."""
    _assert_same_net(_chunked(_rows(list(old)), old_chunk), _chunked(_rows(list(new)), new_chunk))


def _chunked(table: pa.Table, size: int) -> pa.Table:
    return pa.Table.from_batches(table.to_batches(max_chunksize=size), schema=table.schema)


@given(
    st.sampled_from(["delete", "update", "insert"]),
    st.lists(st.booleans(), max_size=80),
    st.integers(1, 4),
)
def test_an_ordered_rewrite_leaves_exactly_its_changes(
    kind: str, changed: list[bool], spacing: int
) -> None:
    """A rewrite that keeps its rows' order (unique rows) and makes one kind of change, as
    a copy-on-write DELETE or UPDATE does: exactly the deleted rows, the updated rows' old
    and new images, or the inserted rows are left (mixed kinds: see the test above)."""
    old_ids = list(range(0, len(changed) * spacing, spacing))
    new_rows: list[tuple[int, float]] = []
    expect_gone: Counter[tuple[int, float]] = Counter()
    expect_came: Counter[tuple[int, float]] = Counter()
    for change, i in zip(changed, old_ids, strict=True):
        if change and kind == "delete":
            expect_gone[(i, float(i))] += 1
            continue
        if change and kind == "insert":
            new_rows.append((-i - 1, 0.5))
            expect_came[(-i - 1, 0.5)] += 1
        if change and kind == "update":
            new_rows.append((i, i + 0.25))
            expect_gone[(i, float(i))] += 1
            expect_came[(i, i + 0.25)] += 1
        else:
            new_rows.append((i, float(i)))
    old = _rows(old_ids)
    new = _rows([r[0] for r in new_rows], [r[1] for r in new_rows])
    gone, came = rewrite_diff(old, new)
    assert Counter(zip(_ids(gone), gone.column("fare").to_pylist(), strict=True)) == expect_gone
    assert Counter(zip(_ids(came), came.column("fare").to_pylist(), strict=True)) == expect_came


def _net_of(pairs: list[tuple[pa.Table, pa.Table]]) -> tuple[list[int], list[int]]:
    gone = sorted(i for old, _ in pairs for i in _ids(old))
    came = sorted(i for _, new in pairs for i in _ids(new))
    return gone, came


def test_files_merged_or_split_by_the_rewrite_are_walked_as_chains() -> None:
    """Spark's copy-on-write DELETE may merge four files into two (0-49 + 100-149,
    50-99 + 150-199) or split one: the walk follows each output file across its inputs."""
    olds = [_rows(list(range(k, k + 50))) for k in (0, 50, 100, 150)]
    kept = [i for i in range(200) if i % 10 != 7]
    news = [
        _rows([i for i in kept if i < 50 or 100 <= i < 150]),
        _rows([i for i in kept if 50 <= i < 100 or i >= 150]),
    ]
    assert _net_of(list(diff_files(olds, news))) == ([i for i in range(200) if i % 10 == 7], [])
    split = [_rows([i for i in range(100) if i < 40]), _rows([i for i in range(42, 100)])]
    assert _net_of(list(diff_files([_rows(list(range(100)))], split))) == ([40, 41], [])


def test_files_no_chain_takes_come_whole() -> None:
    olds, news = [_rows([1, 2, 3])], [_rows([7, 8, 9])]
    assert _net_of(list(diff_files(olds, news))) == ([1, 2, 3], [7, 8, 9])


@given(
    st.lists(st.integers(0, 40), max_size=6),
    st.lists(st.integers(0, 40), max_size=6),
    st.sets(st.integers(0, 39), max_size=10),
)
def test_chained_walks_keep_the_net_difference(
    old_cuts: list[int], new_cuts: list[int], deleted: set[int]
) -> None:
    """Rows 0-39 cut into old files anywhere; the kept rows cut into new files anywhere."""
    kept = [i for i in range(40) if i not in deleted]

    def cut(ids: list[int], at: list[int]) -> list[pa.Table]:
        bounds = sorted({0, len(ids), *(min(c, len(ids)) for c in at)})
        return [_rows(ids[a:b]) for a, b in pairwise(bounds) if b > a]

    pairs = list(diff_files(cut(list(range(40)), old_cuts), cut(kept, new_cuts)))
    gone, came = _net_of(pairs)
    net = Counter(gone)
    net.subtract(came)
    assert +net == Counter(deleted) and not -net


def test_a_file_whose_first_rows_changed_pairs_by_its_last_row() -> None:
    old = [_rows(list(range(1000)))]
    fares = [float(i) + (1 if i < 300 else 0) for i in range(1000)]
    updated = list(diff_files(list(old), [_rows(list(range(1000)), fares)]))
    assert _net_of(updated) == (list(range(300)), list(range(300)))
    deleted = list(diff_files(list(old), [_rows(list(range(300, 1000)))]))
    assert _net_of(deleted) == (list(range(300)), [])


def test_periodic_rows_take_the_explanation_the_files_agree_longest_after() -> None:
    """Rows repeating every 97 (projected columns without a unique one): deleting 50 rows
    also looks like inserting the 47 before the next period; only the deletion makes the
    files agree to their end."""
    ids = [i % 97 for i in range(1000)]
    kept = ids[:300] + ids[350:]
    gone, came = rewrite_diff(_rows(ids), _rows(kept))
    assert (gone.num_rows, came.num_rows) == (50, 0)
