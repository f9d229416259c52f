"""Spark 3.5's DECIMAL result types (sql/decimals.py), against what Spark itself printed for
the same expressions (`spark.sql(...).schema`, checked on the project's Spark)."""

from __future__ import annotations

import pytest
from sqlglot import exp

from icemv.sql.decimals import (
    COUNT_DECIMAL,
    DecimalType,
    add,
    avg_type,
    divide,
    exact_sum,
    multiply,
    overflows,
    sum_type,
)

D72 = DecimalType(7, 2)
INT = DecimalType(10, 0)


@pytest.mark.parametrize(
    ("got", "spark"),
    [
        (multiply(multiply(multiply(D72, D72), D72), D72), DecimalType(31, 8)),
        (multiply(DecimalType(31, 8), INT), DecimalType(38, 6)),  # a * weight: 2 places lost
        (sum_type(DecimalType(31, 8)), DecimalType(38, 8)),
        (add(DecimalType(38, 8), DecimalType(38, 8)), DecimalType(38, 7)),  # 1 place lost
        (add(DecimalType(37, 8), DecimalType(37, 8)), DecimalType(38, 8)),  # exact
        (avg_type(DecimalType(31, 8)), DecimalType(35, 12)),
        (divide(DecimalType(38, 8), COUNT_DECIMAL), DecimalType(38, 8)),  # fewer than AVG's 12
        (divide(DecimalType(22, 2), COUNT_DECIMAL), DecimalType(38, 18)),
        (avg_type(DecimalType(12, 2)), DecimalType(16, 6)),
        (sum_type(DecimalType(12, 2)), DecimalType(22, 2)),
    ],
)
def test_result_types_are_sparks(got: DecimalType, spark: DecimalType) -> None:
    assert got == spark


def test_sums_below_precision_38_add_as_they_are() -> None:
    total = DecimalType(22, 2)
    merged = exact_sum(exp.column("a"), exp.column("b"), total)
    assert merged.sql("spark") == "CAST((a) + (b) AS DECIMAL(22, 2))"
    assert overflows(exp.column("a"), total) == exp.false()


def test_sums_at_precision_38_add_narrowed_and_report_what_does_not_narrow() -> None:
    total = DecimalType(38, 8)
    merged = exact_sum(exp.column("a"), exp.column("b"), total)
    assert merged.sql("spark") == (
        "CAST((CAST(a AS DECIMAL(37, 8))) + (CAST(b AS DECIMAL(37, 8))) AS DECIMAL(38, 8))"
    )
    assert overflows(exp.column("a"), total).sql("spark") == (
        "NOT a IS NULL AND CAST(a AS DECIMAL(37, 8)) IS NULL"
    )
    # Scale 6 or less keeps its scale past 38 digits: no narrowing needed.
    assert overflows(exp.column("a"), DecimalType(38, 4)) == exp.false()
