"""Remove deleted row images from a storage table by rewriting only the files holding them.

Rows of a rows-shaped MV have no identity: a net delta of -k for an image means "drop k
of its copies, any k". A Spark MERGE finds them by joining the whole storage table. Here
the candidate files are those whose column bounds admit some deleted image (Iceberg's
file statistics prune the rest), they are read with pyiceberg, and each file that loses a
row is replaced by its survivors, all in one snapshot with the inserted images.

A file's rows are read once per process (`files_admitting`): Iceberg data files are never
changed in place, so a path names one content for good, and the rows are kept by the
storage table's uuid, the path and the schema they were read under, in the shared read
cache; the commit that wrote a file keeps the very rows it wrote there (one file of an
unpartitioned table: exactly those rows, commit/driver.py). A file with delete files is
read every time (its rows are the file's minus the deletes of that snapshot).
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    IsNull,
    LessThanOrEqual,
    Or,
)
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, Table
from pyiceberg.types import DecimalType, DoubleType, FloatType

from icemv.errors import FullRefreshRequiredError
from icemv.refresh.commit.driver import conform_to_storage
from icemv.refresh.embedded.reads import (
    STORED_SHARE,
    live_files,
    shared_cache,
    stored_file_key,
)
from icemv.sql.decimals import WIDE_CONTEXT
from icemv.sql.net import Identity

Image = tuple[Hashable, ...]


@dataclass(frozen=True)
class RowRewrite:
    rows: pa.Table  # survivors of the replaced files, then the inserted images
    replaces: tuple[DataFile, ...]
    inserted: int
    deleted: int


def rewrite_row_images(
    storage: Table, snapshot_id: int, net: pa.Table, max_rows: int
) -> RowRewrite | None:
    """Apply `net` (storage columns + a last column of net copies) to the storage table.

    None when the files to rewrite hold more than `max_rows` rows.
    """
    copies = net.column(net.num_columns - 1).to_pylist()
    images = conform_to_storage(net.drop_columns([net.column_names[-1]]), storage)
    inserted_at = [i for i, n in enumerate(copies) for _ in range(max(n, 0))]
    inserted = images.take(pa.array(inserted_at, pa.int64()))
    doomed = Counter({image: -n for image, n in zip(_images(images), copies, strict=True) if n < 0})
    deleted = sum(doomed.values())
    if not doomed:
        return RowRewrite(inserted, (), inserted.num_rows, 0)
    negatives = images.filter(pa.array([n < 0 for n in copies]))
    files = files_admitting(storage, snapshot_id, negatives, max_rows)
    if files is None:
        return None
    survivors, replaces = [], []
    for file, rows in files:
        # Only rows each of whose exactly comparable values some deleted image has are
        # compared as Python tuples: a vectorised membership test per column first.
        found = candidates(rows, negatives)
        gone = []
        positions = found.to_pylist()
        for position, image in zip(positions, _images(rows.take(found)), strict=True):
            if doomed[image] > 0:
                doomed[image] -= 1
                gone.append(position)
        if gone:
            keep = [True] * rows.num_rows
            for position in gone:
                keep[position] = False
            survivors.append(rows.filter(pa.array(keep)))
            replaces.append(file)
    if +doomed:
        raise FullRefreshRequiredError(
            "storage-inconsistent", "the delta deletes rows the storage table does not hold"
        )
    rows = pa.concat_tables([*survivors, inserted])
    return RowRewrite(rows, tuple(replaces), inserted.num_rows, deleted)


def files_admitting(
    storage: Table, snapshot_id: int, probe: pa.Table, max_rows: int
) -> list[tuple[DataFile, pa.Table]] | None:
    """The data files (and their rows, read whole) whose column bounds may hold some row
    of `probe` (storage columns, any subset); None when they hold more than `max_rows`.
    A snapshot of one data file and no delete file gives that file, its bounds unread:
    the callers rewrite every row of the files given, touched or not, so more files
    than the keys need change only what a commit rewrites (a small table's one file).
    A file without delete files is read once per process: its rows are kept in the shared
    cache (embedded/reads.py), where the commit that wrote it may have put them already."""
    live = live_files(storage, snapshot_id)
    if live is not None:  # one file at most: read whatever its bounds say (a superset)
        tasks = [FileScanTask(f) for f in live]
    else:
        try:
            bounds = bounds_filter(probe, storage.schema())
            tasks = list(storage.scan(snapshot_id=snapshot_id, row_filter=bounds).plan_files())
        except ValueError:  # a value pyiceberg cannot compare with the column: every file
            tasks = list(storage.scan(snapshot_id=snapshot_id).plan_files())
    if sum(task.file.record_count for task in tasks) > max_rows:
        return None
    reader = ArrowScan(storage.metadata, storage.io, storage.schema(), AlwaysTrue())
    cache = shared_cache()

    def rows(task: FileScanTask) -> pa.Table:
        def read() -> pa.Table:
            return conform_to_storage(reader.to_table([task]), storage)

        if task.delete_files:  # its rows are the file's minus the deletes: read
            return read()
        key = stored_file_key(storage, task.file.file_path)
        return cache.piece(key, read, share=STORED_SHARE)

    return [(task.file, rows(task)) for task in tasks]


def candidates(rows: pa.Table, negatives: pa.Table) -> pa.Array:
    """Positions of the rows that may equal a deleted image: on every column of a type
    whose Arrow equality is Python's (no floating point), a value some image has."""
    mask = None
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        if not any(check(column.type) for check in _EXACT):
            continue
        values = negatives.column(name).combine_chunks()
        try:
            hit = pc.is_in(column, value_set=values, skip_nulls=False)
        except pa.ArrowNotImplementedError:  # no Arrow kernel for this type: not a filter
            continue
        mask = hit if mask is None else pc.and_(mask, hit)
    if mask is None:
        return pa.array(range(rows.num_rows), pa.int64())
    return pc.indices_nonzero(mask)


def _images(rows: pa.Table) -> list[Image]:
    """Each row as a tuple equal to another's exactly when the rows are the same values
    (sql/net.py's identity): NULLs alike (Python's None == None, like `<=>`), floating
    point by its bits (-0.0 is not 0.0), every NaN one value."""
    columns = []
    for column in rows.columns:
        values = column.to_pylist()
        if pa.types.is_floating(column.type):
            values = [_bits(v) for v in values]
        columns.append(values)
    if not columns:
        return [()] * rows.num_rows
    return list(zip(*columns, strict=True))


def _bits(value: float | None) -> bytes | None:
    if value is None:
        return None
    return b"nan" if math.isnan(value) else struct.pack("<d", value)


def identity_columns(schema: Schema, names: Sequence[str]) -> list[tuple[str, Identity]]:
    """Each storage column with how it enters a row's identity (sql/net.py)."""

    def identity(field_type: object) -> Identity:
        if isinstance(field_type, FloatType | DoubleType):
            return "float"
        return "value" if getattr(field_type, "is_primitive", False) else "complex"

    kinds = {f.name: identity(f.field_type) for f in schema.fields}
    return [(name, kinds.get(name, "complex")) for name in names]


# Bounds prune files only on types whose order Iceberg's statistics and Python agree on.
_PRUNABLE = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string,
             pa.types.is_date, pa.types.is_decimal)  # fmt: skip


# Arrow's and Python's equality agree on these (NULL matching NULL, as `<=>` does).
_EXACT = (*_PRUNABLE, pa.types.is_boolean)


def bounds_filter(negatives: pa.Table, schema: Schema | None = None) -> BooleanExpression:
    """Rows that may equal one of `negatives`: per column, within its min..max or NULL.
    With the storage `schema`, a DECIMAL bound of another scale is widened to the
    column's (pyiceberg compares a DECIMAL only at its column's scale)."""
    terms: list[BooleanExpression] = []
    for name, column in zip(negatives.column_names, negatives.columns, strict=True):
        if not any(check(column.type) for check in _PRUNABLE):
            continue
        values = [v for v in column.to_pylist() if v is not None]
        has_null = len(values) < len(column)
        if not values:
            terms.append(IsNull(term=name))
            continue
        low, high = min(values), max(values)
        field = schema.find_field(name) if schema is not None else None
        if field is not None and isinstance(field.field_type, DecimalType):
            step = Decimal(1).scaleb(-field.field_type.scale)
            low = Decimal(low).quantize(step, rounding=ROUND_FLOOR, context=WIDE_CONTEXT)
            high = Decimal(high).quantize(step, rounding=ROUND_CEILING, context=WIDE_CONTEXT)
        term: BooleanExpression = And(
            GreaterThanOrEqual(term=name, value=low),
            LessThanOrEqual(term=name, value=high),
        )
        terms.append(Or(IsNull(term=name), term) if has_null else term)
    bounds: BooleanExpression = AlwaysTrue()
    for term in terms:
        bounds = And(bounds, term)
    return bounds
