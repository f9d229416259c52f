"""Remove deleted row images from a storage table by rewriting only the files holding them.

Rows of a rows-shaped MV have no identity: a net delta of -k for an image means "drop k
of its copies, any k". A Spark MERGE finds them by joining the whole storage table. Here
the candidate files are those whose column bounds admit some deleted image (Iceberg's
file statistics prune the rest), they are read with pyiceberg, and each file that loses a
row is replaced by its survivors, all in one snapshot with the inserted images.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass

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
from pyiceberg.table import Table

from icemv.errors import FullRefreshRequiredError
from icemv.refresh.commit.driver import conform_to_storage

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
    scan = storage.scan(snapshot_id=snapshot_id, row_filter=bounds_filter(negatives))
    tasks = list(scan.plan_files())
    if sum(task.file.record_count for task in tasks) > max_rows:
        return None
    reader = ArrowScan(storage.metadata, storage.io, storage.schema(), AlwaysTrue())
    survivors, replaces = [], []
    for task in tasks:
        rows = conform_to_storage(reader.to_table([task]), storage)
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
            replaces.append(task.file)
    if +doomed:
        raise FullRefreshRequiredError(
            "storage-inconsistent", "the delta deletes rows the storage table does not hold"
        )
    rows = pa.concat_tables([*survivors, inserted])
    return RowRewrite(rows, tuple(replaces), inserted.num_rows, deleted)


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
    # Python equality is null-safe (None == None), like the `<=>` the MERGE path uses.
    return list(zip(*(column.to_pylist() for column in rows.columns), strict=True))


# Bounds prune files only on types whose order Iceberg's statistics and Python agree on.
_PRUNABLE = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string,
             pa.types.is_date, pa.types.is_decimal)  # fmt: skip


# Arrow's and Python's equality agree on these (NULL matching NULL, as `<=>` does).
_EXACT = (*_PRUNABLE, pa.types.is_boolean)


def bounds_filter(negatives: pa.Table) -> BooleanExpression:
    """Rows that may equal one of `negatives`: per column, within its min..max or NULL."""
    terms: list[BooleanExpression] = []
    for name, column in zip(negatives.column_names, negatives.columns, strict=True):
        if not any(check(column.type) for check in _PRUNABLE):
            continue
        values = [v for v in column.to_pylist() if v is not None]
        has_null = len(values) < len(column)
        if not values:
            terms.append(IsNull(term=name))
            continue
        term: BooleanExpression = And(
            GreaterThanOrEqual(term=name, value=min(values)),
            LessThanOrEqual(term=name, value=max(values)),
        )
        terms.append(Or(IsNull(term=name), term) if has_null else term)
    bounds: BooleanExpression = AlwaysTrue()
    for term in terms:
        bounds = And(bounds, term)
    return bounds
