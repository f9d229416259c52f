"""Spark SQL functions the embedded engine computes, as a table the portability gate reads.

Each admitted function is a row: Spark's name, sqlglot's node for it (or the name of an
unparsed call), each argument's admitted Spark types and literal conditions, Spark's
result type, and the DuckDB expression over the rendered arguments that computes Spark's
value (`Function`). The gate (sql/portable/) types the arguments, checks them against the
row, renders `duckdb(...)` and casts it to the result type strictly (a value that does not
fit raises in DuckDB, and Spark computes the refresh). Each row holds only where both
engines compute the same value for every argument value; rows are proven value for value
against Spark 3.5 on generated arguments (tests/test_function_corpus.py: NULL, empty,
Unicode with combining marks and emoji, negative, zero, extreme integers, years 1 and 9999,
leap days, a DST change). A function Spark defines as a tree of others (`nvl2`, `nullif`)
is that tree (`spark_tree`), typed and rendered like any other.

The refused functions that views commonly use are listed with the reason (`REFUSED`): the
gate says it, and the docs' list (docs/concepts/embedded-engine.md) is built from both
tables. A function in neither goes to Spark as "(Spark only)".

Modules: `model` (a row), `builders` (the rows' DuckDB expressions and checks), `table`
(the rows, the refusals, the gate's lookup and the docs' list).
"""

from icemv.sql.functions.builders import (
    HALF_WAY_PATTERN,
    ascii_only,
    raising_where,
    rounded_type,
    timestamp_text,
)
from icemv.sql.functions.model import DATE_LIKE, Argument, Function, call
from icemv.sql.functions.table import (
    FUNCTIONS,
    HANDLED,
    REFUSED,
    function_of,
    function_table,
)

__all__ = ["DATE_LIKE", "FUNCTIONS", "HALF_WAY_PATTERN", "HANDLED", "REFUSED", "Argument",
           "Function", "ascii_only", "call", "function_of", "function_table", "raising_where",
           "rounded_type", "timestamp_text"]  # fmt: skip
