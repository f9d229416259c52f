"""What a patch is: the storage table it applies to, the write it prepares, its temp views.

A patch is one of two writes, chosen when it is prepared:
  - `SparkPatch`: a Spark SQL write (append or MERGE) to a given table reference;
  - `DriverPatch`: Arrow rows committed from the driver by pyiceberg, replacing some
    storage data files (none for an append).
Row counts are None when computing them up front would cost a Spark job of its own: then
Iceberg's summary of the same commit has them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.table import Table
from sqlglot import exp

from icemv.errors import StorageCommitConflictError
from icemv.identifiers import Identifier
from icemv.spec.summary import TOTAL_RECORDS, summary_of
from icemv.sql.pinning import table_at

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class SparkPatch:
    """`apply(target)` writes the patch to `target`, a rendered Spark table reference."""

    rows_inserted: int | None
    rows_deleted: int | None
    apply: Callable[[str], None]


@dataclass(frozen=True)
class DriverPatch:
    """`rows` to add and the data files they replace, committed by pyiceberg."""

    rows_inserted: int
    rows_deleted: int
    rows: pa.Table
    replaces: tuple[DataFile, ...] = ()


StoragePatch = SparkPatch | DriverPatch


@dataclass(frozen=True)
class PatchTarget:
    """The storage table as the refresh was planned from."""

    table: Table  # as loaded when planned (pyiceberg)
    identifier: Identifier
    catalog: str
    snapshot_id: int
    driver_max_rows: int  # 0: always write with Spark

    def at_plan(self, alias: str) -> exp.Expr:
        """The storage table read at the planned snapshot, under `alias`."""
        return table_at(self.catalog, self.identifier, self.snapshot_id, alias)

    @property
    def rewritable_from_driver(self) -> bool:
        """The whole storage content may be rewritten from the driver."""
        summary = summary_of(self.table.metadata.snapshot_by_id(self.snapshot_id))
        # Records in data files, deletes not subtracted: a bound of the rows.
        records = int(summary.get(TOTAL_RECORDS, 0))
        return self.driver_max_rows > 0 and records <= self.driver_max_rows

    def live_data_files(self) -> list[DataFile]:
        """The data files of the planned snapshot (what a full rewrite replaces)."""
        return live_data_files(self.table, self.snapshot_id)


def live_data_files(storage: Table, snapshot_id: int) -> list[DataFile]:
    snapshot = storage.metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise StorageCommitConflictError(f"storage snapshot {snapshot_id} is gone")
    return [
        entry.data_file
        for manifest in snapshot.manifests(storage.io)
        if manifest.has_added_files() or manifest.has_existing_files()
        for entry in manifest.fetch_manifest_entry(storage.io, discard_deleted=True)
        if entry.data_file.content == DataFileContent.DATA
    ]


class TempViews:
    """Temp views of one refresh, dropped (and uncached) when it ends."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._names: list[str] = []

    def register(self, purpose: str, query: exp.Query, cache: bool = False) -> str:
        """Register `query` as a new temp view; returns its (internal, unique) name."""
        return self.register_frame(purpose, self.spark.sql(query.sql(dialect="spark")), cache)

    def register_frame(self, purpose: str, frame: DataFrame, cache: bool = False) -> str:
        name = f"__icemv_{purpose}_{uuid.uuid4().hex[:12]}"
        frame.createOrReplaceTempView(name)
        self._names.append(name)
        if cache:
            self.spark.catalog.cacheTable(name)
        return name

    def cache(self, name: str) -> None:
        self.spark.catalog.cacheTable(name)

    def drop(self) -> None:
        for name in self._names:
            self.spark.catalog.dropTempView(name)
        self._names.clear()
