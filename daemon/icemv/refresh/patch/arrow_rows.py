"""An insert-only delta of a filter / projection view, computed in Arrow on the driver.

The appended source rows (joined with unchanged tables: arrow_select.py) pass the view's
WHERE and are projected by its SELECT list: the
rows to append to storage, committed by the driver like any small append patch. Compiled
against the source's and the storage table's Arrow schemas at plan time: each output's
type must be the storage column's, so the Arrow result is what Spark would have written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from icemv.errors import ArrowUnsupportedError
from icemv.refresh.patch.arrow_select import ArrowSelect, compile_select
from icemv.refresh.patch.model import DriverPatch
from icemv.sql.analysis import RowsAnalysis
from icemv.sql.arrow_expr import ArrowExpr


@dataclass(frozen=True)
class ArrowRowsDelta:
    select: ArrowSelect
    outputs: tuple[ArrowExpr, ...]
    names: tuple[str, ...]  # storage column names, in order

    def patch(self, appended: pa.Table) -> DriverPatch:
        rows = self.select.filtered(appended)
        columns = [o.evaluate(rows) for o in self.outputs]
        table = pa.Table.from_arrays(columns, names=list(self.names))
        return DriverPatch(table.num_rows, 0, table)


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
