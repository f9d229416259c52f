"""Which equality deletes the change read pushes down, and what they leave to read.

An equality delete names key values. The Spark change read (refresh/changes/reader.py)
matches them against the data files live before the range; a small delete on integer or
string columns is also pushed into that read as a filter on its values, so Iceberg plans
only the files, and Parquet reads only the row groups, whose column bounds allow them.
Policy `auto` weighs the same read: `equality_scan_records` reads the small delete file
on the driver and sums the records of the data files its values may be in, from the
manifests' column bounds (pyiceberg's planner), before anything is read with Spark.
"""

from __future__ import annotations

import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, In, IsNull, Or
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import ManifestGroupPlanner, Table
from pyiceberg.types import IntegerType, LongType, StringType

# An equality delete of at most this many rows, on columns of these types, is pushed down;
# a larger one (or one on other types, whose values py4j does not carry as Iceberg
# literals) is matched against every data file it applies to, whole.
PUSHDOWN_MAX_ROWS = 1000
PUSHDOWN_TYPES = (IntegerType, LongType, StringType)


def pushable(table: Table, delete: DataFile) -> bool:
    """Whether the change read pushes this equality-delete file's values down."""
    schema = table.schema()
    return (
        delete.record_count <= PUSHDOWN_MAX_ROWS
        and delete.file_format == FileFormat.PARQUET
        and all(isinstance(schema.find_type(i), PUSHDOWN_TYPES) for i in delete.equality_ids or ())
    )


def values_filter(values: dict[str, set[object]]) -> BooleanExpression:
    """True where every named column holds one of its values (None: NULL); each column
    has at least one."""
    result: BooleanExpression = AlwaysTrue()
    for column, column_values in values.items():
        present = {v for v in column_values if v is not None}
        terms: list[BooleanExpression] = [IsNull(term=column)] if None in column_values else []
        if present:
            terms.append(In(term=column, literals=present))
        result = And(result, terms[0] if len(terms) == 1 else Or(*terms))
    return result


def equality_scan_records(table: Table, delete: DataFile, old_snapshot_id: int) -> int:
    """Records of the data files live at the old snapshot that a pushable equality
    delete's values may be in (by partition and column bounds)."""
    schema = table.schema()
    columns = [schema.find_column_name(i) for i in delete.equality_ids or ()]
    with table.io.new_input(delete.file_path).open() as stream:
        rows = pq.read_table(stream, columns=columns).to_pylist()
    if not rows:
        return 0
    values = {c: {row[c] for row in rows} for c in columns if c is not None}
    snapshot = table.snapshot_by_id(old_snapshot_id)
    if snapshot is None:
        return 0
    planner = ManifestGroupPlanner(table.metadata, table.io, row_filter=values_filter(values))
    return sum(
        entry.data_file.record_count
        for entries in planner.plan_manifest_entries(snapshot.manifests(table.io))
        for entry in entries
        if entry.data_file.content == DataFileContent.DATA
    )
