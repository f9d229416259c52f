"""Spark 3.5's DECIMAL result types (sql/decimals.py), against what Spark itself printed for
the same expressions (`spark.sql(...).schema`, checked on the project's Spark)."""

from __future__ import annotations

import decimal

import pytest
from sqlglot import exp

from icemv.sql.decimals import (
    COUNT_DECIMAL,
    DecimalType,
    add,
    avg_type,
    divide,
    exact_sum,
    half_way,
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


@pytest.mark.parametrize(("s", "r", "c"), [(0, 0, 2), (0, 1, 3), (0, 2, 4)])
def test_rounding_twice_differs_only_for_groups_of_many_rows(s: int, r: int, c: int) -> None:
    """`half_way`'s argument, on every sum of a range and every count up to ten times the
    bound: the quotient rounded HALF_UP to c places, then to r, differs from the exact
    quotient rounded once only where the count reaches 2 * 10^(c-s-r-1), and then the
    c-place quotient is half-way (the bound is loose: the first such count is larger)."""
    context = decimal.Context(prec=60)
    at_c, at_r = decimal.Decimal(1).scaleb(-c), decimal.Decimal(1).scaleb(-r)
    bound = 2 * 10 ** (c - s - r - 1)
    differ = 0
    for n in range(1, 10 * bound):
        for total in range(-2 * n * 10**s, 2 * n * 10**s, 3):
            exact = context.divide(decimal.Decimal(total).scaleb(-s), decimal.Decimal(n))
            q = exact.quantize(at_c, decimal.ROUND_HALF_UP, context)
            twice = q.quantize(at_r, decimal.ROUND_HALF_UP, context)
            once = exact.quantize(at_r, decimal.ROUND_HALF_UP, context)
            if twice != once:
                differ += 1
                assert n >= bound, (total, n)
                assert q.quantize(at_r / 10, context=context) == q and q != exact
    assert differ  # rounding twice does differ, past the bound


def test_the_half_way_test_asks_for_many_rows_or_none() -> None:
    quotient, count = exp.column("q"), exp.column("n")
    total, result = DecimalType(22, 2), avg_type(DecimalType(12, 2))
    computed = divide(total, COUNT_DECIMAL)  # DECIMAL(38, 18): 2 * 10^9 rows
    test = half_way(quotient, computed, result, total, count).sql()
    assert "n >= 2000000000" in test
    wide = DecimalType(38, 37)  # a quotient of 37 places over sums of scale 0
    assert half_way(quotient, wide, DecimalType(38, 6), DecimalType(38, 0), count) == exp.false()
    assert half_way(quotient, result, result, total, count) == exp.false()  # rounded once
