"""sql/arrow_expr.py: each construct against the value Spark gives, NULLs, and refusals."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
import pytest
import sqlglot

from icemv.errors import ArrowUnsupportedError
from icemv.sql.arrow_expr import common_type, compile_expr

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
ROWS = pa.table(
    {
        "i": pa.array([1, 2, None, 4], pa.int32()),
        "l": pa.array([10, None, 30, 2**62], pa.int64()),
        "f": pa.array([1.5, None, -2.0, 0.0], pa.float64()),
        "s": pa.array(["a", "b", None, "a"], pa.large_string()),
        "b": pa.array([True, False, None, True]),
        "d": pa.array([D1, D2, None, D1], pa.date32()),
        "n": pa.array([decimal.Decimal("1.5")] * 4, pa.decimal128(4, 1)),
    }
)
FIELDS = {("t", f.name): (f.name, f.type) for f in ROWS.schema}


def values(sql: str) -> list[Any]:
    node = sqlglot.parse_one(sql, dialect="spark")
    return list(compile_expr(node, FIELDS).evaluate(ROWS).to_pylist())


def arrow_type(sql: str) -> pa.DataType:
    return compile_expr(sqlglot.parse_one(sql, dialect="spark"), FIELDS).type


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("t.i", [1, 2, None, 4]),
        ("7", [7, 7, 7, 7]),
        ("'x'", ["x"] * 4),
        ("NULL", [None] * 4),
        ("t.i + 1", [2, 3, None, 5]),
        ("t.i - t.l", [-9, None, None, 4 - 2**62]),
        ("t.i * 2", [2, 4, None, 8]),
        ("-t.i", [-1, -2, None, -4]),
        ("t.f * 2", [3.0, None, -4.0, 0.0]),
        ("t.f + 0.5", [2.0, None, -1.5, 0.5]),
        ("t.f * 1e1", [15.0, None, -20.0, 0.0]),
        # Spark: `/` is DOUBLE, NULL for a zero divisor.
        ("t.i / 2", [0.5, 1.0, None, 2.0]),
        ("t.i / t.f", [1 / 1.5, None, None, None]),
        ("t.i > 1", [False, True, None, True]),
        ("t.i = t.l", [False, None, None, False]),
        ("t.f <= 0", [False, None, True, True]),
        ("t.s = 'a'", [True, False, None, True]),
        ("t.s <> 'a'", [False, True, None, False]),
        ("t.b = TRUE", [True, False, None, True]),
        ("t.d >= '2024-01-02'", [False, True, None, False]),
        ("t.d = t.d", [True, True, None, True]),
        # Three-valued logic.
        ("t.b AND t.i > 1", [False, False, None, True]),
        ("t.b OR t.i > 1", [True, True, None, True]),
        ("NULL AND FALSE", [False] * 4),
        ("NULL OR TRUE", [True] * 4),
        ("NOT t.b", [False, True, None, False]),
        ("t.i IS NULL", [False, False, True, False]),
        ("t.i IS NOT NULL", [True, True, False, True]),
        ("t.i IN (1, 4)", [True, False, None, True]),
        ("t.i IN (1, NULL)", [True, None, None, None]),
        ("t.s IN ('b')", [False, True, None, False]),
        ("CASE WHEN t.i > 1 THEN 'big' WHEN t.i = 1 THEN 'one' END", ["one", "big", None, "big"]),
        ("CASE WHEN t.b THEN t.i ELSE t.l END", [1, None, 30, 4]),
        ("CASE t.s WHEN 'a' THEN 1 ELSE 0 END", [1, 0, 0, 1]),
        ("IF(t.b, 1, 2)", [1, 2, 2, 1]),  # a NULL condition takes the ELSE branch
        ("COALESCE(t.i, t.l, 0)", [1, 2, 30, 4]),
        ("COALESCE(t.f, t.i)", [1.5, 2.0, -2.0, 0.0]),
        ("GREATEST(t.i, 3)", [3, 3, 3, 4]),
        ("LEAST(t.f, NULL)", [1.5, None, -2.0, 0.0]),
        ("CAST(t.i AS BIGINT)", [1, 2, None, 4]),
        ("CAST(t.i AS DOUBLE)", [1.0, 2.0, None, 4.0]),
        ("CAST(t.i AS STRING)", ["1", "2", None, "4"]),
        ("CAST(t.d AS STRING)", ["2024-01-01", "2024-01-02", None, "2024-01-01"]),
        ("CAST(t.b AS STRING)", ["true", "false", None, "true"]),
        ("CAST(NULL AS INT)", [None] * 4),
        ("(t.i + 1) * 2", [4, 6, None, 10]),
        # `%`: the sign of the dividend (Java), NULL for a zero divisor, in the wider type.
        ("t.i % 3", [1, 2, None, 1]),
        ("-t.i % 3", [-1, -2, None, -1]),
        ("t.i % -3", [1, 2, None, 1]),
        ("t.l % t.i", [0, None, None, 0]),
        ("t.i % 0", [None, None, None, None]),
        ("t.i % (t.i - 2)", [0, None, None, 0]),
    ],
)
def test_values_as_spark_computes_them(sql: str, expected: list[Any]) -> None:
    assert values(sql) == expected


def test_integer_overflow_wraps_as_spark_without_ansi() -> None:
    assert values("t.l * 4")[3] == 0  # 2**64 wraps to 0 in BIGINT
    assert arrow_type("t.l * 4") == pa.int64()
    # Java: Long.MIN_VALUE % -1 is 0 (no overflow).
    low = pa.table({"l": pa.array([-(2**63)], pa.int64())})
    node = sqlglot.parse_one("t.l % -1", dialect="spark")
    assert compile_expr(node, {("t", "l"): ("l", pa.int64())}).evaluate(low).to_pylist() == [0]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("t.i + t.i", pa.int32()),
        ("t.i + t.l", pa.int64()),
        ("t.i + 3000000000", pa.int64()),
        ("t.i + t.f", pa.float64()),
        ("t.i / t.i", pa.float64()),
        ("t.i % t.l", pa.int64()),
        ("COALESCE(t.i, t.l)", pa.int64()),
        ("t.i > 1", pa.bool_()),
    ],
)
def test_types_as_spark_types_them(sql: str, expected: pa.DataType) -> None:
    assert arrow_type(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "t.f % 2",  # Java's double remainder
        "t.i DIV 2",
        "t.i + 1.5",  # DECIMAL arithmetic
        "t.n + 1",  # a DECIMAL column
        "t.s < 'b'",  # string ordering: collation
        "t.s = 1",  # implicit string cast
        "t.d > 1",
        "t.d = '2024-1-1'",  # not a plain date literal
        "CAST(t.l AS INT)",  # narrowing wraps in Spark
        "CAST(t.f AS BIGINT)",  # rounds
        "CAST(t.s AS INT)",  # invalid strings turn NULL in Spark
        "CAST(t.f AS STRING)",  # Spark's double formatting
        "upper(t.s)",  # no functions beyond the subset
        "t.x",  # unknown column
        "t.i IN (SELECT 1)",
        "CASE WHEN t.b THEN 's' ELSE 1 END",  # mixed branch types
        "t.b AND t.i",  # a number as a condition
    ],
)
def test_refusals(sql: str) -> None:
    with pytest.raises(ArrowUnsupportedError):
        compile_expr(sqlglot.parse_one(sql, dialect="spark"), FIELDS)


def test_common_type() -> None:
    assert common_type([pa.int8(), pa.int64(), pa.null()], "x") == pa.int64()
    assert common_type([pa.string(), pa.large_string()], "x") == pa.large_string()
    with pytest.raises(ArrowUnsupportedError):
        common_type([pa.date32(), pa.int32()], "x")
