"""Weighted change rows of a source table between two snapshots, read with Spark.

Iceberg's incremental read (`start-snapshot-id`) silently drops rows of non-append
snapshots, so it serves only ranges proven append-only; its changelog scan rejects
delete files. Any other range is read from the snapshots' manifests:
  +1  rows of data files added in the range, read at the new snapshot;
  -1  rows of data files removed in the range, read at the old snapshot;
  -1  rows at the positions that new position-delete files name, read at the old snapshot;
  -1  rows of older data files in an equality delete's partition that match its rows;
      a small delete's values are pushed into that read as a filter (`values_filter`),
      so only the files and row groups whose column bounds allow them are read.
Files are read exactly (Iceberg scan task sets, as the rewrite procedures use), with all
deletes applied. Rows that a rewrite (copy-on-write, compaction) merely moved appear once
with each sign and cancel in the weighted delta; the cost follows the touched files, not
the table. Deletion vectors (format v3, Puffin) fall back to diffing the hit files.

Every read takes only what the view needs (`ChangeRead`, sql/columns.py): the columns
the query uses from the source and the WHERE conjuncts about it alone. When the range both
removed and added data files (a copy-on-write rewrite), the projected rows are summed by
weight and the zero sums dropped before the delta query sees them, so a rewritten file's
unchanged rows never reach a join or an aggregate; not where the delta query would net
them first thing anyway (`ChangeRead.cancel`: one table, no affected keys, no recomputed
groups), which saves a shuffle.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from icemv.engine.jvm import (
    column_names,
    format_version,
    load_iceberg_table,
    referenced_data_file,
    remove_scan_tasks,
    stage_scan_tasks,
    values_filter,
)
from icemv.identifiers import quote_part
from icemv.refresh.changes.classify import SourceChange
from icemv.refresh.changes.pushdown import PUSHDOWN_MAX_ROWS, column_values
from icemv.sql.columns import ALL, ChangeRead
from icemv.sql.names import WEIGHT
from icemv.sql.net import Identity, netted

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType


# The Iceberg types of refresh/changes/pushdown.py's `PUSHDOWN_TYPES`, in Java.
_PUSHDOWN_TYPE_IDS = frozenset({"INTEGER", "LONG", "STRING"})


@dataclass(frozen=True)
class _EqualityDelete:
    location: str
    file_format: str
    columns: tuple[str, ...]
    spec_id: int
    partition: str | None  # None: unpartitioned, applies to every data file
    pushable: bool  # few enough rows, of types a filter carries


def _equality_delete(table: Any, delete: Any, file_format: str) -> _EqualityDelete:
    schema = table.schema()
    field_ids = list(delete.equalityFieldIds())
    columns = tuple(str(schema.findColumnName(field_id)) for field_id in field_ids)
    spec = table.specs().get(delete.specId())
    partition = None if spec.isUnpartitioned() else str(spec.partitionToPath(delete.partition()))
    pushable = int(delete.recordCount()) <= PUSHDOWN_MAX_ROWS and all(
        str(schema.findType(field_id).typeId().toString()) in _PUSHDOWN_TYPE_IDS
        for field_id in field_ids
    )
    return _EqualityDelete(
        str(delete.location()), file_format, columns, int(delete.specId()), partition, pushable
    )


@dataclass
class _Touched:
    added: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    position_delete_files: dict[str, list[str]] = field(default_factory=dict)
    # Data files those name, known from metadata; None: must be read from the files.
    position_hit: set[str] | None = field(default_factory=set)
    equality_deletes: list[_EqualityDelete] = field(default_factory=list)
    vector_hit: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _Before:
    """The source before the range, and how to read it for the view."""

    table: Any
    name: str
    snapshot_id: int | None
    read: ChangeRead


class ChangeReader:
    """Stages scan task sets for one refresh and releases them when it ends."""

    def __init__(self, spark: SparkSession, catalog: str) -> None:
        self._spark = spark
        self._catalog = catalog
        self._staged: list[tuple[Any, str]] = []
        self._views: list[str] = []
        self.records_scanned = 0

    def close(self) -> None:
        for table, set_id in self._staged:
            remove_scan_tasks(self._spark, table, set_id)
        self._staged.clear()
        for name in self._views:
            self._spark.catalog.dropTempView(name)
        self._views.clear()

    def change_rows(self, change: SourceChange, read: ChangeRead = ALL) -> DataFrame:
        """Rows inserted (+1) and deleted (-1) between the change's snapshots.

        `read`: the columns to keep (and their order) and a filter on the rows; the rows
        failing it are left out.
        """
        from pyspark.sql.functions import lit

        name = change.identifier.quoted(self._catalog)
        if change.kind == "append-only":
            self.records_scanned += change.changed_records
            appended = _shaped(self._appended(name, change), read)
            return appended.withColumn(WEIGHT, lit(1))
        table = load_iceberg_table(self._spark, name)
        touched = self._touched_files(table, change)
        parts = [
            self._read(table, name, change.new_snapshot_id, touched.added, read).withColumn(
                WEIGHT, lit(1)
            )
        ]
        old = change.old_snapshot_id
        if touched.removed:
            removed = self._read(table, name, old, touched.removed, read)
            parts.append(removed.withColumn(WEIGHT, lit(-1)))
        # Handled whole: above, and by the deletion vectors' diff below.
        live_before = touched.removed | touched.added | touched.vector_hit
        before = _Before(table, name, old, read)
        # A row two deletes remove (by position and by equality, or by two equality
        # deletes) goes once: told apart by its position, or on format v3 by its row id
        # (scan task set reads there carry the row lineage columns, not `_file`, `_pos`).
        several = bool(touched.position_delete_files) + len(touched.equality_deletes) > 1
        identity = ("_row_id",) if format_version(table) >= 3 else ("_file", "_pos")
        deleted = [
            frame
            for frame in (
                self._position_deleted(before, touched, live_before),
                *self._equality_deleted(before, touched, live_before, identity if several else ()),
            )
            if frame is not None
        ]
        if deleted:
            columns = parts[0].drop(WEIGHT).columns
            if len(deleted) > 1:  # (each frame holds its delete's columns too)
                kept = _columns((*columns, *identity))
                rows = _union([frame.select(*kept) for frame in deleted])
                rows = rows.dropDuplicates(list(identity))
            else:
                rows = deleted[0]
            rows = rows.select(*_columns(columns))
            parts.append(rows.withColumn(WEIGHT, lit(-1)))
        if touched.vector_hit:
            hit = touched.vector_hit - touched.removed - touched.added
            old_rows = self._read(table, name, old, hit, read)
            new_rows = self._read(table, name, change.new_snapshot_id, hit, read)
            parts.append(old_rows.exceptAll(new_rows).withColumn(WEIGHT, lit(-1)))
        rows = _union(parts)
        if read.cancel and touched.removed and touched.added:
            return self.netted(rows)
        return rows

    def netted(self, rows: DataFrame) -> DataFrame:
        """The rows netted by sql/net.py's tree (a rewrite's moved rows cancel)."""
        name = f"__icemv_changes_{uuid.uuid4().hex[:12]}"
        rows.createOrReplaceTempView(name)
        self._views.append(name)
        identities = [
            (f.name, _identity(f.dataType)) for f in rows.schema.fields if f.name != WEIGHT
        ]
        relation = exp.Table(this=exp.to_identifier(name, quoted=True))
        return self._spark.sql(netted(relation, identities).sql(dialect="spark"))

    def _appended(self, name: str, change: SourceChange) -> DataFrame:
        """Rows of an append-only range: Iceberg's incremental read, planned in the JVM.

        Exact for appends only (it drops rows of other operations), hence the kind check.
        """
        reader = self._spark.read.format("iceberg")
        if change.old_snapshot_id is None:  # everything up to the new snapshot is new
            reader = reader.option("snapshot-id", str(change.new_snapshot_id))
        else:
            reader = reader.option("start-snapshot-id", str(change.old_snapshot_id)).option(
                "end-snapshot-id", str(change.new_snapshot_id)
            )
        return reader.load(name)

    def _position_deleted(
        self, old: _Before, touched: _Touched, skip: set[str]
    ) -> DataFrame | None:
        """Old rows at the positions new position-delete files name (with _file, _pos)."""
        from pyspark.sql.functions import col

        if not touched.position_delete_files:
            return None
        positions = self._positions(touched.position_delete_files)
        hit = touched.position_hit
        if hit is None:  # some delete file names several data files: ask the files
            hit = {str(row[0]) for row in positions.select("file_path").distinct().collect()}
        hit = hit - skip
        if not hit:
            return None
        rows = self._read(old.table, old.name, old.snapshot_id, hit, old.read, ("_file", "_pos"))
        return rows.join(
            positions.hint("broadcast"),
            (col("_file") == col("file_path")) & (col("_pos") == col("pos")),
            "left_semi",
        )

    def _equality_deleted(
        self, old: _Before, touched: _Touched, skip: set[str], identity: tuple[str, ...]
    ) -> list[DataFrame]:
        """Old rows whose equality columns match a new equality-delete row (null-safe),
        with the `identity` columns.

        Candidates are the data files live before, in the delete's partition (all of them
        for an unpartitioned delete): older data files are exactly what it applies to. A
        pushable delete's values also filter the candidates and their row groups.
        """
        from pyspark.sql.functions import col

        frames = []
        for delete in touched.equality_deletes:
            keys = self._spark.read.format(delete.file_format).load(delete.location)
            keys = keys.select(
                *[col(c).alias(f"__icemv_eq_{i}") for i, c in enumerate(delete.columns)]
            )
            pushed = self._pushed(delete, keys) if delete.pushable else None
            candidates = [
                task
                for task in self._candidates(old.table, old.snapshot_id, delete, pushed)
                if str(task.file().location()) not in skip
            ]
            if not candidates:
                continue
            kept = old.read.columns
            missing = () if kept is None else tuple(c for c in delete.columns if c not in kept)
            rows = self._read_tasks(
                old.table, old.name, candidates, old.read, (*identity, *missing)
            )
            match = reduce(
                lambda a, b: a & b,
                [rows[c].eqNullSafe(keys[f"__icemv_eq_{i}"]) for i, c in enumerate(delete.columns)],
            )
            frames.append(rows.join(keys.hint("broadcast"), match, "left_semi"))
        return frames

    def _pushed(self, delete: _EqualityDelete, keys: DataFrame) -> Any:
        """The delete's values as an Iceberg filter on its columns (a small read)."""
        rows = keys.distinct().collect()
        filters = {}
        for i, column in enumerate(delete.columns):
            kept = column_values({row[i] for row in rows})
            filters[column] = (kept.null, kept.values, kept.ranges)
        return values_filter(self._spark, filters)

    def _candidates(
        self, table: Any, snapshot_id: int | None, delete: _EqualityDelete, row_filter: Any
    ) -> list[Any]:
        """Scan tasks of the data files at the snapshot in the delete's partition that
        `row_filter` (None: no filter) may match, by their column bounds; the filter is
        their residual, which lets the readers skip row groups it rules out (rows of the
        groups read are not filtered by it)."""
        if snapshot_id is None:
            return []
        tasks = []
        for task in _plan(table, snapshot_id, row_filter):
            data = task.file()
            if delete.partition is None or (
                int(data.specId()) == delete.spec_id
                and str(table.specs().get(data.specId()).partitionToPath(data.partition()))
                == delete.partition
            ):
                tasks.append(task)
        return tasks

    def _touched_files(self, table: Any, change: SourceChange) -> _Touched:
        io = table.io()
        touched = _Touched()
        for snapshot_meta in change.snapshots:
            snapshot = table.snapshot(snapshot_meta.snapshot_id)
            touched.added.update(str(f.location()) for f in snapshot.addedDataFiles(io))
            touched.removed.update(str(f.location()) for f in snapshot.removedDataFiles(io))
            for delete in snapshot.addedDeleteFiles(io):
                file_format = str(delete.format().toString()).lower()
                if str(delete.content().toString()) == "EQUALITY_DELETES":
                    touched.equality_deletes.append(_equality_delete(table, delete, file_format))
                    continue
                if file_format == "puffin":
                    touched.vector_hit.add(str(delete.referencedDataFile()))
                else:
                    touched.position_delete_files.setdefault(file_format, []).append(
                        str(delete.location())
                    )
                    # The one data file it deletes from, if its metadata says so.
                    target = referenced_data_file(self._spark, delete)
                    if target is None:
                        touched.position_hit = None
                    elif touched.position_hit is not None:
                        touched.position_hit.add(target)
        # A file added and removed within the range is live at neither end.
        gone = touched.added & touched.removed
        touched.added -= gone
        touched.removed -= gone
        return touched

    def _positions(self, files: dict[str, list[str]]) -> DataFrame:
        return _union(
            [
                self._spark.read.format(file_format).load(paths).select("file_path", "pos")
                for file_format, paths in files.items()
            ]
        )

    def _read(
        self,
        table: Any,
        name: str,
        snapshot_id: int | None,
        files: set[str],
        read: ChangeRead,
        extra: tuple[str, ...] = (),
    ) -> DataFrame:
        """Rows of `files` at the snapshot, as `read` asks, with the `extra` columns."""
        if snapshot_id is None or not files:
            return _shaped(self._spark.table(name), read, extra).limit(0)
        tasks = [t for t in _plan(table, snapshot_id, None) if str(t.file().location()) in files]
        return self._read_tasks(table, name, tasks, read, extra)

    def _read_tasks(
        self, table: Any, name: str, tasks: list[Any], read: ChangeRead, extra: tuple[str, ...]
    ) -> DataFrame:
        """Rows of exactly these scan tasks, as `read` asks, with the `extra` columns."""
        self.records_scanned += sum(int(task.file().recordCount()) for task in tasks)
        set_id = f"icemv-{uuid.uuid4()}"
        if not stage_scan_tasks(self._spark, table, set_id, tasks):
            return _shaped(self._spark.table(name), read, extra).limit(0)
        self._staged.append((table, set_id))
        rows = self._spark.read.format("iceberg").option("scan-task-set-id", set_id).load(name)
        if read.columns is None:  # the table's columns (format v3 adds row lineage ones)
            rows = rows.select(*_columns((*column_names(table), *extra)))
        return _shaped(rows, read, extra)


def _plan(table: Any, snapshot_id: int, row_filter: Any) -> Iterator[Any]:
    """The file scan tasks of the table at the snapshot, pruned by `row_filter` if any."""
    scan = table.newScan().useSnapshot(snapshot_id)
    if row_filter is not None:
        scan = scan.filter(row_filter)
    iterator = scan.planFiles().iterator()
    while iterator.hasNext():
        yield iterator.next()


def _columns(names: Iterable[str]) -> list[Column]:
    from pyspark.sql.functions import col

    return [col(quote_part(n)) for n in names]


def _shaped(rows: DataFrame, read: ChangeRead, extra: tuple[str, ...] = ()) -> DataFrame:
    """`rows` filtered and projected as `read` says, with the `extra` (metadata) columns."""
    from pyspark.sql.functions import expr

    condition = read.filter_sql()
    if condition is not None:
        rows = rows.where(expr(condition))
    if read.columns is None and not extra:
        return rows
    kept = rows.columns if read.columns is None else read.columns
    return rows.select(*_columns((*kept, *extra)))


def _identity(data_type: DataType) -> Identity:
    """How a column enters a row's identity (sql/net.py): by its text for floating point
    (grouping makes -0.0 and 0.0 one) and for what holds maps (Spark cannot group them) or
    floating point."""
    from pyspark.sql.types import ArrayType, DoubleType, FloatType, MapType, StructType

    if isinstance(data_type, FloatType | DoubleType):
        return "float"
    if isinstance(data_type, MapType):
        return "complex"
    if isinstance(data_type, ArrayType):
        return "value" if _identity(data_type.elementType) == "value" else "complex"
    if isinstance(data_type, StructType):
        inner = {_identity(f.dataType) for f in data_type.fields}
        return "value" if inner <= {"value"} else "complex"
    return "value"


def _union(frames: list[DataFrame]) -> DataFrame:
    """Rows of all `frames` (by column name); at least one frame."""
    return reduce(lambda left, right: left.unionByName(right), frames)


@contextlib.contextmanager
def change_reader(spark: SparkSession, catalog: str) -> Iterator[ChangeReader]:
    reader = ChangeReader(spark, catalog)
    try:
        yield reader
    finally:
        reader.close()
