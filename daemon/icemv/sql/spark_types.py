"""Spark 3.5's data types as the portability gate (sql/portable/) reasons about them.

A `SparkType` is what Spark's analyzer would give an expression: the kind, and for DECIMAL
its precision and scale (sql/decimals.py has the arithmetic rules). Columns get theirs from
the Arrow schemas of what the embedded engine reads (Iceberg's mapping: timestamptz is
Spark's TIMESTAMP, timestamp without zone TIMESTAMP_NTZ), literals as Spark parses them,
and two types meet in the type Spark widens both to (`common`), or in none (mixed kinds
Spark would cast by rules the gate does not model). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

import pyarrow as pa
from sqlglot import exp

from icemv.sql import decimals

INTEGRAL = ("tinyint", "smallint", "int", "bigint")
FLOATING = ("float", "double")
_DECIMAL_OF_INTEGRAL = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
_SQL = {
    "boolean": "BOOLEAN", "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INT",
    "bigint": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "string": "STRING",
    "binary": "BINARY", "date": "DATE", "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
}  # fmt: skip


@dataclass(frozen=True)
class SparkType:
    kind: str  # boolean, tinyint .. bigint, float, double, decimal, string, binary, date,
    # timestamp, timestamp_ntz, null (an untyped NULL literal), complex (array, map, struct)
    precision: int = 0
    scale: int = 0

    @property
    def integral(self) -> bool:
        return self.kind in INTEGRAL

    @property
    def floating(self) -> bool:
        return self.kind in FLOATING

    @property
    def numeric(self) -> bool:
        return self.integral or self.floating or self.kind == "decimal"

    def decimal(self) -> decimals.DecimalType:
        """As a DECIMAL: itself, or an integral type's exact DECIMAL(n, 0)."""
        if self.kind == "decimal":
            return decimals.DecimalType(self.precision, self.scale)
        return decimals.DecimalType(_DECIMAL_OF_INTEGRAL[self.kind], 0)

    def sql(self) -> str:
        if self.kind == "decimal":
            return f"DECIMAL({self.precision}, {self.scale})"
        return _SQL[self.kind]

    def build(self) -> exp.DataType:
        return built(self.sql())

    def describe(self) -> str:
        return self.sql().lower() if self.kind in _SQL or self.kind == "decimal" else self.kind


def built(text: str, dialect: str | None = "spark") -> exp.DataType:
    """The type `text` names, parsed once per process: a copy of the parsed tree (a node
    belongs to one tree; copying is several times cheaper than parsing)."""
    return _parsed(text, dialect).copy()


@lru_cache(maxsize=512)
def _parsed(text: str, dialect: str | None) -> exp.DataType:
    return exp.DataType.build(text, dialect=dialect)


def decimal_type(value: decimals.DecimalType) -> SparkType:
    return SparkType("decimal", value.precision, value.scale)


BOOLEAN = SparkType("boolean")
TINYINT = SparkType("tinyint")
INT = SparkType("int")
BIGINT = SparkType("bigint")
DOUBLE = SparkType("double")
STRING = SparkType("string")
DATE = SparkType("date")
TIMESTAMP = SparkType("timestamp")
TIMESTAMP_NTZ = SparkType("timestamp_ntz")
NULL = SparkType("null")


def of_arrow(arrow: pa.DataType) -> SparkType:
    """The Spark type of a column Iceberg hands over as this Arrow type."""
    if pa.types.is_boolean(arrow):
        return BOOLEAN
    if pa.types.is_integer(arrow):
        return SparkType({8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}[arrow.bit_width])
    if pa.types.is_float32(arrow):
        return SparkType("float")
    if pa.types.is_float64(arrow):
        return DOUBLE
    if pa.types.is_decimal(arrow):
        return SparkType("decimal", arrow.precision, arrow.scale)
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return STRING
    if pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow):
        return SparkType("binary")
    if pa.types.is_date32(arrow):
        return DATE
    if pa.types.is_timestamp(arrow):
        return TIMESTAMP if arrow.tz is not None else SparkType("timestamp_ntz")
    if pa.types.is_null(arrow):
        return NULL
    return SparkType("complex")


def of_literal(node: exp.Literal) -> SparkType:
    """A literal as Spark types it: '...' STRING, 12 INT (BIGINT past 32 bits), 1.5
    DECIMAL(2, 1), 1e10 DOUBLE."""
    if node.is_string:
        return STRING
    text = node.this
    if "e" in text.lower():
        return DOUBLE
    if "." in text:  # Java's BigDecimal: the unscaled digits, at least the scale
        parts = Decimal(text).as_tuple()
        scale = -int(parts.exponent)
        return SparkType("decimal", max(len(parts.digits), scale), scale)
    value = int(text)
    if -(2**31) <= value < 2**31:
        return INT
    if -(2**63) <= value < 2**63:
        return BIGINT
    return SparkType("decimal", len(text.lstrip("-")), 0)


def common(a: SparkType, b: SparkType) -> SparkType | None:
    """The type Spark widens both to (comparisons, CASE, COALESCE, IN, UNION), or None."""
    if a == b:
        return a
    if a.kind == "null":
        return b
    if b.kind == "null":
        return a
    if a.integral and b.integral:
        return a if INTEGRAL.index(a.kind) >= INTEGRAL.index(b.kind) else b
    if a.numeric and b.numeric:
        if a.floating or b.floating:
            return DOUBLE
        x, y = a.decimal(), b.decimal()
        scale = max(x.scale, y.scale)
        whole = max(x.precision - x.scale, y.precision - y.scale)
        # Bounded at 38 digits: a value with more integer digits does not fit (Spark's
        # cast gives NULL; the gate's casts raise, and Spark computes it).
        return SparkType("decimal", min(whole + scale, decimals.MAX_PRECISION), scale)
    return None
