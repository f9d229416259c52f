"""Commit a small storage patch from the driver with pyiceberg, in one snapshot.

A Spark write costs a job of its own plus a MERGE's planning (0.17 s for an append,
0.8-1.1 s for a MERGE into a 1,825-row table, measured here); a patch of a few thousand rows
collected as Arrow and written by pyiceberg costs tens of milliseconds. The commit
asserts that main is still at the snapshot the refresh was planned from, so a delta is
applied exactly once without a private branch.

The one module that uses pyiceberg internals (`_MergeAppendFiles`, `_OverwriteFiles`,
`_dataframe_to_data_files`, `UpdateTableMetadata.commit`, `Transaction._updates`): they
tie icemv to pyiceberg 0.12.*, so they stay fenced here (ruff SLF001 is allowed in this
file only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import DataFile, ManifestFile
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import UpdateTableMetadata
from pyiceberg.table.update.snapshot import _MergeAppendFiles, _OverwriteFiles
from pyiceberg.utils.properties import property_as_bool

from icemv.catalog.arrow_schemas import arrow_schema
from icemv.catalog.metadata_updates import applied
from icemv.errors import StorageCommitConflictError
from icemv.refresh.embedded.reads import (
    STORED_SHARE,
    committed_live_files,
    shared_cache,
    stored_file_key,
)


def commit_rows(
    storage: Table,
    planned_from: int,
    rows: pa.Table,
    replaces: Sequence[DataFile],
    properties: Mapping[str, str],
) -> None:
    """Add `rows` and remove the `replaces` data files on main, if main is still at
    planned_from: one snapshot, an append if nothing is removed.

    `storage` must be the table as loaded when the refresh was planned: its main ref is
    the commit's precondition.
    """
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    if storage.metadata.current_snapshot_id != planned_from:
        raise StorageCommitConflictError(f"storage moved since {planned_from}")
    rows = conform_to_storage(rows, storage)
    transaction = _Transaction(storage)
    snapshot_properties = dict(properties)
    kind = _ReplaceFiles if replaces else _AppendFiles
    operation = Operation.OVERWRITE if replaces else Operation.APPEND
    producer = kind(
        operation=operation,
        transaction=transaction,
        io=storage.io,
        snapshot_properties=snapshot_properties,
    )
    with producer:
        for data_file in replaces:
            producer.delete_data_file(data_file)
        written: list[DataFile] = []
        if rows.num_rows:
            written = list(
                _dataframe_to_data_files(
                    transaction.table_metadata, rows, storage.io, write_uuid=producer.commit_uuid
                )
            )
            for data_file in written:
                producer.append_data_file(data_file)
        # One file of an unpartitioned table holds exactly `rows`: the next refresh that
        # reads it whole (row_images.files_admitting) takes them from the cache.
        if len(written) == 1 and storage.spec().is_unpartitioned():
            key = stored_file_key(storage, written[0].file_path)
            shared_cache().keep(key, rows, share=STORED_SHARE)
    try:
        committed = transaction.commit_transaction()
    except CommitFailedException as exc:
        raise StorageCommitConflictError(f"storage moved since {planned_from}: {exc}") from exc
    snapshot_id = committed.metadata.current_snapshot_id
    if snapshot_id is not None:  # the next refresh's files_admitting plans no scan
        for data_file in written:  # as a manifest read gives it (a file's spec is not in it)
            data_file.spec_id = committed.metadata.default_spec_id
        committed_live_files(storage, planned_from, snapshot_id, replaces, written)


class _Transaction(Transaction):
    """pyiceberg's transaction, its staged metadata computed once per staged update and
    without pyiceberg's deep copy (catalog/metadata_updates.py).

    pyiceberg 0.12 re-applies every staged update to a deep copy of the table's metadata
    each time `table_metadata` is read, and one commit reads it about 18 times: profiled
    over a fleet of small refreshes, 13 % of the driver's CPU. The metadata models are
    frozen, and updates are only ever added (a new tuple), so the metadata computed for
    one tuple of updates serves every read until the next update.
    """

    _applied: tuple[object, TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        staged = self._applied
        if staged is None or staged[0] is not self._updates:
            staged = (self._updates, applied(self._table.metadata, self._updates))
            self._applied = staged
        return staged[1]


class _Unregistered:
    """A snapshot producer the transaction does not know as one.

    pyiceberg 0.12 retries a failed commit by re-basing registered producers onto the
    table's new main, which would apply a delta twice. Unregistered, the commit keeps its
    assertion that main is still at the planned snapshot, and a conflict simply fails.
    """

    def commit(self) -> None:
        UpdateTableMetadata.commit(self)  # type: ignore[arg-type]


class _AppendFiles(_Unregistered, _MergeAppendFiles):
    """pyiceberg's merging append, merging on unless the table says otherwise.

    A rows MV's refresh appends one manifest; pyiceberg's fast append (and its merging
    append by default) keeps every one, so the manifest list each commit writes, and each
    scan plans, grew by one entry per refresh for as long as the daemon ran (written in
    Python: at ~270 entries, about 40 % of such a refresh). Merged as Iceberg's Java
    writers merge by default: once `commit.manifest.min-count-to-merge` manifests (100)
    pile up, they become one. `commit.manifest-merge.enabled=false` on the storage table
    turns it off.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._merge_enabled = property_as_bool(
            self._transaction.table_metadata.properties,
            TableProperties.MANIFEST_MERGE_ENABLED,
            True,
        )


class _ReplaceFiles(_Unregistered, _OverwriteFiles):
    """pyiceberg's overwrite, minus manifests that list no live file.

    pyiceberg 0.12 records the removed files in a manifest of deleted entries and carries
    it into every later snapshot, so each rewrite reads one manifest more than the last
    (measured: 0.03 s for the first commit, 0.33 s for the fortieth).
    """

    def _existing_manifests(self) -> list[ManifestFile]:
        return [
            m
            for m in super()._existing_manifests()
            if m.has_added_files() or m.has_existing_files()
        ]


def conform_to_storage(rows: pa.Table, storage: Table) -> pa.Table:
    """Spark's Arrow rows under the storage table's own field names, types and ids."""
    target = arrow_schema(storage.schema())
    if rows.num_columns != len(target):
        raise ValueError(f"patch has {rows.num_columns} columns, storage {len(target)}")
    return rows.rename_columns(target.names).cast(target)
