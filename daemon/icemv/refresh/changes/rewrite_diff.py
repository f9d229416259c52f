"""What a copy-on-write rewrite changed, from the removed file's rows and the added one's.

A copy-on-write DELETE, UPDATE or MERGE rewrites each data file it touches: the new file
holds the old one's kept rows in their order, updated rows in place, inserted rows
somewhere. So the two files, read on the same projected columns, are mostly one long
common sequence. `rewrite_diff` walks both at once: it skips the rows they share at the
same place (compared a block at a time, the block growing while everything matches), and
at each difference takes the explanation a small, growing window shows that the files
agree longest after (rows that repeat with a period can explain a difference wrongly for
a while), the fewest rows among equals: rows deleted from the old file (its next rows are
the new file's), rows inserted into the new one, or rows replaced in place. The rows it
steps over are returned, old with -1 and new with +1 in the caller.

Any walk is correct: rows are skipped only in identical pairs (on every column, NULL
equal to NULL, floats by their bits), which net to nothing, and every other row is
returned. The explanation chosen only decides how many rows are returned (rows that moved
further than the window come back on both sides, for `cancel_moved` to net). After
`MAX_STEPS` differences in one pair, or as soon as the rate so far projects more, the
rest comes back as it is; a column that cannot be compared by its bits (nested,
dictionary) leaves the pair whole.
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
START_WINDOW = 64  # rows a file may start apart from where the other chain stands
MAX_STEPS = 512  # differences walked in one pair of files (each ~0.1-0.5 ms)
_PROJECTED_AFTER = 64  # steps after which the walk's rate projects the total


def bit_key(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | None:
    """A column as a key that keeps apart exactly what differs: floats by their bits
    (-0.0 is not 0.0); None where Arrow cannot compare or group the type so. Chunked as
    read (joining a million-row file's chunks is a copy; the kernels take chunks)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    kind = column.type
    if pa.types.is_nested(kind) or pa.types.is_float16(kind) or pa.types.is_dictionary(kind):
        return None
    bits = pa.int64() if pa.types.is_float64(kind) else pa.int32()
    if pa.types.is_floating(kind):
        return pa.chunked_array([chunk.view(bits) for chunk in chunks], type=bits)
    return pa.chunked_array(chunks, type=kind)


class _Keys:
    """A file's rows and, computed once, each column as a bit key (see `bit_key`)."""

    def __init__(self, rows: pa.Table, keys: list[pa.ChunkedArray]) -> None:
        self.rows = rows
        self.keys = keys
        self.num_rows = rows.num_rows

    @staticmethod
    def of(rows: pa.Table) -> _Keys | None:
        keys = [bit_key(rows.column(name)) for name in rows.column_names]
        if any(key is None for key in keys):
            return None
        return _Keys(rows, [key for key in keys if key is not None])

    def aligned(self, at: int, other: _Keys, other_at: int, size: int) -> pa.ChunkedArray:
        """Per row of `size`, whether self[at + k] is identical to other[other_at + k]."""
        equal: pa.ChunkedArray | None = None
        for mine, theirs in zip(self.keys, other.keys, strict=True):
            left, right = mine.slice(at, size), theirs.slice(other_at, size)
            same = pc.equal(left, right)
            if left.null_count or right.null_count:
                both_null = pc.and_(pc.is_null(left), pc.is_null(right))
                same = pc.or_(pc.fill_null(same, False), both_null)
            equal = same if equal is None else pc.and_(equal, same)
        return equal if equal is not None else pa.chunked_array([pa.repeat(pa.scalar(True), size)])

    def find(self, start: int, size: int, other: _Keys, at: int) -> int | None:
        """The first index among self[start:start + size] identical to other[at]."""
        if size <= 0:
            return None
        equal: pa.ChunkedArray | None = None
        for mine, theirs in zip(self.keys, other.keys, strict=True):
            block, probe = mine.slice(start, size), theirs[at]
            if probe.is_valid:
                same = pc.fill_null(pc.equal(block, probe), False)
            else:
                same = pc.is_null(block)
            equal = same if equal is None else pc.and_(equal, same)
        return 0 if equal is None else _first(equal, True)


@dataclass
class _Walk:
    old: _Keys
    new: _Keys
    i: int = 0  # next old row
    j: int = 0  # next new row

    def common(self) -> int:
        """Rows shared from (i, j) on, in blocks growing while all match."""
        limit = min(self.old.num_rows - self.i, self.new.num_rows - self.j)
        done, block = 0, FIRST_BLOCK
        while done < limit:
            size = min(block, limit - done)
            first = _first(self.old.aligned(self.i + done, self.new, self.j + done, size), False)
            if first is not None:
                return done + first
            done += size
            block *= 2
        return done

    def _agree_after(self, dropped: int, added: int) -> int:
        """How many rows the files share after stepping over these (a wrong explanation
        of periodic rows agrees only for a while, the right one to where they end)."""
        return _Walk(self.old, self.new, self.i + dropped, self.j + added).common()

    def explain(self) -> tuple[int, int]:
        """At a difference: (old rows, new rows) to step over, the fewest a growing window
        explains: a deletion (old rows until one equals the new row), an insertion, or a
        replacement (aligned rows until they match again), the one the files agree longest
        after; when none, one row each of a small rest, else the rest of both."""
        old, new, i, j = self.old, self.new, self.i, self.j
        left, right = old.num_rows - i, new.num_rows - j
        window = FIRST_WINDOW
        while True:
            size = min(window, max(left, right))
            found: list[tuple[int, int]] = []
            deleted = old.find(i + 1, min(size, left - 1), new, j)
            if deleted is not None:
                found.append((deleted + 1, 0))
            inserted = new.find(j + 1, min(size, right - 1), old, i)
            if inserted is not None:
                found.append((0, inserted + 1))
            aligned = min(size, left, right)
            replaced = _first(old.aligned(i, new, j, aligned), True) if aligned else None
            if replaced is not None:
                found.append((replaced, replaced))
            if found:  # the one after which the files agree longest, then the fewest rows
                return max(found, key=lambda step: (self._agree_after(*step), -sum(step)))
            if size >= max(left, right):  # nothing left explains it
                return (1, 1) if size <= SMALL_REST else (left, right)
            if window >= MAX_WINDOW:  # not a rewrite in order: the rest as it is
                return left, right
            window *= 8


def _first(mask: pa.Array | pa.ChunkedArray, value: bool) -> int | None:
    hits = pc.indices_nonzero(mask if value else pc.invert(mask))
    return int(hits[0].as_py()) if len(hits) else None


class _Diff:
    """One walk over a chain of files: old files one after another against new ones."""

    def __init__(self, old: _Keys, new: _Keys) -> None:
        self.walk = _Walk(old, new)
        self.gone: list[pa.Table] = []
        self.came: list[pa.Table] = []
        self.steps = 0
        self.passed = 0  # rows of the old files walked before the current one

    def next_old(self, rows: _Keys) -> None:
        self.passed += self.walk.old.num_rows
        self.walk.old, self.walk.i = rows, 0

    def run(self) -> bool:
        """Walk until one side's file ends; False when out of steps (or projected so)."""
        walk = self.walk
        while True:
            walked, total = self.passed + walk.i, self.passed + walk.old.num_rows
            if self.steps >= MAX_STEPS or (
                self.steps >= _PROJECTED_AFTER and self.steps * total > MAX_STEPS * walked
            ):
                return False
            shared = walk.common()
            walk.i += shared
            walk.j += shared
            if walk.i >= walk.old.num_rows or walk.j >= walk.new.num_rows:
                return True
            dropped, added = walk.explain()
            self.gone.append(walk.old.rows.slice(walk.i, dropped))
            self.came.append(walk.new.rows.slice(walk.j, added))
            walk.i += dropped
            walk.j += added
            self.steps += 1

    def close(self) -> tuple[pa.Table, pa.Table]:
        """What is left unpaired, the current files' rest included."""
        walk = self.walk
        self.gone.append(walk.old.rows.slice(walk.i))
        self.came.append(walk.new.rows.slice(walk.j))
        return _concat(self.gone, walk.old.rows), _concat(self.came, walk.new.rows)


def _concat(parts: list[pa.Table], like: pa.Table) -> pa.Table:
    kept = [part for part in parts if part.num_rows]
    return pa.concat_tables(kept) if kept else like.slice(0, 0)


def rewrite_diff(old: pa.Table, new: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The rows of `old` and of `new` that the walk could not pair (see the module doc)."""
    old_keys, new_keys = _Keys.of(old), _Keys.of(new)
    if old_keys is None or new_keys is None:
        return old, new
    diff = _Diff(old_keys, new_keys)
    diff.run()
    return diff.close()


def rewrites(
    removed: Sequence[tuple[FileScanTask, pa.Table]], added: Sequence[tuple[FileScanTask, pa.Table]]
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Removed and added files' rows without the rows a rewrite kept, per partition: a
    chain of removed files walked against a chain of added ones, each file starting where
    the other chain's walk stands (`_starts_at`: a rewrite may merge several files into
    one or split one), the first pair starting or ending alike (`rewrite_diff`'s walk).
    Any chaining is correct; a good one is cheap. Files no chain takes come whole."""
    groups: dict[tuple[int, object], tuple[list[pa.Table], list[pa.Table]]] = {}
    for index, files in enumerate((removed, added)):
        for task, rows in files:
            key = (task.file.spec_id, task.file.partition)
            groups.setdefault(key, ([], []))[index].append(rows)
    for olds, news in groups.values():
        yield from diff_files([t for t in olds if t.num_rows], [t for t in news if t.num_rows])


def diff_files(olds: list[pa.Table], news: list[pa.Table]) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Rows of files removed and added in one partition that the chained walks left (see
    `rewrites`), as (removed rows, added rows) pairs."""
    old_keys = [_Keys.of(rows) for rows in olds]
    new_keys = [_Keys.of(rows) for rows in news]
    if any(k is None for k in (*old_keys, *new_keys)):
        yield from ((rows, rows.slice(0, 0)) for rows in olds)
        yield from ((rows.slice(0, 0), rows) for rows in news)
        return
    left = [k for k in old_keys if k is not None]
    right = [k for k in new_keys if k is not None]
    while True:
        start = next(
            ((o, n) for o in range(len(left)) for n in range(len(right))
             if _starts_at(right[n], left[o], 0) or _starts_at(left[o], right[n], 0)
             or _ends_alike(left[o], right[n])),
            None,
        )  # fmt: skip
        if start is None:
            break
        diff = _Diff(left.pop(start[0]), right.pop(start[1]))
        while diff.run():
            walk = diff.walk
            if walk.i >= walk.old.num_rows and walk.j < walk.new.num_rows:
                found = _next_file(left, walk.new, walk.j)
                if found is None:
                    break
                diff.next_old(found)
            elif walk.j >= walk.new.num_rows and walk.i < walk.old.num_rows:
                found = _next_file(right, walk.old, walk.i)
                if found is None:
                    break
                walk.new, walk.j = found, 0
            else:
                break
        yield diff.close()
    for keys in left:
        yield keys.rows, keys.rows.slice(0, 0)
    for keys in right:
        yield keys.rows.slice(0, 0), keys.rows


def _next_file(files: list[_Keys], other: _Keys, at: int) -> _Keys | None:
    """The file (taken from `files`) that starts where the other chain stands."""
    index = next((k for k, rows in enumerate(files) if _starts_at(rows, other, at)), None)
    return None if index is None else files.pop(index)


def _starts_at(rows: _Keys, other: _Keys, at: int) -> bool:
    """Whether `rows` starts where `other` stands at row `at`: its first row among the
    next `START_WINDOW` rows of `other` (rows deleted between), or `other[at]` among its
    first ones (rows inserted before)."""
    if at >= other.num_rows or not rows.num_rows:
        return False
    return (
        other.find(at, min(START_WINDOW, other.num_rows - at), rows, 0) is not None
        or rows.find(0, min(START_WINDOW, rows.num_rows), other, at) is not None
    )


def _ends_alike(old: _Keys, new: _Keys) -> bool:
    """Whether the files' last rows are identical: a rewrite that changed the first rows
    of a file (the walk from the start explains them)."""
    if not old.num_rows or not new.num_rows:
        return False
    return old.find(old.num_rows - 1, 1, new, new.num_rows - 1) is not None
