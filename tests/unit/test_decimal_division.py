"""DECIMAL division and AVG of a DECIMAL on DuckDB (sql/portable/division.py) against
Spark 3.5's arithmetic written in Python: the exact quotient rounded half up, once, to
the result's scale (Decimal's `/` truncates at 39 places first, which changes nothing).
The types reach each path of the long division: one step, two, three and four steps,
digits read from the value's text. Spark itself is compared in
tests/test_engine_corpus.py; here many generated values run in a second."""

from __future__ import annotations

import random
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext

import duckdb
import pyarrow as pa
import pytest
import sqlglot
from sqlglot import exp

from icemv.sql import decimals, portable
from icemv.sql.decimals import DecimalType
from icemv.sql.spark_types import decimal_type

# (a, b): the dividend's and the divisor's types
PAIRS = [
    (DecimalType(12, 2), DecimalType(7, 2)),  # A * 10^k in one step
    (DecimalType(38, 10), DecimalType(7, 2)),  # A's digits from its text (38 + 10 + 1)
    (DecimalType(30, 2), DecimalType(25, 5)),  # two steps
    (DecimalType(36, 2), DecimalType(35, 5)),  # four steps
    (DecimalType(38, 0), DecimalType(20, 18)),  # three steps, none in the first
    (DecimalType(10, 0), DecimalType(3, 0)),
]


def _values(kind: DecimalType, rng: random.Random, n: int) -> list[Decimal | None]:
    unit = Decimal(1).scaleb(-kind.scale)
    out: list[Decimal | None] = [None, Decimal(0) * unit, unit, -unit]
    for _ in range(n):
        digits = rng.randint(1, kind.precision)
        out.append(rng.choice((1, -1)) * rng.randrange(10**digits // 10, 10**digits) * unit)
    return out


def _spark(a: Decimal | None, b: Decimal | None, result: DecimalType) -> Decimal | None:
    if a is None or b is None or b == 0:
        return None
    with localcontext(Context(prec=200)):
        quotient = (a / b).quantize(Decimal(1).scaleb(-result.scale), rounding=ROUND_HALF_UP)
    return None if quotient.adjusted() >= result.precision - result.scale else quotient


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a.sql()}/{b.sql()}" for a, b in PAIRS])
def test_a_decimal_quotient_is_spark_s_to_the_last_digit(a: DecimalType, b: DecimalType) -> None:
    rng = random.Random(f"{a}{b}")
    left, right = _values(a, rng, 60), _values(b, rng, 60)
    pairs = [(x, y) for x in left for y in right]
    result = decimals.divide(a, b)
    expected = [_spark(x, y, result) for x, y in pairs]
    kept = [i for i, value in enumerate(expected) if value is not None or pairs[i][1] is None]
    kept += [i for i, (x, y) in enumerate(pairs) if y == 0 and x is not None][:3]
    table = pa.table({
        "x": pa.array([pairs[i][0] for i in kept], pa.decimal128(a.precision, a.scale)),
        "y": pa.array([pairs[i][1] for i in kept], pa.decimal128(b.precision, b.scale)),
    })  # fmt: skip
    query = sqlglot.parse_one("SELECT x / y AS q FROM r", read="spark")
    assert isinstance(query, exp.Query)
    answer = portable.to_duckdb(query, {"r": {"x": decimal_type(a), "y": decimal_type(b)}})
    assert answer.columns == (("q", decimal_type(result)),)
    connection = duckdb.connect()
    connection.register("r", table)
    got = [row[0] for row in connection.sql(answer.sql).fetchall()]
    wrong = [(pairs[i], expected[i], value) for i, value in zip(kept, got, strict=True)
             if value != expected[i]]  # fmt: skip
    assert not wrong, wrong[:5]
    assert len(kept) > 1000


def test_avg_of_a_decimal_rounds_once_to_its_type() -> None:
    """AVG of DECIMAL(28, 10): Spark rounds sum / count once to DECIMAL(32, 14); the
    division's own type, DECIMAL(38, 10), would keep 10 places."""
    values = [Decimal("1234567890.1234567891"), Decimal("-2.5"), Decimal("-0.0000025"), 0]
    table = pa.table({"x": pa.array(values, pa.decimal128(28, 10))})
    query = sqlglot.parse_one("SELECT avg(x) AS a FROM r", read="spark")
    assert isinstance(query, exp.Query)
    answer = portable.to_duckdb(query, {"r": {"x": decimal_type(DecimalType(28, 10))}})
    connection = duckdb.connect()
    connection.register("r", table)
    assert connection.sql(answer.sql).fetchall() == [(Decimal("308641971.90586357227500"),)]
