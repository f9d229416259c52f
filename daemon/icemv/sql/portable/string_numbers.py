"""Spark's cast of a string to an integer type (non-ANSI), as a DuckDB tree.

Spark 3.5 (`UTF8String.toInt` / `toLong`, which TINYINT and SMALLINT narrow) skips the
bytes 0x00-0x20 and 0x7F at both ends, takes an optional sign, then digits, and after a
`.` digits only, which it drops: '1.9' is 1, '-.5' and '.' are 0 (truncation, where
DuckDB's cast rounds). Anything else (a blank string, a sign alone, other blanks such as
U+00A0, an exponent, hex) is NULL, and so is a value past the type's range (where DuckDB's
cast raises). The tree matches the whole string with that grammar, then casts the sign, a
`0` and the integer digits with TRY_CAST: NULL past the range. Spark compares an integer
with a string by casting the string so (`TypeCoercion.findCommonTypeForBinaryComparison`).

The function corpus (tests/test_function_corpus.py) checks casts and comparisons of
generated strings against Spark.
"""

from __future__ import annotations

from sqlglot import exp

from icemv.sql.portable.common import duckdb_type
from icemv.sql.spark_types import SparkType

_BLANK = r"[\x00-\x20\x7f]*"
# The whole string as Spark reads a number into an integer type.
_INTEGRAL = rf"^{_BLANK}[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]*){_BLANK}$"
# Its sign (group 1) and integer digits (group 2).
_PARTS = rf"^{_BLANK}([+-]?)([0-9]*)"


def integral_of_string(value: exp.Expr, target: SparkType) -> exp.Expr:
    """`CAST(value AS target)` of a string `value` (rendered for DuckDB) as Spark's."""
    assert target.integral

    def part(group: int) -> exp.Expr:
        return exp.RegexpExtract(
            this=value.copy(),
            expression=exp.Literal.string(_PARTS),
            group=exp.Literal.number(group),
        )

    number = exp.DPipe(
        this=exp.DPipe(this=part(1), expression=exp.Literal.string("0")), expression=part(2)
    )
    matches = exp.RegexpLike(this=value.copy(), expression=exp.Literal.string(_INTEGRAL))
    return exp.Case(
        ifs=[exp.If(this=matches, true=exp.TryCast(this=number, to=duckdb_type(target)))]
    )
