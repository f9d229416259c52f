"""Spark's CAST of a string literal to a number, computed at plan time (sql/string_casts.py).

The values are Spark 3.5's (non-ANSI); tests/test_engine_corpus.py checks the same forms
against Spark itself.
"""

from __future__ import annotations

import pytest

from icemv.sql.spark_types import DOUBLE, INT, SparkType
from icemv.sql.string_casts import cast_string_literal


def _decimal(precision: int, scale: int) -> SparkType:
    return SparkType("decimal", precision, scale)


@pytest.mark.parametrize(
    ("text", "target", "expected"),
    [
        ("1.5", DOUBLE, ("1.5",)),
        ("-0.0", DOUBLE, ("-0.0",)),
        (".5", DOUBLE, ("0.5",)),
        ("1e400", DOUBLE, ("Infinity",)),
        ("4.9e-324", DOUBLE, ("5e-324",)),
        ("NaN", DOUBLE, ("NaN",)),
        ("-NaN", DOUBLE, ("NaN",)),  # Java's parseDouble takes a sign before NaN
        ("nan", DOUBLE, ("NaN",)),  # Spark's fallback, any case
        ("-Infinity", DOUBLE, ("-Infinity",)),
        ("+inf", DOUBLE, ("Infinity",)),
        ("12.345", _decimal(5, 2), ("12.35",)),  # half up
        ("-12.345", _decimal(5, 2), ("-12.35",)),
        ("0.005", _decimal(3, 2), ("0.01",)),
        ("999.995", _decimal(5, 2), (None,)),  # rounds past the precision: NULL
        ("123456.7", _decimal(5, 2), (None,)),
        # more than Python's default 28 digits once rounded, within the type: exact
        ("12345678901234567890123456789.5", _decimal(38, 2), ("12345678901234567890123456789.50",)),
        ("1" + "0" * 100, _decimal(38, 2), (None,)),  # more digits than any DECIMAL: NULL
        ("2147483647", INT, ("2147483647",)),
        ("2147483648", INT, (None,)),  # out of range: NULL
        ("-2147483648", INT, ("-2147483648",)),
        ("+7", SparkType("bigint"), ("7",)),
        ("007", SparkType("smallint"), ("7",)),
    ],
)
def test_computed_as_spark_computes_it(
    text: str, target: SparkType, expected: tuple[str | None]
) -> None:
    assert cast_string_literal(text, target) == expected


@pytest.mark.parametrize(
    ("text", "target"),
    [
        (" 1", DOUBLE),  # whitespace: refused, not guessed
        ("-nan", DOUBLE),  # neither Java's nor Spark's form
        ("1d", DOUBLE),
        ("0x10", DOUBLE),
        ("1e2", _decimal(5, 2)),  # no exponent in a DECIMAL
        ("1.5", INT),  # Spark truncates: not computed here
        ("abc", INT),
        ("1", SparkType("date")),
        ("1", SparkType("string")),
    ],
)
def test_other_forms_are_left_to_spark(text: str, target: SparkType) -> None:
    assert cast_string_literal(text, target) is None
