"""Rows an append-only range added, read on the driver with pyiceberg, shared across MVs.

An `append` snapshot only adds data files, and no later append deletes from them, so the
rows a range of appends added are exactly the rows of the files each snapshot added: read
whole with pyiceberg's ArrowScan, no Spark job. Each snapshot's piece is cached per
process, keyed by (table uuid, snapshot id, schema id), bounded by bytes (least recently
used goes first), so N MVs over one source read each appended file once, and MVs whose
recorded snapshots differ read the union of their ranges: a range is the concatenation
of its snapshots' pieces. Unchanged tables a join reads (refresh/embedded/route.py) are
cached the same way, whole at one snapshot, keyed by their columns read too (a table with
equality deletes, which pyiceberg's scan refuses, read by changes.snapshot_rows),
and so are the rows a view keeps of a whole data file a copy-on-write rewrite removed or
added (changes.changed_rows), while small against the bound.
Thread-safe: a piece being read by one refresh is awaited by
the others, not read again.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntryStatus
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.types import DecimalType, IntegerType

from icemv.catalog.arrow_schemas import arrow_schema
from icemv.errors import EngineRefusedError
from icemv.identifiers import Identifier
from icemv.refresh.changes.classify import SourceChange
from icemv.refresh.changes.pushdown import IN_LIMIT, values_filter
from icemv.sql.memo import Memo
from icemv.sql.names import WEIGHT

# Appended rows: (table uuid, snapshot id, schema id); a table read whole for a join:
# ("table", uuid, snapshot id, schema id, its columns read); the rows a view's WHERE
# keeps of a data file a range with deletes read whole: ("file", uuid, path, schema id,
# columns, the WHERE's key) (changes.changed_rows); a storage table's data file, as
# a refresh wrote it or read it whole: ("stored", uuid, path, schema id) (stored_file_key);
# an append-only range's rows with their weight: ("appended", uuid, snapshot ids, schema
# id) (appended_change_rows).
PieceKey = tuple[Hashable, ...]


@dataclass
class _Loading:
    done: threading.Event = field(default_factory=threading.Event)
    rows: pa.Table | None = None


class AppendedRowsCache:
    """Arrow rows each append snapshot added, bounded by `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._pieces: OrderedDict[PieceKey, pa.Table] = OrderedDict()
        self._loading: dict[PieceKey, _Loading] = {}
        self._bytes = 0
        self.files_read = 0  # data files read since the process started (for tests, metrics)
        self.tables_read = 0  # unchanged tables read whole for joins, likewise
        self.tables_restricted = 0  # tables read restricted to a delta's keys, likewise
        self.rows_restricted = 0  # the rows those reads kept

    def piece(self, key: PieceKey, load: Callable[[], pa.Table], share: float = 1.0) -> pa.Table:
        """The cached piece for `key`, else `load()`ed once (concurrent callers wait) and
        kept if at most `share` of the bound."""
        with self._lock:
            cached = self._pieces.get(key)
            if cached is not None:
                self._pieces.move_to_end(key)
                return cached
            loading = self._loading.get(key)
            owner = loading is None
            if loading is None:
                loading = self._loading[key] = _Loading()
        if not owner:
            loading.done.wait()
            return loading.rows if loading.rows is not None else load()
        try:
            rows = load()
            loading.rows = rows
            if rows.nbytes <= self.max_bytes * share:
                self._keep(key, rows)
            return rows
        finally:
            with self._lock:
                self._loading.pop(key, None)
            loading.done.set()

    def keep(self, key: PieceKey, rows: pa.Table, share: float = 1.0) -> None:
        """Keep `rows` as `key`'s piece if at most `share` of the bound (a piece known
        without reading it: the rows a storage commit just wrote to a file)."""
        if rows.nbytes <= self.max_bytes * share:
            self._keep(key, rows)

    def count_files(self, files: int) -> None:
        with self._lock:
            self.files_read += files

    def count_table(self) -> None:
        with self._lock:
            self.tables_read += 1

    def count_restricted(self, rows: int) -> None:
        with self._lock:
            self.tables_restricted += 1
            self.rows_restricted += rows

    def _keep(self, key: PieceKey, rows: pa.Table) -> None:
        size = rows.nbytes
        with self._lock:
            if size > self.max_bytes or key in self._pieces:
                return
            self._pieces[key] = rows
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, gone = self._pieces.popitem(last=False)
                self._bytes -= gone.nbytes

    def resize(self, max_bytes: int) -> None:
        with self._lock:
            self.max_bytes = max_bytes
            while self._pieces and self._bytes > max_bytes:
                _, gone = self._pieces.popitem(last=False)
                self._bytes -= gone.nbytes

    @property
    def cached_bytes(self) -> int:
        return self._bytes


_SHARED = AppendedRowsCache(0)


def shared_cache(max_bytes: int | None = None) -> AppendedRowsCache:
    """The process-wide cache, bounded by `max_bytes` (the configured bound wins; None:
    as the last refresh set it, 0 before any)."""
    if max_bytes is not None and _SHARED.max_bytes != max_bytes:
        _SHARED.resize(max_bytes)
    return _SHARED


# A storage data file's rows are kept while at most this share of the cache's bound.
STORED_SHARE = 0.25


def stored_file_key(table: Table, path: str) -> PieceKey:
    """The cache key of a storage data file's rows, read whole under the current schema
    (data files are immutable: a path names one content for good)."""
    return ("stored", str(table.metadata.table_uuid), path, table.schema().schema_id)


# The live data files of a storage table's snapshots, by (table uuid, snapshot id), when
# it has at most one and no delete file: what a driver commit leaves (the live files of
# the snapshot it committed on, but those it replaced, plus those it wrote), else what a
# scan planned. A snapshot's files never change, so a snapshot id names them; a snapshot
# made by anyone else is simply not known here.
_live: Memo[tuple[DataFile, ...]] = Memo(1024)
LIVE_FILES_KEPT = 1


def live_files(table: Table, snapshot_id: int) -> tuple[DataFile, ...] | None:
    """The live data files of `table` at `snapshot_id` if they are at most
    LIVE_FILES_KEPT and without delete files, else None; known from a commit of this
    process or planned once (only when the snapshot's summary counts so few)."""
    key = (str(table.metadata.table_uuid), snapshot_id)
    files = _live.get(key)
    if files is not None:
        return files
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    summary = snapshot.summary if snapshot is not None else None
    if summary is None:
        return None
    counts = (summary.get("total-data-files"), summary.get("total-delete-files"))
    if not (counts[0] or "").isdigit() or int(counts[0] or 0) > LIVE_FILES_KEPT:
        return None
    if counts[1] != "0":
        return None
    tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
    if len(tasks) > LIVE_FILES_KEPT or any(t.delete_files for t in tasks):
        return None
    files = tuple(t.file for t in tasks)
    _live.put(key, files)
    return files


def committed_live_files(
    table: Table,
    parent: int,
    snapshot_id: int,
    replaced: Sequence[DataFile],
    written: Sequence[DataFile],
) -> None:
    """Note the live files of the snapshot a driver commit made on `parent`, replacing
    `replaced` by `written` (data files only), when those of `parent` are known."""
    before = _live.get((str(table.metadata.table_uuid), parent))
    if before is None:
        return
    gone = {f.file_path for f in replaced}
    after = (*[f for f in before if f.file_path not in gone], *written)
    if len(after) <= LIVE_FILES_KEPT:
        _live.put((str(table.metadata.table_uuid), snapshot_id), after)


def read_schema(table: Table, change: SourceChange) -> Schema:
    """The schema the range is read with: the pinned snapshot's, as Spark reads it."""
    snapshot = table.metadata.snapshot_by_id(change.new_snapshot_id or -1)
    schema_id = snapshot.schema_id if snapshot and snapshot.schema_id is not None else None
    if schema_id is None:
        return table.schema()
    for schema in table.metadata.schemas:
        if schema.schema_id == schema_id:
            return schema
    return table.schema()


def appended_rows(table: Table, change: SourceChange, cache: AppendedRowsCache) -> pa.Table:
    """Every row the append-only range `change` added, under its pinned schema."""
    if change.kind != "append-only":
        raise EngineRefusedError(f"{change.identifier} changed by more than appends")
    schema = read_schema(table, change)
    uuid = str(table.metadata.table_uuid)
    pieces = [
        cache.piece(
            (uuid, s.snapshot_id, schema.schema_id),
            lambda s=s: _added_rows(table, s, schema, cache),  # type: ignore[misc]
        )
        for s in change.snapshots
    ]
    target = arrow_schema(schema)
    if not pieces:
        return target.empty_table()
    rows = pa.concat_tables(pieces, promote_options="permissive")
    return rows if rows.schema == target else rows.cast(target)


def appended_change_rows(table: Table, change: SourceChange, cache: AppendedRowsCache) -> pa.Table:
    """`appended_rows` with WEIGHT 1 on each: one object per range and process while the
    cache keeps it, so the weight is added once, not once per MV reading the range."""
    key = _appended_key(table, change)
    return cache.piece(key, lambda: weighted(appended_rows(table, change, cache), 1))


def _appended_key(table: Table, change: SourceChange) -> PieceKey:
    schema = read_schema(table, change)
    return ("appended", str(table.metadata.table_uuid),
            tuple(s.snapshot_id for s in change.snapshots), schema.schema_id)  # fmt: skip


def sampled_append(
    identifier: Identifier,
    table: Table,
    snapshot_id: int,
    max_rows: int,
    cache: AppendedRowsCache,
) -> SourceChange:
    """A make-believe append to `table` at `snapshot_id` of rows its data files hold (the
    first `max_rows` of its smallest live data file, deletes not applied: the values
    matter, not whether they are live; read once while the cache keeps them), for a
    rehearsal (refresh/rehearsal.py): a range of no snapshots, from
    `snapshot_id` to itself, whose change rows `appended_change_rows` finds kept under the
    range's key. No real range is empty (an append-only range holds at least one
    snapshot), so no refresh ever reads them; rows the cache has let go read as none."""
    change = SourceChange(identifier, snapshot_id, snapshot_id, "append-only", (), 0, 0)
    schema = read_schema(table, change)

    def sample() -> pa.Table:
        target = arrow_schema(schema)  # as appended_rows types them
        files = [task.file for task in table.scan(snapshot_id=snapshot_id).plan_files()]
        if not files:
            return weighted(target.empty_table(), 1)
        smallest = min(files, key=lambda f: f.file_size_in_bytes)
        # The first rows of its first row group, by name (a file whose columns are named
        # otherwise fails the rehearsal): pyiceberg's scan would decode a whole row group
        # first, which grew a worker by ~30 MB for a 1M-row file here.
        with table.io.new_input(smallest.file_path).open() as stream:
            batches = pq.ParquetFile(stream).iter_batches(max_rows, columns=target.names)
            first = next(batches, None)
        rows = target.empty_table() if first is None else pa.Table.from_batches([first])
        return weighted(rows.select(target.names).cast(target), 1)

    rows = cache.piece(_appended_key(table, change), sample)
    return dataclasses.replace(change, changed_records=rows.num_rows)


def weighted(rows: pa.Table, weight: int) -> pa.Table:
    """`rows` with a WEIGHT column of `weight` on each."""
    column = pa.repeat(pa.scalar(weight, pa.int32()), rows.num_rows)
    return rows.append_column(pa.field(WEIGHT, pa.int32(), nullable=False), column)


def _added_rows(
    table: Table, snapshot: Snapshot, schema: Schema, cache: AppendedRowsCache
) -> pa.Table:
    io = table.io
    files = [
        entry.data_file
        for manifest in snapshot.manifests(io)
        if manifest.added_snapshot_id == snapshot.snapshot_id
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)
        if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot.snapshot_id
    ]
    if any(f.content != DataFileContent.DATA for f in files):
        raise EngineRefusedError(f"append snapshot {snapshot.snapshot_id} added delete files")
    cache.count_files(len(files))
    if not files:
        return arrow_schema(schema).empty_table()
    scan = ArrowScan(table.metadata, io, schema, AlwaysTrue())
    return scan.to_table([FileScanTask(f) for f in files])


def table_rows(
    table: Table,
    snapshot_id: int | None,
    schema: Schema,
    columns: Sequence[str],
    cache: AppendedRowsCache,
) -> pa.Table:
    """Every row of `table` at `snapshot_id` (None: no snapshot, no rows), `columns` only,
    typed by `schema` (the snapshot's), shared through `cache`."""
    target = pa.schema([arrow_schema(schema).field(c) for c in columns])
    if snapshot_id is None:
        return target.empty_table()
    key = ("table", str(table.metadata.table_uuid), snapshot_id, schema.schema_id, *columns)

    def load() -> pa.Table:
        cache.count_table()
        scan = table.scan(snapshot_id=snapshot_id, selected_fields=tuple(columns))
        try:
            rows = scan.to_arrow()
        except (NotImplementedError, ValueError):  # equality deletes: applied by icemv
            from icemv.refresh.embedded.changes import snapshot_rows  # it reads here too

            rows = snapshot_rows(table, snapshot_id, schema, columns)
        rows = rows.select(list(columns))
        return rows if rows.schema == target else rows.cast(target)

    return cache.piece(key, load)


# Data files a restricted read decodes at once (pyarrow decodes without the GIL).
MATCHING_READERS = 2

# An Iceberg INT column holds no value outside these: a BIGINT partner's other values
# match no row (and pyiceberg binds no literal for them).
_INT_RANGE = (-(2**31), 2**31 - 1)


def matching_rows(
    table: Table,
    snapshot_id: int | None,
    schema: Schema,
    columns: Sequence[str],
    column: str,
    values: Sequence[object],
    with_null: bool = False,
) -> pa.Table:
    """The rows of `table` at `snapshot_id` whose `column` (a field of `schema`: integral,
    string or date) is one of `values` (or NULL, `with_null`), `columns` only. pyiceberg
    prunes data files by the values (a list up to Iceberg's `IN_LIMIT`, else ranges
    around them: refresh/changes/pushdown.py) and filters each batch of rows as it is
    read: no file is held whole. Not cached: the rows depend on the values."""
    target = pa.schema([arrow_schema(schema).field(c) for c in columns])
    field = schema.find_field(column)
    kept = [v for v in values if v is not None]
    if isinstance(field.field_type, IntegerType):
        kept = [v for v in kept if isinstance(v, int) and _INT_RANGE[0] <= v <= _INT_RANGE[1]]
    if snapshot_id is None or (not kept and not with_null):
        return target.empty_table()
    wanted: set[object] = {*kept, *([None] if with_null else [])}
    # Exact up to IN_LIMIT values; past it, ranges that prune files, and the rows are
    # filtered here, batch by batch (pyiceberg binds and translates a long IN list for
    # each file: 50,000 values over 5M rows in 3.19 s, against 0.45 s so, medians of 3
    # in one run).
    row_filter = values_filter({column: wanted})
    exact = len(kept) <= IN_LIMIT
    read = tuple(dict.fromkeys([*columns, column]))
    scan = table.scan(snapshot_id=snapshot_id, selected_fields=read, row_filter=row_filter)
    listed = None if exact else kept
    try:
        reader = ArrowScan(table.metadata, table.io, scan.projection(), scan.row_filter)

        def matching(task: FileScanTask) -> pa.Table:  # only its matching rows kept
            return _filtered(reader.to_record_batches([task]), column, listed, with_null)

        # A file at a time per reader: what is held at once is the files being read.
        with ThreadPoolExecutor(max_workers=MATCHING_READERS) as pool:
            parts = [p for p in pool.map(matching, scan.plan_files()) if p.num_columns]
        rows = (
            pa.concat_tables(parts, promote_options="permissive")
            if parts
            else schema.select(*read).as_arrow().empty_table()
        )
    except (NotImplementedError, ValueError):  # equality deletes: applied by icemv
        from icemv.refresh.embedded.changes import snapshot_rows  # it reads here too

        whole = snapshot_rows(table, snapshot_id, schema, read)
        rows = _filtered(whole.to_batches(), column, kept, with_null)
        rows = rows if rows.num_columns else whole.schema.empty_table()
    rows = rows.select(list(columns))
    return rows if rows.schema == target else rows.cast(target)


def _filtered(
    batches: Iterable[pa.RecordBatch], column: str, kept: list[object] | None, with_null: bool
) -> pa.Table:
    """The batches' rows whose `column` is one of `kept` (or NULL, `with_null`); all of
    them when `kept` is None (the reader filtered them). No batch: a table of no column."""
    parts: list[pa.RecordBatch] = []
    value_set: pa.Array | None = None
    for batch in batches:
        if kept is not None:
            values = batch.column(column)
            if value_set is None:
                value_set = pa.array(kept, values.type)
            keep = pc.is_in(values, value_set=value_set)  # NULL matches nothing here
            batch = batch.filter(pc.or_(keep, pc.is_null(values)) if with_null else keep)
        parts.append(batch)
    return pa.Table.from_batches(parts) if parts else pa.table({})


# Bytes per value of a column in Arrow, by Iceberg type; variable-length values count
# their offset and a guess of their length (the real size is checked once read).
_WIDTHS = {
    "boolean": 1, "int": 4, "date": 4, "float": 4, "long": 8, "double": 8, "time": 8,
    "timestamp": 8, "timestamptz": 8, "timestamp_ns": 8, "timestamptz_ns": 8, "uuid": 16,
}  # fmt: skip
_VARIABLE_WIDTH = 4 + 16


def arrow_width(schema: Schema, columns: Sequence[str]) -> int:
    """An estimate of the Arrow bytes per row of `columns` of `schema` (a decimal 16, a
    string or nested value `_VARIABLE_WIDTH`)."""
    width = 0
    for name in columns:
        field_type = schema.find_field(name).field_type
        if isinstance(field_type, DecimalType):
            width += 16
        else:
            width += _WIDTHS.get(str(field_type), _VARIABLE_WIDTH)
    return width
