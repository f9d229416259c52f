"""What a copy-on-write rewrite changed, from the removed file's rows and the added one's.

A copy-on-write DELETE, UPDATE or MERGE rewrites each data file it touches: the new file
holds the old one's kept rows in their order, updated rows in place, inserted rows
somewhere. So the two files, read on the same projected columns, are mostly one long
common sequence. `rewrite_diff` walks both at once: it skips the rows they share at the
same place (compared a block at a time, the block growing while everything matches), and
at each difference takes the cheapest explanation a small, growing window shows: rows
deleted from the old file (its next rows are the new file's), rows inserted into the new
one, or rows replaced in place. The rows it steps over are returned, old with -1 and new
with +1 in the caller.

Any walk is correct: rows are skipped only in identical pairs (on every column, NULL
equal to NULL, floats by their bits), which net to nothing, and every other row is
returned. The explanation chosen only decides how many rows are returned (rows that moved
further than the window come back on both sides, for `cancel_moved` to net). After
`MAX_STEPS` differences in one pair, or as soon as the rate so far projects more, the
rest comes back as it is; a column that cannot
be compared by its bits (nested, dictionary) leaves the pair whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.table import FileScanTask

FIRST_BLOCK = 1024  # rows compared at once while skipping common rows, doubling
FIRST_WINDOW = 8  # rows looked ahead at a difference, times 8 until an explanation fits
MAX_WINDOW = 8**7  # ...up to this many (2M)
SMALL_REST = 64  # at most this many rows left and nothing explains a difference: step one
MAX_STEPS = 512  # differences walked in one pair of files (each ~0.1-0.5 ms)
_PROJECTED_AFTER = 64  # steps after which the walk's rate projects the total


def bit_key(column: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    """A column as a key that keeps apart exactly what differs: floats by their bits
    (-0.0 is not 0.0); None where Arrow cannot compare or group the type so."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = array.type
    if pa.types.is_float64(kind):
        return array.view(pa.int64())
    if pa.types.is_float32(kind):
        return array.view(pa.int32())
    if pa.types.is_nested(kind) or pa.types.is_float16(kind) or pa.types.is_dictionary(kind):
        return None
    return array


def equal_rows(one: pa.Table, other: pa.Table) -> pa.Array | None:
    """Per row, whether `one` and `other` (as many rows) are identical on every column
    (NULL equals NULL, floats by their bits); None where a column cannot be compared."""
    equal: pa.Array | None = None
    for name in one.column_names:
        left, right = bit_key(one.column(name)), bit_key(other.column(name))
        if left is None or right is None:
            return None
        same = pc.equal(left, right)
        if left.null_count or right.null_count:
            both_null = pc.and_(pc.is_null(left), pc.is_null(right))
            same = pc.or_(pc.fill_null(same, False), both_null)
        equal = same if equal is None else pc.and_(equal, same)
    return equal if equal is not None else pa.repeat(pa.scalar(True), one.num_rows)


def comparable(rows: pa.Table) -> bool:
    return all(bit_key(rows.column(name).slice(0, 0)) is not None for name in rows.column_names)


@dataclass
class _Walk:
    old: pa.Table
    new: pa.Table
    i: int = 0  # next old row
    j: int = 0  # next new row

    def common(self) -> int:
        """Rows shared from (i, j) on, in blocks growing while all match."""
        limit = min(self.old.num_rows - self.i, self.new.num_rows - self.j)
        done, block = 0, FIRST_BLOCK
        while done < limit:
            size = min(block, limit - done)
            first = _first(self._aligned(done, size), False)
            if first is not None:
                return done + first
            done += size
            block *= 2
        return done

    def _aligned(self, offset: int, size: int) -> pa.Array:
        equal = equal_rows(
            self.old.slice(self.i + offset, size), self.new.slice(self.j + offset, size)
        )
        assert equal is not None  # comparable() was checked
        return equal

    def explain(self) -> tuple[int, int]:
        """At a difference: (old rows, new rows) to step over, the fewest a growing window
        explains: a deletion (old rows until one equals the new row), an insertion, or a
        replacement (aligned rows until they match again); when none, one row each of a
        small rest, else the rest of both."""
        left, right = self.old.num_rows - self.i, self.new.num_rows - self.j
        window = FIRST_WINDOW
        while True:
            size = min(window, max(left, right))
            found: list[tuple[int, int]] = []
            deleted = _find(self.old, self.i + 1, min(size, left - 1), self.new, self.j)
            if deleted is not None:
                found.append((deleted + 1, 0))
            inserted = _find(self.new, self.j + 1, min(size, right - 1), self.old, self.i)
            if inserted is not None:
                found.append((0, inserted + 1))
            aligned = min(size, left, right)
            replaced = _first(self._aligned(0, aligned), True) if aligned else None
            if replaced is not None:
                found.append((replaced, replaced))
            if found:
                return min(found, key=sum)
            if size >= max(left, right):  # nothing left explains it
                return (1, 1) if size <= SMALL_REST else (left, right)
            if window >= MAX_WINDOW:  # not a rewrite in order: the rest as it is
                return left, right
            window *= 8


def _first(mask: pa.Array, value: bool) -> int | None:
    hits = pc.indices_nonzero(mask if value else pc.invert(mask))
    return int(hits[0].as_py()) if len(hits) else None


def _find(rows: pa.Table, start: int, size: int, wanted: pa.Table, at: int) -> int | None:
    """The first index among `rows[start:start + size]` identical to `wanted[at]`."""
    if size <= 0:
        return None
    block = rows.slice(start, size)
    probe = wanted.slice(at, 1).take(pa.repeat(pa.scalar(0, pa.int64()), block.num_rows))
    equal = equal_rows(block, probe)
    return None if equal is None else _first(equal, True)


def rewrite_diff(old: pa.Table, new: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The rows of `old` and of `new` that the walk could not pair (see the module doc)."""
    if not comparable(old) or not comparable(new):
        return old, new
    walk = _Walk(old, new)
    gone: list[tuple[int, int]] = []
    came: list[tuple[int, int]] = []
    for step in range(MAX_STEPS):
        if step >= _PROJECTED_AFTER and step * old.num_rows > MAX_STEPS * walk.i:
            break  # at this rate the differences will not fit in MAX_STEPS: stop early
        shared = walk.common()
        walk.i += shared
        walk.j += shared
        if walk.i >= old.num_rows or walk.j >= new.num_rows:
            break
        dropped, added = walk.explain()
        gone.append((walk.i, dropped))
        came.append((walk.j, added))
        walk.i += dropped
        walk.j += added
    gone.append((walk.i, old.num_rows - walk.i))
    came.append((walk.j, new.num_rows - walk.j))
    return _slices(old, gone), _slices(new, came)


def _slices(rows: pa.Table, ranges: Sequence[tuple[int, int]]) -> pa.Table:
    kept = [rows.slice(start, length) for start, length in ranges if length > 0]
    return pa.concat_tables(kept) if kept else rows.slice(0, 0)


def rewrites(
    removed: Sequence[tuple[FileScanTask, pa.Table]], added: Sequence[tuple[FileScanTask, pa.Table]]
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Removed and added files' rows, each removed file paired with an added one of its
    partition that a rewrite made of it (same first or last row) and the pair diffed
    (`rewrite_diff`). Any pairing is correct; a good one is cheap. Unpaired files come
    whole."""
    unpaired = list(added)
    for task, gone in removed:
        match = next(
            (
                i
                for i, (other, came) in enumerate(unpaired)
                if other.file.spec_id == task.file.spec_id
                and other.file.partition == task.file.partition
                and _same_end(gone, came)
            ),
            None,
        )
        if match is None:
            yield gone, gone.slice(0, 0)
            continue
        _, came = unpaired.pop(match)
        yield rewrite_diff(gone, came)
    for _, came in unpaired:
        yield came.slice(0, 0), came


def _same_end(one: pa.Table, other: pa.Table) -> bool:
    if not one.num_rows or not other.num_rows:
        return False
    first = equal_rows(one.slice(0, 1), other.slice(0, 1))
    last = equal_rows(one.slice(one.num_rows - 1), other.slice(other.num_rows - 1))
    return bool(first is not None and last is not None and (first[0].as_py() or last[0].as_py()))
