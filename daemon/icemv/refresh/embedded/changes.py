"""Weighted change rows of a range with deletes, read on the driver with pyarrow, no Spark.

For the embedded engine (refresh/embedded/route.py) when a range of one source holds more
than appends (position deletes, deletion vectors, equality deletes, copy-on-write
rewrites). Read exactly,
by the snapshots' manifests, only the columns the view needs:
  +1  rows of data files added in the range, read at the new snapshot (its deletes applied:
      rows appended and deleted within the range never appear);
  -1  rows of data files removed in the range, read at the old snapshot (its deletes
      applied): a copy-on-write rewrite's whole file. Each removed file is paired with
      the added file of its partition the rewrite made of it, and the rows the two share
      in order are dropped (rewrite_diff.py): a rewrite keeps the order of the rows it
      keeps, so what is left is the rows it deleted, updated or inserted;
  -1  rows of a data file live at both ends at the positions deleted at the new snapshot
      and not at the old one (position delete files and deletion vectors of both ends
      for that file, so a position deleted before the range never counts twice): only the
      Parquet row groups holding those positions are read (`row_groups_for`). Equality
      deletes add the positions of the rows they remove at each end (the file's key
      column read whole; equality.py); the files live at both ends that the range's
      equality deletes may hit are those whose column bounds allow their values.
Equality deletes are applied here (pyiceberg's reader does not): a file read whole loses
the rows their values match.
Rows that appear once with each sign identically on the projected columns (a rewrite's
moved rows the diff left, an update that left a row as it was) cancel before the delta
sees them: the route nets them by sql/net.py's tree, as the Spark read does. Whole files
are read a few at a time (pyarrow decodes without the GIL). The route bounds the rows
read (refresh.embedded_read_max_rows, from the manifests, before reading) and the rows left
(`max_rows`: refresh.embedded_max_rows, after the rewrites are diffed, before the rest is
netted). Equality deletes other than on one
integer or string column, positions un-deleted within the range and data files without
the needed columns' field ids raise EngineRefusedError: Spark reads those.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import accumulate

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
)
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, ManifestGroupPlanner, Table
from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile

from icemv.catalog.arrow_schemas import arrow_schema
from icemv.errors import EngineRefusedError
from icemv.refresh.changes.classify import SourceChange
from icemv.refresh.changes.manifests import range_entries, touched_files
from icemv.refresh.changes.rewrite_diff import rewrites
from icemv.refresh.embedded.equality import (
    EqualityDelete,
    EqualityIndex,
    EqualityValues,
    column_names_by_id,
    equality_delete,
)
from icemv.refresh.embedded.reads import AppendedRowsCache, read_schema, weighted
from icemv.sql.names import WEIGHT

_READERS = 4  # whole data files read at once


@dataclass(frozen=True)
class ChangedRows:
    rows: pa.Table  # the projected source columns and WEIGHT (int32, never 0)
    rows_read: int  # source rows read from data files (whole files and row groups)


@dataclass
class _Range:
    added: set[str] = field(default_factory=set)  # data files
    removed: set[str] = field(default_factory=set)
    deletes: list[DataFile] = field(default_factory=list)  # position deletes and DVs added
    equality: list[EqualityDelete] = field(default_factory=list)  # equality deletes added


@dataclass
class _Planned:
    """The wanted data files live at a snapshot: tasks (position deletes and vectors
    attached), data sequence numbers, and the snapshot's live equality deletes."""

    tasks: dict[str, FileScanTask]
    sequences: dict[str, int]
    equality: EqualityIndex

    def applying(self, path: str) -> list[EqualityDelete]:
        return self.equality.applying(self.tasks[path].file, self.sequences[path])


def row_groups_for(
    group_rows: Sequence[int], positions: Sequence[int]
) -> tuple[list[int], list[int]]:
    """The row groups holding `positions` (sorted, unique row positions in the file) and
    each position's index among those groups' rows read one after another."""
    ends = list(accumulate(group_rows))
    if positions and (positions[0] < 0 or positions[-1] >= (ends[-1] if ends else 0)):
        raise EngineRefusedError("a deleted position beyond its data file's rows")
    at = pa.array(positions, pa.int64())
    groups: list[int] = []
    offsets: list[pa.Array] = []
    read = lo = 0  # rows of the chosen groups so far; the first position not placed
    for group, (rows, end) in enumerate(zip(group_rows, ends, strict=True)):
        hi = bisect_left(positions, end, lo)
        if hi > lo:  # positions lo..hi-1 fall in this group: shifted as one array
            groups.append(group)
            offsets.append(pc.add(at[lo:hi], read - (end - rows)))
            read += rows
        lo = hi
    return groups, pa.chunked_array(offsets, pa.int64()).to_pylist()


@dataclass(frozen=True)
class KeptRows:
    """The rows the view's WHERE keeps of one file's rows (`apply`, keeping their order),
    and all that decides them (`key`: the WHERE, the name it reads the rows by, the
    engine's session time zone)."""

    apply: Callable[[pa.Table], pa.Table]
    key: Hashable


# A whole file's kept rows are shared (AppendedRowsCache) while at most this share of it.
_FILE_SHARE = 0.25


def changed_rows(
    table: Table,
    change: SourceChange,
    columns: Sequence[str] | None,
    max_rows: int,
    keep: KeptRows | None = None,
    cache: AppendedRowsCache | None = None,
) -> ChangedRows:
    """The range's weighted rows of `columns` (None: all), under its pinned schema;
    EngineRefusedError past `max_rows` of them.

    `keep`: the rows the view's WHERE keeps (over `columns`), taken from each file read
    before anything else: a multiset difference of kept rows is the kept rows of the
    difference, and keeping rows keeps their order, which the rewrite diff follows.

    `cache`: a data file read whole with no deletes applied holds the same rows whenever
    it is read (files are immutable): its kept rows are shared through `cache`, keyed by
    the file, the pinned schema, the columns and `keep.key`. A copy-on-write rewrite of a
    file rewritten before then decodes only the file it adds (the one it removes was the
    last rewrite's added file). `rows_read` counts the rows decoded."""
    kept = keep.apply if keep is not None else (lambda rows: rows)
    pinned = read_schema(table, change)
    schema = pinned
    if columns is not None:  # at least one column: the rows are counted by it
        schema = schema.select(*(columns or (schema.fields[0].name,)))
    target = arrow_schema(schema)
    found = _range_files(table, change)
    moved = found.added & found.removed  # added and removed within the range
    added, removed = found.added - moved, found.removed - moved
    reader = _DeleteReader(table.io)
    values = EqualityValues(table.io)
    hit = reader.targets(found.deletes)
    if found.equality:
        hit |= _equality_candidates(table, change)
    hit -= added | removed | moved
    old = _plan(table, change.old_snapshot_id, removed | hit)
    new = _plan(table, change.new_snapshot_id, added | hit)
    key_names = _key_names(pinned, old, new)
    extra = [n for n in key_names.values() if n not in schema.column_names]
    read_with_keys = pinned.select(*schema.column_names, *extra) if extra else schema
    parts: list[pa.Table] = []
    scan = ArrowScan(table.metadata, table.io, read_with_keys, AlwaysTrue())
    decoded: list[int] = []  # records of the files read whole (list.append is atomic)
    uuid = str(table.metadata.table_uuid)
    file_key = (pinned.schema_id, tuple(target.names), keep.key if keep else None)

    def whole(task: FileScanTask, planned: _Planned) -> pa.Table:
        def load() -> pa.Table:
            decoded.append(task.file.record_count)
            return kept(_conform(_live(scan, task, planned, values, key_names), target))

        path = task.file.file_path
        if cache is None or task.delete_files or planned.applying(path):
            return load()
        return cache.piece(("file", uuid, path, *file_key), load, _FILE_SHARE)

    chosen = {
        weight: [(planned, planned.tasks[p]) for p in sorted(files) if p in planned.tasks]
        for files, planned, weight in ((added, new, 1), (removed, old, -1))
    }
    every = [*chosen[1], *chosen[-1]]
    with ThreadPoolExecutor(max_workers=_READERS) as pool:  # pyarrow decodes without the GIL
        tables = iter(list(pool.map(lambda pt: whole(pt[1], pt[0]), every)))
    read = sum(decoded)
    whole_files = {
        weight: [(t, next(tables)) for _, t in pairs] for weight, pairs in chosen.items()
    }
    for gone, came in rewrites(whole_files[-1], whole_files[1]):
        parts.append(weighted(gone, -1))
        parts.append(weighted(came, 1))
    for path in sorted(hit):
        if path not in old.tasks or path not in new.tasks:
            continue  # not live at one end: its rows are read whole above, or never were
        before = reader.positions(path, old.tasks[path].delete_files)
        after = reader.positions(path, new.tasks[path].delete_files)
        old_equality, new_equality = old.applying(path), new.applying(path)
        if old_equality or new_equality:  # and the rows equality deletes remove
            field_ids = {d.field_id for d in (*old_equality, *new_equality)}
            keys = _key_columns(table.io, path, field_ids)
            read += old.tasks[path].file.record_count
            before = _with(before, values, old_equality, keys)
            after = _with(after, values, new_equality, keys)
        if len(before) and not pc.all(pc.is_in(before, value_set=after)).as_py():
            raise EngineRefusedError(f"positions of {path} un-deleted within the range")
        deleted = after.filter(pc.invert(pc.is_in(after, value_set=before)))
        if len(deleted):
            rows, scanned = _rows_at(table.io, path, deleted.to_pylist(), schema)
            parts.append(weighted(kept(_conform(rows, target)), -1))
            read += scanned
    with_weight = target.append(pa.field(WEIGHT, pa.int32(), nullable=False))
    if not parts:
        return ChangedRows(with_weight.empty_table(), read)
    rows = pa.concat_tables(parts)
    if rows.num_rows > max_rows:
        raise EngineRefusedError(
            f"{rows.num_rows} changed rows > {max_rows} (refresh.embedded_max_rows, "
            "driver_commit_max_rows)"
        )
    return ChangedRows(rows, read)


def snapshot_rows(
    table: Table, snapshot_id: int, schema: Schema, columns: Sequence[str]
) -> pa.Table:
    """Every row of `table` at `snapshot_id`, `columns` of `schema` (the snapshot's) only,
    its position deletes and deletion vectors applied by pyiceberg's reader and its
    equality deletes here, as for the whole files of a range: the read of a table that
    pyiceberg's scan refuses because it has equality deletes (Flink upserts)."""
    planned = _plan(table, snapshot_id, None)
    key_names = _key_names(schema, planned)
    extra = [n for n in key_names.values() if n not in columns]
    target = arrow_schema(schema.select(*columns))
    scan = ArrowScan(table.metadata, table.io, schema.select(*columns, *extra), AlwaysTrue())
    values = EqualityValues(table.io)
    tasks = [planned.tasks[p] for p in sorted(planned.tasks)]

    def read(task: FileScanTask) -> pa.Table:
        return _conform(_live(scan, task, planned, values, key_names), target)

    with ThreadPoolExecutor(max_workers=_READERS) as pool:  # pyarrow decodes without the GIL
        parts = list(pool.map(read, tasks))
    return pa.concat_tables(parts) if parts else target.empty_table()


def _live(
    scan: ArrowScan,
    task: FileScanTask,
    planned: _Planned,
    values: EqualityValues,
    key_names: dict[int, str],
) -> pa.Table:
    """A data file's rows live at the planned snapshot: its position deletes applied by
    the scan, then the rows its equality deletes remove at that snapshot dropped."""
    rows = scan.to_table([task])
    applying = planned.applying(task.file.file_path)
    if applying:
        gone = _matched(values, applying, lambda i: rows.column(key_names[i]))
        rows = rows.filter(pc.invert(gone))
    return rows


def _range_files(table: Table, change: SourceChange) -> _Range:
    found = _Range()
    for entry in range_entries(table, change):
        data = entry.data_file
        added = entry.status == ManifestEntryStatus.ADDED
        if data.content == DataFileContent.EQUALITY_DELETES:
            if added:
                found.equality.append(equality_delete(table, entry))
        elif data.content == DataFileContent.DATA:
            if added:
                found.added.add(data.file_path)
            elif entry.status == ManifestEntryStatus.DELETED:
                found.removed.add(data.file_path)
        elif added:
            found.deletes.append(data)
    return found


def _plan(table: Table, snapshot_id: int | None, wanted: set[str] | None) -> _Planned:
    """The `wanted` data files (None: all) live at the snapshot (pyiceberg's planner, as
    `DataScan.plan_files` runs it, building tasks for those files only: a big table's
    others are skipped once their manifest entry is read), and its equality deletes."""
    planned = _Planned({}, {}, EqualityIndex.of(table))
    snapshot = None if snapshot_id is None else table.snapshot_by_id(snapshot_id)
    if snapshot is None or wanted == set():
        return planned

    def kept(entry: ManifestEntry) -> bool:
        data = entry.data_file
        if data.content == DataFileContent.EQUALITY_DELETES:  # applied here, not by pyiceberg
            planned.equality.deletes.append(equality_delete(table, entry))
            return False
        if data.content == DataFileContent.DATA:
            if wanted is not None and data.file_path not in wanted:
                return False
            planned.sequences[data.file_path] = int(entry.sequence_number or 0)
        return True

    try:
        planner = ManifestGroupPlanner(table.metadata, table.io)
        tasks = planner.plan_files(snapshot.manifests(table.io), manifest_entry_filter=kept)
        planned.tasks.update((task.file.file_path, task) for task in tasks)
    except (ValueError, NotImplementedError) as exc:
        raise EngineRefusedError(f"pyiceberg cannot plan snapshot {snapshot_id}: {exc}") from exc
    return planned


def _equality_candidates(table: Table, change: SourceChange) -> set[str]:
    """Data files live before the range whose column bounds allow a value of one of the
    range's equality deletes (from the manifest facts the route's estimate gathered)."""
    candidates = touched_files(table, change).equality_candidates
    if candidates is None:
        raise EngineRefusedError(f"{change.identifier}: an equality delete not pushed down")
    return {path for files in candidates for path in files}


def _key_names(schema: Schema, *planned: _Planned) -> dict[int, str]:
    """The top-level columns the snapshots' equality deletes compare, by field id."""
    top = {f.field_id: f.name for f in schema.fields}
    names: dict[int, str] = {}
    for snapshot in planned:
        for delete in snapshot.equality.deletes:
            name = top.get(delete.field_id)
            if name is None:
                raise EngineRefusedError("an equality delete on a nested or dropped column")
            names[delete.field_id] = name
    return names


def _matched(
    values: EqualityValues, deletes: list[EqualityDelete], key: Callable[[int], pa.Array]
) -> pa.Array:
    """Which rows the `deletes` remove, `key(field_id)` giving the rows' key column."""
    mask: pa.Array | None = None
    for field_id in sorted({d.field_id for d in deletes}):
        column = key(field_id)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        hit = values.matched(deletes, column, field_id)
        mask = hit if mask is None else pc.or_(mask, hit)
    assert mask is not None
    return mask


def _key_columns(io: FileIO, path: str, field_ids: set[int]) -> dict[int, pa.Array]:
    """Whole key columns of a data file, by field id."""
    with io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream)
        names = column_names_by_id(parquet.schema_arrow)
        if not field_ids <= names.keys():
            raise EngineRefusedError(f"{path} has no equality key column by field id")
        read = parquet.read(columns=[names[i] for i in sorted(field_ids)], use_threads=False)
    return {i: read.column(names[i]).combine_chunks() for i in field_ids}


def _with(
    positions: pa.Array,
    values: EqualityValues,
    deletes: list[EqualityDelete],
    keys: dict[int, pa.Array],
) -> pa.Array:
    """`positions` and those of the rows the equality `deletes` remove, sorted, unique."""
    if not deletes:
        return positions
    removed = pc.indices_nonzero(_matched(values, deletes, keys.__getitem__)).cast(pa.int64())
    unique = pc.unique(pa.concat_arrays([positions.cast(pa.int64()), removed]))
    return unique.take(pc.array_sort_indices(unique))


class _DeleteReader:
    """Positions that delete files name, per data file; each delete file read once."""

    def __init__(self, io: FileIO) -> None:
        self._io = io
        self._read: dict[str, dict[str, pa.Array]] = {}

    def _file(self, delete: DataFile) -> dict[str, pa.Array]:
        cached = self._read.get(delete.file_path)
        if cached is not None:
            return cached
        with self._io.new_input(delete.file_path).open() as stream:
            if delete.file_format == FileFormat.PUFFIN:
                vectors = deletion_vectors_from_puffin_file(PuffinFile(stream.read()))
                found = {
                    v.referenced_data_file: v.to_vector().combine_chunks().cast(pa.int64())
                    for v in vectors
                }
            elif delete.file_format == FileFormat.PARQUET:
                rows = pq.read_table(stream, columns=["file_path", "pos"])
                paths = rows.column("file_path").combine_chunks().dictionary_encode()
                positions = rows.column("pos").combine_chunks().cast(pa.int64())
                found = {
                    str(path): positions.filter(pc.equal(paths.indices, index))
                    for index, path in enumerate(paths.dictionary.to_pylist())
                }
            else:
                raise EngineRefusedError(f"{delete.file_format} position deletes")
        self._read[delete.file_path] = found
        return found

    def targets(self, deletes: Iterable[DataFile]) -> set[str]:
        """The data files `deletes` name (read from the files: their positions are read
        anyway)."""
        named: set[str] = set()
        for delete in deletes:
            named.update(self._file(delete))
        return named

    def positions(self, path: str, deletes: Iterable[DataFile]) -> pa.Array:
        """Sorted unique positions of `path` that `deletes` name."""
        found = [self._file(d).get(path) for d in deletes]
        arrays = [a for a in found if a is not None and len(a)]
        if not arrays:
            return pa.array([], pa.int64())
        unique = pc.unique(pa.concat_arrays(arrays))
        return unique.take(pc.array_sort_indices(unique))


def _rows_at(
    io: FileIO, path: str, positions: Sequence[int], schema: Schema
) -> tuple[pa.Table, int]:
    """The rows of data file `path` at `positions`, reading only the row groups holding
    them; and how many rows those groups hold."""
    with io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream)
        by_id = column_names_by_id(parquet.schema_arrow)
        names = []
        for wanted in schema.fields:
            name = by_id.get(wanted.field_id)
            if name is None:
                raise EngineRefusedError(f"{path} has no column {wanted.name} by field id")
            names.append(name)
        metadata = parquet.metadata
        group_rows = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
        groups, offsets = row_groups_for(group_rows, positions)
        rows = parquet.read_row_groups(groups, columns=names, use_threads=False)
    picked = rows.take(pa.array(offsets, pa.int64()))
    return picked.rename_columns([f.name for f in schema.fields]), sum(
        group_rows[g] for g in groups
    )


def _conform(rows: pa.Table, target: pa.Schema) -> pa.Table:
    rows = rows.select(target.names)
    return rows if rows.schema == target else rows.cast(target)
