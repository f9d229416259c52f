"""Weighted change rows of a source table between two snapshots, read with Spark.

Iceberg's incremental read (`start-snapshot-id`) silently drops rows of non-append
snapshots, so it serves only ranges proven append-only; its changelog scan rejects
delete files. Any other range is read from the snapshots' manifests:
  +1  rows of data files added in the range, read at the new snapshot;
  -1  rows of data files removed in the range, read at the old snapshot;
  -1  rows at the positions that new position-delete files name, read at the old snapshot;
  -1  rows of older data files in an equality delete's partition that match its rows.
Files are read exactly (Iceberg scan task sets, as the rewrite procedures use), with all
deletes applied. Rows that a rewrite (copy-on-write, compaction) merely moved appear once
with each sign and cancel in the weighted delta; the cost follows the touched files, not
the table. Deletion vectors (format v3, Puffin) fall back to diffing the hit files.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any

from icemv.engine.jvm import (
    load_iceberg_table,
    referenced_data_file,
    remove_scan_tasks,
    stage_scan_tasks,
)
from icemv.refresh.changes.classify import SourceChange
from icemv.sql.names import WEIGHT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class _EqualityDelete:
    location: str
    file_format: str
    columns: tuple[str, ...]
    spec_id: int
    partition: str | None  # None: unpartitioned, applies to every data file


def _equality_delete(table: Any, delete: Any, file_format: str) -> _EqualityDelete:
    schema = table.schema()
    columns = tuple(str(schema.findColumnName(field_id)) for field_id in delete.equalityFieldIds())
    spec = table.specs().get(delete.specId())
    partition = None if spec.isUnpartitioned() else str(spec.partitionToPath(delete.partition()))
    return _EqualityDelete(
        str(delete.location()), file_format, columns, int(delete.specId()), partition
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


class ChangeReader:
    """Stages scan task sets for one refresh and releases them when it ends."""

    def __init__(self, spark: SparkSession, catalog: str) -> None:
        self._spark = spark
        self._catalog = catalog
        self._staged: list[tuple[Any, str]] = []
        self.records_scanned = 0

    def close(self) -> None:
        for table, set_id in self._staged:
            remove_scan_tasks(self._spark, table, set_id)
        self._staged.clear()

    def change_rows(self, change: SourceChange) -> DataFrame:
        """Rows inserted (+1) and deleted (-1) between the change's snapshots."""
        from pyspark.sql.functions import lit

        name = change.identifier.quoted(self._catalog)
        if change.kind == "append-only":
            self.records_scanned += change.changed_records
            return self._appended(name, change).withColumn(WEIGHT, lit(1))
        table = load_iceberg_table(self._spark, name)
        touched = self._touched_files(table, change)
        parts = [
            self._read(table, name, change.new_snapshot_id, touched.added).withColumn(
                WEIGHT, lit(1)
            )
        ]
        old = change.old_snapshot_id
        if touched.removed:
            parts.append(self._read(table, name, old, touched.removed).withColumn(WEIGHT, lit(-1)))
        live_before = touched.removed | touched.added  # handled whole, above
        deleted = [
            frame
            for frame in (
                self._position_deleted(table, name, old, touched, live_before),
                *self._equality_deleted(table, name, old, touched, live_before),
            )
            if frame is not None
        ]
        if deleted:
            rows = _union(deleted)
            if len(deleted) > 1:  # a row deleted both by position and by equality goes once
                rows = rows.dropDuplicates(["_file", "_pos"])
            parts.append(rows.drop("_file", "_pos").withColumn(WEIGHT, lit(-1)))
        if touched.vector_hit:
            hit = touched.vector_hit - touched.removed - touched.added
            before = self._read(table, name, old, hit)
            after = self._read(table, name, change.new_snapshot_id, hit)
            parts.append(before.exceptAll(after).withColumn(WEIGHT, lit(-1)))
        return _union(parts)

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
        self, table: Any, name: str, old: int | None, touched: _Touched, skip: set[str]
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
        rows = self._read(table, name, old, hit).select("*", "_file", "_pos")
        return rows.join(
            positions.hint("broadcast"),
            (col("_file") == col("file_path")) & (col("_pos") == col("pos")),
            "left_semi",
        )

    def _equality_deleted(
        self, table: Any, name: str, old: int | None, touched: _Touched, skip: set[str]
    ) -> list[DataFrame]:
        """Old rows whose equality columns match a new equality-delete row (null-safe).

        Candidates are the data files live before, in the delete's partition (all of them
        for an unpartitioned delete): older data files are exactly what it applies to.
        """
        from pyspark.sql.functions import col

        frames = []
        for delete in touched.equality_deletes:
            candidates = self._files_in_partition(table, old, delete) - skip
            if not candidates:
                continue
            keys = self._spark.read.format(delete.file_format).load(delete.location)
            keys = keys.select(
                *[col(c).alias(f"__icemv_eq_{i}") for i, c in enumerate(delete.columns)]
            )
            rows = self._read(table, name, old, candidates).select("*", "_file", "_pos")
            match = reduce(
                lambda a, b: a & b,
                [rows[c].eqNullSafe(keys[f"__icemv_eq_{i}"]) for i, c in enumerate(delete.columns)],
            )
            frames.append(rows.join(keys.hint("broadcast"), match, "left_semi"))
        return frames

    def _files_in_partition(
        self, table: Any, snapshot_id: int | None, delete: _EqualityDelete
    ) -> set[str]:
        if snapshot_id is None:
            return set()
        files = set()
        iterator = table.newScan().useSnapshot(snapshot_id).planFiles().iterator()
        while iterator.hasNext():
            data = iterator.next().file()
            if delete.partition is None or (
                int(data.specId()) == delete.spec_id
                and str(table.specs().get(data.specId()).partitionToPath(data.partition()))
                == delete.partition
            ):
                files.add(str(data.location()))
        return files

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

    def _read(self, table: Any, name: str, snapshot_id: int | None, files: set[str]) -> DataFrame:
        if snapshot_id is None or not files:
            return self._spark.table(name).limit(0)
        tasks = []
        iterator = table.newScan().useSnapshot(snapshot_id).planFiles().iterator()
        while iterator.hasNext():
            task = iterator.next()
            if str(task.file().location()) in files:
                tasks.append(task)
                self.records_scanned += int(task.file().recordCount())
        set_id = f"icemv-{uuid.uuid4()}"
        if not stage_scan_tasks(self._spark, table, set_id, tasks):
            return self._spark.table(name).limit(0)
        self._staged.append((table, set_id))
        return self._spark.read.format("iceberg").option("scan-task-set-id", set_id).load(name)


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
