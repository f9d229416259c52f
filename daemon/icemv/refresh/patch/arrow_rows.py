"""The delta of a filter / projection view, computed in Arrow on the driver.

The change rows (appended or signed; joined with unchanged tables: arrow_select.py) pass
the view's WHERE and are projected by its SELECT list. Appended rows are the rows to
append to storage, committed by the driver like any small append patch.
Signed change rows (refresh/changes/arrow_changes.py) are netted on the view's columns
(a row deleted and re-added as it was cancels); each deleted row removes one identical
stored row (compared exactly: NULLs alike, floats by their bits), rewriting the storage
files that hold them (found by the rows' bounds) with their other rows, in the same
driver commit as the inserted rows. Compiled against the source's and the storage
table's Arrow schemas at plan time: each output's type must be the storage column's, so
the Arrow result is what Spark would have written.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from icemv.errors import ArrowUnsupportedError
from icemv.refresh.changes.arrow_changes import cancel_moved
from icemv.refresh.commit.driver import conform_to_storage
from icemv.refresh.patch.arrow_select import ArrowSelect, compile_select
from icemv.refresh.patch.model import DriverPatch
from icemv.refresh.patch.row_images import bounds_filter, candidates
from icemv.sql.analysis import RowsAnalysis
from icemv.sql.arrow_expr import ArrowExpr
from icemv.sql.names import WEIGHT


@dataclass(frozen=True)
class ArrowRowsDelta:
    select: ArrowSelect
    outputs: tuple[ArrowExpr, ...]
    names: tuple[str, ...]  # storage column names, in order

    def projected(self, changed: pa.Table) -> pa.Table:
        """The change rows that pass the WHERE, as the view's columns (and `WEIGHT`, when
        the rows carry one)."""
        rows = self.select.filtered(changed)
        columns = [o.evaluate(rows) for o in self.outputs]
        table = pa.Table.from_arrays(columns, names=list(self.names))
        if WEIGHT not in rows.column_names:  # appended rows
            return table
        return table.append_column(WEIGHT, rows.column(WEIGHT))

    def patch(
        self, changed: pa.Table, storage: Table, snapshot_id: int, max_rows: int
    ) -> DriverPatch:
        table = self.projected(changed)
        if WEIGHT not in table.column_names:  # appended rows
            return DriverPatch(table.num_rows, 0, table)
        net = cancel_moved(table)
        weight = net.column(WEIGHT)
        inserted = conform_to_storage(_copies(net.filter(pc.greater(weight, 0))), storage)
        deleted = net.filter(pc.less(weight, 0))
        if deleted.num_rows == 0:
            return DriverPatch(inserted.num_rows, 0, inserted)
        wanted: Counter[tuple[Hashable, ...]] = Counter()
        for row, count in zip(
            _exact(deleted.drop_columns([WEIGHT])), _counts(deleted), strict=True
        ):
            wanted[row] += count  # identical rows may come apart (not netted: one sign only)
        names = list(self.names)
        probe = deleted.drop_columns([WEIGHT])

        def hit(stored: pa.Table) -> pa.Array:
            rows = stored.select(names)
            # Only rows whose exactly comparable values some deleted row has are compared
            # as Python tuples: a vectorised membership test per column first.
            found = candidates(rows, probe)
            gone = []
            for position, row in zip(found.to_pylist(), _exact(rows.take(found)), strict=True):
                if wanted[row] > 0:
                    wanted[row] -= 1
                    gone.append(position)
            every = pc.subtract(
                pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), len(rows))), 1
            )
            return pc.is_in(every, value_set=pa.array(gone, pa.int64()))

        found = stored_rows(storage, snapshot_id, probe, max_rows, hit)
        if +wanted:  # a deleted row the storage does not hold: Spark's MERGE decides
            raise ArrowUnsupportedError("a deleted row not found in storage")
        content = pa.concat_tables([*found.survivors, inserted])
        return DriverPatch(inserted.num_rows, found.matched.num_rows, content, found.replaces)


def _counts(rows: pa.Table) -> list[int]:
    return [-w for w in rows.column(WEIGHT).to_pylist()]


def _copies(rows: pa.Table) -> pa.Table:
    """Each row `WEIGHT` times (positive weights), without the weight."""
    weights = rows.column(WEIGHT).to_pylist()
    plain = rows.drop_columns([WEIGHT])
    if all(w == 1 for w in weights):
        return plain
    return plain.take(pa.array([i for i, w in enumerate(weights) for _ in range(w)], pa.int64()))


def _exact(table: pa.Table) -> list[tuple[Hashable, ...]]:
    """Each row as a tuple that equals another exactly when the rows are the same values:
    NULLs alike, floats by their bits (-0.0 is not 0.0, NaN is NaN)."""
    columns = []
    for column in table.columns:
        values = column.to_pylist()
        if pa.types.is_floating(column.type):
            values = [None if v is None else struct.pack("<d", v) for v in values]
        columns.append(values)
    if not columns:
        return [()] * table.num_rows
    return list(zip(*columns, strict=True))


def tuples(table: pa.Table) -> list[tuple[Hashable, ...]]:
    # Python equality is null-safe (None == None), as the MERGE's `<=>`.
    if table.num_columns == 0:
        return [()] * table.num_rows
    return list(zip(*(c.to_pylist() for c in table.columns), strict=True))


@dataclass(frozen=True)
class Stored:
    matched: pa.Table  # the stored rows hit
    survivors: list[pa.Table]  # the other rows of the files holding them
    replaces: tuple[DataFile, ...]  # those files


def stored_rows(
    storage: Table,
    snapshot_id: int,
    probe: pa.Table,
    max_rows: int,
    hit: Callable[[pa.Table], pa.Array],
) -> Stored:
    """The stored rows `hit` picks (a mask over a file's rows) among the files whose
    bounds may hold `probe`'s rows (storage columns), read whole with pyiceberg, and those
    files' other rows; more than `max_rows` rows in them: ArrowUnsupportedError."""
    scan = storage.scan(snapshot_id=snapshot_id, row_filter=bounds_filter(probe))
    tasks = list(scan.plan_files())
    if sum(task.file.record_count for task in tasks) > max_rows:
        raise ArrowUnsupportedError("the storage files to rewrite are too large")
    reader = ArrowScan(storage.metadata, storage.io, storage.schema(), AlwaysTrue())
    hits, survivors, replaces = [], [], []
    for task in tasks:
        rows = conform_to_storage(reader.to_table([task]), storage)
        mask = hit(rows)
        if pc.any(mask).as_py():
            hits.append(rows.filter(mask))
            survivors.append(rows.filter(pc.invert(mask)))
            replaces.append(task.file)
    matched = pa.concat_tables(hits) if hits else storage.schema().as_arrow().empty_table()
    return Stored(matched, survivors, tuple(replaces))


def compile_rows_delta(
    analysis: RowsAnalysis,
    source: pa.Schema,
    storage: pa.Schema,
    dimensions: Mapping[str, pa.Schema] | None = None,
) -> ArrowRowsDelta:
    """The delta over `source` joined with `dimensions` (arrow_select.py); the caller
    checked that the delta is not keyed for the sources that moved."""
    select = compile_select(analysis.query, source, dimensions)
    projections = list(analysis.query.expressions)
    outputs = tuple(select.compile(p) for p in projections)
    check_types(outputs, storage)
    return ArrowRowsDelta(select, outputs, tuple(storage.names))


def same_type(computed: pa.DataType, stored: pa.DataType) -> bool:
    """Arrow's string and large string are one Iceberg type; everything else must match."""
    strings = (pa.types.is_string, pa.types.is_large_string)
    if any(s(computed) for s in strings) and any(s(stored) for s in strings):
        return True
    return bool(computed == stored or pa.types.is_null(computed))


def check_types(outputs: Sequence[ArrowExpr], storage: pa.Schema) -> None:
    """Each output has its storage column's type (else Spark's typing may differ)."""
    if len(outputs) != len(storage):
        raise ArrowUnsupportedError(f"{len(outputs)} outputs for {len(storage)} storage columns")
    for output, column in zip(outputs, storage, strict=True):
        if not same_type(output.type, column.type):
            raise ArrowUnsupportedError(
                f"column {column.name}: computed {output.type}, stored {column.type}"
            )
