"""Does a source still have the columns an MV's SQL reads? Catalog metadata only, no Spark.

A source that dropped (or renamed) a column the MV reads makes every refresh fail in
Spark's analysis with a traceback. Iceberg keeps every schema a table ever had, so a
column name that some past schema of a source had, that no current source schema has,
and that the MV's SQL names, is a column the MV lost. Names compare case-insensitively,
as Spark resolves them. Only the MV's own SQL is read (not that of plain views it reads).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from pyiceberg.table import Table
from sqlglot import exp

from icemv.sql.parse import parse_query


@lru_cache(maxsize=512)
def referenced_columns(sql: str) -> frozenset[str]:
    """The column names the SQL reads, lower-cased (a function of the text: kept for the
    last 512 texts, as every refresh asks)."""
    query = parse_query(sql)
    return frozenset(column.name.lower() for column in query.find_all(exp.Column) if column.name)


def lost_columns(sql: str, sources: Iterable[Table]) -> list[str]:
    """Columns the SQL reads that its sources had once and have no more."""
    current: set[str] = set()
    past: set[str] = set()
    for table in sources:
        current |= {field.name.lower() for field in table.schema().fields}
        for schema in table.metadata.schemas:
            past |= {field.name.lower() for field in schema.fields}
    return sorted((referenced_columns(sql) & past) - current)
