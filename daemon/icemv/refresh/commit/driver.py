"""Commit a small storage patch from the driver with pyiceberg, in one snapshot.

A Spark write costs a job of its own plus a MERGE's planning (0.17 s for an append,
0.8-1.1 s for a MERGE into a 1,825-row table, measured here); a patch of a few thousand rows
collected as Arrow and written by pyiceberg costs tens of milliseconds. The commit
asserts that main is still at the snapshot the refresh was planned from, so a delta is
applied exactly once without a private branch.

The one module that uses pyiceberg internals (`_MergeAppendFiles`, `_OverwriteFiles`,
`_dataframe_to_data_files` and the pieces of its writer `_data_files` keeps per table,
`UpdateTableMetadata.commit`, `Transaction._updates`): they
tie icemv to pyiceberg 0.12.*, so they stay fenced here (ruff SLF001 is allowed in this
file only).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io.pyarrow import StatisticsCollector, data_file_statistics_from_parquet_metadata
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.schema import sanitize_column_names
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.locations import LocationProvider, load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import UpdateTableMetadata
from pyiceberg.table.update.snapshot import _MergeAppendFiles, _OverwriteFiles
from pyiceberg.typedef import Record
from pyiceberg.types import PrimitiveType
from pyiceberg.utils.properties import property_as_bool, property_as_int

from icemv.catalog.arrow_schemas import arrow_schema
from icemv.catalog.metadata_updates import applied
from icemv.errors import StorageCommitConflictError
from icemv.refresh.embedded.reads import (
    STORED_SHARE,
    committed_live_files,
    shared_cache,
    stored_file_key,
)
from icemv.sql.memo import Memo


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
            written = _data_files(transaction.table_metadata, rows, storage, producer.commit_uuid)
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


def _data_files(
    metadata: TableMetadata, rows: pa.Table, storage: Table, write_uuid: uuid.UUID
) -> list[DataFile]:
    """`rows` (conformed to the storage) as data files of the table: one file written here
    when the table is unpartitioned, its columns primitive and the rows under its target
    file size (a small patch), else pyiceberg's writer.

    pyiceberg's `_dataframe_to_data_files` works out afresh, for every file it writes,
    what the table's schema and properties fix: the schema the rows are written under
    (converted from Arrow, sanitized, projected with field ids), the Parquet options and
    the statistics to keep: 1.3 ms of a one-file commit here, against 0.6 ms for the
    same file written with those kept (`_FileLayout`). The file is the one pyiceberg
    writes (its name, schema, options and statistics: its own functions build them).
    """
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    layout = _file_layout(metadata)
    if layout is None or rows.nbytes > layout.target_size:
        return list(_dataframe_to_data_files(metadata, rows, storage.io, write_uuid=write_uuid))
    if rows.schema != layout.arrow:
        rows = rows.rename_columns(layout.arrow.names).cast(layout.arrow)
    path = layout.locations.new_data_location(f"00000-0-{write_uuid}.parquet")
    output = storage.io.new_output(path)
    with output.create(overwrite=True) as stream:
        writer = pq.ParquetWriter(
            stream, schema=layout.arrow, store_decimal_as_integer=True, **layout.options
        )
        writer.write_table(rows, row_group_size=layout.row_group_size)
        writer.close()
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=writer.writer.metadata,
        stats_columns=layout.statistics,
        parquet_column_mapping=layout.column_ids,
    )
    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        file_size_in_bytes=len(output),
        sort_order_id=None,
        spec_id=metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )
    return [data_file]


@dataclass(frozen=True)
class _FileLayout:
    """What a table's schema, properties and location fix for each data file written."""

    arrow: pa.Schema  # the rows as written: sanitized names, field ids
    options: dict[str, Any]  # the Parquet writer's, from the table's properties
    row_group_size: int
    target_size: int
    statistics: dict[int, StatisticsCollector]
    column_ids: dict[str, int]
    locations: LocationProvider


_layouts: Memo[tuple[_FileLayout | None]] = Memo(256)  # (None,): pyiceberg writes


def _file_layout(metadata: TableMetadata) -> _FileLayout | None:
    """The table's `_FileLayout`, kept per process; None where pyiceberg writes the
    files (a partitioned table, nested columns, Parquet not the write format)."""
    from pyiceberg.io.pyarrow import (
        ParquetFormatModel,
        _get_parquet_writer_kwargs,
        _to_requested_schema,
        compute_statistics_plan,
        parquet_path_to_id_mapping,
    )

    schema, properties = metadata.schema(), metadata.properties
    key = (schema.schema_id, schema.fields, tuple(sorted(properties.items())),
           metadata.location, metadata.default_spec_id)  # fmt: skip
    kept = _layouts.get(key)
    if kept is not None:
        return kept[0]
    layout = None
    file_format = properties.get(
        TableProperties.WRITE_FILE_FORMAT, TableProperties.WRITE_FILE_FORMAT_DEFAULT
    )
    primitive = all(isinstance(f.field_type, PrimitiveType) for f in schema.fields)
    if metadata.spec().is_unpartitioned() and primitive and file_format.lower() == "parquet":
        file_schema = sanitize_column_names(schema)
        empty = pa.RecordBatch.from_pylist([], schema=arrow_schema(schema))
        arrow = _to_requested_schema(
            file_schema, schema, empty, include_field_ids=True,
            format_model=ParquetFormatModel(),
        ).schema  # fmt: skip
        layout = _FileLayout(
            arrow=arrow,
            options=_get_parquet_writer_kwargs(properties),
            row_group_size=property_as_int(properties, TableProperties.PARQUET_ROW_GROUP_LIMIT,
                                           TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT)
            or TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT,
            target_size=property_as_int(properties, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                                        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT)
            or TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
            statistics=compute_statistics_plan(file_schema, properties),
            column_ids=parquet_path_to_id_mapping(file_schema),
            locations=load_location_provider(metadata.location, properties),
        )  # fmt: skip
    _layouts.put(key, (layout,))
    return layout


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
    """pyiceberg's overwrite, minus manifests that list no live file, its added and
    deleted entries in one manifest.

    pyiceberg 0.12 records the removed files in a manifest of deleted entries and carries
    it into every later snapshot, so each rewrite reads one manifest more than the last
    (measured: 0.03 s for the first commit, 0.33 s for the fortieth).

    It also writes the added files and the deleted ones to two manifests. A manifest may
    hold entries of every status (Iceberg's Java writers mix them when they merge
    manifests; every reader here reads each entry's status), so one manifest holds
    both where they share the table's partition spec: one file less per commit (0.4 ms
    of a small aggregate refresh's 6 ms commit here). Once its added files are replaced
    too, nothing in it is live and it goes (above).
    """

    def _existing_manifests(self) -> list[ManifestFile]:
        return [
            m
            for m in super()._existing_manifests()
            if m.has_added_files() or m.has_existing_files()
        ]

    def _manifests(self) -> list[ManifestFile]:
        spec = self._transaction.table_metadata.spec()
        self._build_delete_files_partition_predicate()
        deleted = self._deleted_entries()
        if not self._added_data_files or any(e.data_file.spec_id != spec.spec_id for e in deleted):
            return super()._manifests()
        with self.new_manifest_writer(spec=spec) as writer:
            for data_file in self._added_data_files:
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=self._snapshot_id,
                        sequence_number=None,
                        file_sequence_number=None,
                        data_file=data_file,
                    )
                )
            for entry in deleted:
                writer.add_entry(entry)
        written = writer.to_manifest_file()
        return self._process_manifests([written, *self._existing_manifests()])


def conform_to_storage(rows: pa.Table, storage: Table) -> pa.Table:
    """Spark's Arrow rows under the storage table's own field names, types and ids."""
    target = arrow_schema(storage.schema())
    if rows.num_columns != len(target):
        raise ValueError(f"patch has {rows.num_columns} columns, storage {len(target)}")
    return rows.rename_columns(target.names).cast(target)
