"""Weighted change rows of a source table between two snapshots, read with Spark.

Iceberg's incremental read (`start-snapshot-id`) silently drops rows of non-append
snapshots, and its changelog scan rejects delete files. Instead: find the data files a
range touched (added, removed, or hit by new delete files), read exactly those files at the
old and at the new snapshot with all deletes applied (Iceberg scan task sets, as the
rewrite procedures use), and diff them as multisets. Rows in rewritten-but-unchanged files
cancel out; the cost follows the touched files, not the table.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from daemon.ivm_analysis import WEIGHT
from daemon.source_changes import FullRefreshRequiredError, SourceChange

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class ChangeReader:
    """Stages scan task sets for one refresh and releases them when it ends."""

    def __init__(self, spark: SparkSession, catalog: str) -> None:
        self._spark = spark
        self._jvm: Any = spark.sparkContext._jvm
        self._catalog = catalog
        self._staged: list[tuple[Any, str]] = []
        self.records_scanned = 0

    def close(self) -> None:
        manager = self._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
        for table, set_id in self._staged:
            manager.removeTasks(table, set_id)
        self._staged.clear()

    def change_rows(self, change: SourceChange) -> DataFrame:
        """Rows inserted (+1) and deleted (-1) between the change's snapshots."""
        from pyspark.sql.functions import lit

        name = change.identifier.quoted(self._catalog)
        table = self._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            self._spark._jsparkSession, name
        )
        added, removed, hit = self._touched_files(table, change)
        new_rows = self._read(table, name, change.new_snapshot_id, added | hit)
        if change.kind == "append-only" or change.old_snapshot_id is None:
            return new_rows.withColumn(WEIGHT, lit(1))
        old_rows = self._read(table, name, change.old_snapshot_id, removed | hit)
        inserted = new_rows.exceptAll(old_rows).withColumn(WEIGHT, lit(1))
        deleted = old_rows.exceptAll(new_rows).withColumn(WEIGHT, lit(-1))
        return inserted.unionByName(deleted)

    def _touched_files(
        self, table: Any, change: SourceChange
    ) -> tuple[set[str], set[str], set[str]]:
        """Data files added, removed, and hit by position deletes within the range."""
        io = table.io()
        added: set[str] = set()
        removed: set[str] = set()
        hit: set[str] = set()
        unscoped_deletes: list[str] = []
        for snapshot_meta in change.snapshots:
            snapshot = table.snapshot(snapshot_meta.snapshot_id)
            added.update(str(f.location()) for f in snapshot.addedDataFiles(io))
            removed.update(str(f.location()) for f in snapshot.removedDataFiles(io))
            for delete in snapshot.addedDeleteFiles(io):
                if str(delete.content().toString()) == "EQUALITY_DELETES":
                    raise FullRefreshRequiredError(
                        "equality-deletes", f"{change.identifier} has equality deletes in range"
                    )
                referenced = delete.referencedDataFile()
                if referenced is not None:
                    hit.add(str(referenced))
                else:
                    unscoped_deletes.append(str(delete.location()))
        if unscoped_deletes:
            # Partition-scoped position deletes: their file_path column names the data files.
            paths = self._spark.read.parquet(*unscoped_deletes).select("file_path").distinct()
            hit.update(str(row[0]) for row in paths.collect())
        return added, removed, hit

    def _read(self, table: Any, name: str, snapshot_id: int | None, files: set[str]) -> DataFrame:
        empty = self._spark.table(name).limit(0)
        if snapshot_id is None or not files:
            return empty
        tasks = self._jvm.java.util.ArrayList()
        iterator = table.newScan().useSnapshot(snapshot_id).planFiles().iterator()
        while iterator.hasNext():
            task = iterator.next()
            if str(task.file().location()) in files:
                tasks.add(task)
                self.records_scanned += int(task.file().recordCount())
        if tasks.isEmpty():
            return empty
        set_id = f"icemv-{uuid.uuid4()}"
        self._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get().stageTasks(table, set_id, tasks)
        self._staged.append((table, set_id))
        return self._spark.read.format("iceberg").option("scan-task-set-id", set_id).load(name)


@contextlib.contextmanager
def change_reader(spark: SparkSession, catalog: str) -> Iterator[ChangeReader]:
    reader = ChangeReader(spark, catalog)
    try:
        yield reader
    finally:
        reader.close()
