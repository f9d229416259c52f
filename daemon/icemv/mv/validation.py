"""Checks a definition passes before anything is written: the query and the partitioning."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from icemv.errors import ViewSqlError
from icemv.format.partitioning import PartitionField, check_source_type
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.layout import check_view_columns, state_schema
from icemv.sql.analysis import analyse
from icemv.sql.parse import check_query_start, duplicate_names, parse_query, unnamed_output_columns
from icemv.sql.pinning import pin_sources


@dataclass(frozen=True)
class ValidatedQuery:
    sql: str
    arrow_schema: pa.Schema  # the view's columns
    state_schema: pa.Schema  # the hidden state columns after them (mv/layout.py); maybe none

    @property
    def storage_schema(self) -> pa.Schema:
        return pa.schema([*self.arrow_schema, *self.state_schema])


def validate_query(lakehouse: Lakehouse, sql: str, namespace: tuple[str, ...]) -> ValidatedQuery:
    """Parse, resolve every source, and derive the output schema (Spark analysis, no execution)."""
    check_query_start(sql)
    query = parse_query(sql)
    unnamed = unnamed_output_columns(query)
    if unnamed:
        raise ViewSqlError(
            "every output column needs a name; add AS <name> to: " + ", ".join(unnamed)
        )
    reads = CatalogReads(lakehouse)
    pinned = pin_sources(reads, sql, namespace)
    from pyspark.errors import AnalysisException, IllegalArgumentException

    try:
        schema = lakehouse.spark.sql(pinned.sql).schema
    except (AnalysisException, IllegalArgumentException) as exc:  # ParseException included
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ViewSqlError(f"Spark cannot analyse the query: {first_line}") from None
    duplicates = duplicate_names(schema.fieldNames())
    if duplicates:
        raise ViewSqlError(
            "output column names must be unique; duplicated: " + ", ".join(duplicates)
        )
    check_view_columns(schema.fieldNames())
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        arrow = to_arrow_schema(schema)
    except TypeError as exc:
        raise ViewSqlError(f"unsupported output column type: {exc}") from None
    # Storage columns are nullable: a later source change may make any of them null.
    arrow = pa.schema([field.with_nullable(True) for field in arrow])
    state = state_schema(lakehouse, analyse(reads, sql, namespace), pinned.table_pins)
    return ValidatedQuery(sql=sql, arrow_schema=arrow, state_schema=state)


def check_partitioning(schema: pa.Schema, fields: Sequence[PartitionField]) -> None:
    """Each partition column is an output column of a type its transform supports."""
    from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids

    iceberg = _pyarrow_to_schema_without_ids(schema)
    types = {field.name: field.field_type for field in iceberg.fields}
    for field in fields:
        if field.source_column not in types:
            raise ViewSqlError(f"partition column {field.source_column!r} is not an output column")
        check_source_type(field, types[field.source_column])
