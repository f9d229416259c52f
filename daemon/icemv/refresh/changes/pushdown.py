"""Which equality deletes the change read pushes down, and what they leave to read.

An equality delete names key values. The Spark change read (refresh/changes/reader.py)
matches them against the data files live before the range; a small delete on integer or
string columns is also pushed into that read as a filter on its values, so Iceberg plans
only the files, and Parquet reads only the row groups, whose column bounds allow them.
Iceberg's metrics evaluators take an IN list of more than `IN_LIMIT` values as "might
match", so more values are pushed as at most `RANGES` value ranges, cut at the widest gaps
between the sorted integers (one range for strings): exact enough for keys that cluster.
Policy `auto` weighs the same read: `equality_candidates` reads the small delete file
on the driver and finds the data files its values may be in, from the manifests' column
bounds (pyiceberg's planner), before anything is read; the Arrow read
(embedded/changes.py) reads those same files.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.parquet as pq
from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThanOrEqual,
    Or,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import ManifestGroupPlanner, Table
from pyiceberg.types import IntegerType, LongType, StringType

# An equality delete of at most this many rows, on columns of these types, is pushed down;
# a larger one (or one on other types, whose values py4j does not carry as Iceberg
# literals) is matched against every data file it applies to, whole.
PUSHDOWN_MAX_ROWS = 100_000
PUSHDOWN_TYPES = (IntegerType, LongType, StringType)
IN_LIMIT = 200  # Iceberg's (Java and pyiceberg) `IN_PREDICATE_LIMIT`
RANGES = 16


@dataclass(frozen=True)
class ColumnValues:
    """What rows of one column the filter keeps: NULL, these values, or these ranges."""

    null: bool
    values: tuple[object, ...] = ()  # at most IN_LIMIT
    ranges: tuple[tuple[object, object], ...] = ()  # (low, high), both included


def column_values(values: set[object]) -> ColumnValues:
    """The filter of one column's values (None: NULL), in terms the evaluators prune by."""
    present = sorted(v for v in values if v is not None)  # type: ignore[type-var]
    null = len(present) < len(values)
    if len(present) <= IN_LIMIT:
        return ColumnValues(null, tuple(present))
    if not all(isinstance(v, int) for v in present):
        return ColumnValues(null, ranges=((present[0], present[-1]),))
    integers: list[int] = present  # type: ignore[assignment]
    gaps = [i for i in range(1, len(integers)) if integers[i] - integers[i - 1] > 1]
    gaps.sort(key=lambda i: integers[i] - integers[i - 1])
    cuts = sorted(gaps[-(RANGES - 1) :]) if gaps else []
    starts, ends = [0, *cuts], [*cuts, len(present)]
    return ColumnValues(
        null, ranges=tuple((present[a], present[b - 1]) for a, b in zip(starts, ends, strict=True))
    )


def pushable(table: Table, delete: DataFile) -> bool:
    """Whether the change read pushes this equality-delete file's values down."""
    schema = table.schema()
    return (
        delete.record_count <= PUSHDOWN_MAX_ROWS
        and delete.file_format == FileFormat.PARQUET
        and all(isinstance(schema.find_type(i), PUSHDOWN_TYPES) for i in delete.equality_ids or ())
    )


def values_filter(values: dict[str, set[object]]) -> BooleanExpression:
    """True where every named column holds one of its values (None: NULL), or lies in the
    ranges that stand for them (`column_values`); each column has at least one."""
    result: BooleanExpression = AlwaysTrue()
    for column, column_value_set in values.items():
        kept = column_values(column_value_set)
        terms: list[BooleanExpression] = [IsNull(term=column)] if kept.null else []
        if kept.values:
            terms.append(In(term=column, literals=set(kept.values)))
        terms += [
            And(
                GreaterThanOrEqual(term=column, value=low), LessThanOrEqual(term=column, value=high)
            )
            for low, high in kept.ranges
        ]
        term = terms[0]
        for other in terms[1:]:
            term = Or(term, other)
        result = And(result, term)
    return result


def equality_candidates(table: Table, delete: DataFile, old_snapshot_id: int) -> dict[str, int]:
    """The data files live at the old snapshot that a pushable equality delete's values
    may be in (by partition and column bounds), with their records."""
    schema = table.schema()
    columns = [schema.find_column_name(i) for i in delete.equality_ids or ()]
    with table.io.new_input(delete.file_path).open() as stream:
        rows = pq.read_table(stream, columns=columns).to_pylist()
    if not rows:
        return {}
    values = {c: {row[c] for row in rows} for c in columns if c is not None}
    snapshot = table.snapshot_by_id(old_snapshot_id)
    if snapshot is None:
        return {}
    planner = ManifestGroupPlanner(table.metadata, table.io, row_filter=values_filter(values))
    return {
        entry.data_file.file_path: entry.data_file.record_count
        for entries in planner.plan_manifest_entries(snapshot.manifests(table.io))
        for entry in entries
        if entry.data_file.content == DataFileContent.DATA
    }
