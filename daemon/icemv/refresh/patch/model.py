"""What a patch is: the storage table it applies to and the write it prepares.

A patch is one of two writes, chosen when it is prepared:
  - `SparkPatch`: a Spark SQL write (append or MERGE) to a given table reference;
  - `DriverPatch`: Arrow rows committed from the driver by pyiceberg, replacing some
    storage data files (none for an append).
Row counts are None when computing them up front would cost a Spark job of its own: then
Iceberg's summary of the same commit has them. `PatchTarget.held` names the storage
rows the embedded engine read (the files admitting the touched keys): a driver patch then
replaces only those files, so rows outside them stay as committed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.table import Table
from sqlglot import exp

from icemv.errors import StorageCommitConflictError
from icemv.format.summary import TOTAL_RECORDS, summary_of
from icemv.identifiers import Identifier
from icemv.sql.pinning import table_at


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
    # The embedded executor holds some storage rows instead (`Executor.stored`): the
    # relation of the rows of these data files, the only ones a patch then rewrites.
    held: str | None = None
    held_files: tuple[DataFile, ...] = ()

    def holding(self, relation: str, files: tuple[DataFile, ...]) -> PatchTarget:
        return dataclasses.replace(self, held=relation, held_files=files)

    def at_plan(self, alias: str) -> exp.Expr:
        """The storage rows at the planned snapshot (those held, if any), under `alias`."""
        if self.held is not None:
            return exp.Table(
                this=exp.to_identifier(self.held, quoted=True),
                alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)),
            )
        return table_at(self.catalog, self.identifier, self.snapshot_id, alias)

    @property
    def rewritable_from_driver(self) -> bool:
        """The storage content read (whole, or the held rows) may be rewritten from the
        driver."""
        if self.held is not None:
            return True  # the executor read them within the driver's bound
        summary = summary_of(self.table.metadata.snapshot_by_id(self.snapshot_id))
        # Records in data files, deletes not subtracted: a bound of the rows.
        records = int(summary.get(TOTAL_RECORDS, 0))
        return self.driver_max_rows > 0 and records <= self.driver_max_rows

    def live_data_files(self) -> list[DataFile]:
        """The data files a rewrite of what was read replaces: those held, or every data
        file of the planned snapshot."""
        if self.held is not None:
            return list(self.held_files)
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
