"""icemv's Spark rendering (sql/spark_dialect.py) writes a view's datetime patterns as
the view has them: sqlglot's round trip through strftime patterns changed them."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

import icemv.sql  # noqa: F401 (the dialect put right)


@pytest.mark.parametrize(
    "call",
    [
        "DATE_FORMAT(ts, 'y-M-d')",  # was 'yyyy-M-d': years before 1000 differ
        "DATE_FORMAT(ts, 'YYYY-ww')",  # week years: was 'yyyy-ww', Spark 3 raises on 'Y'
        "DATE_FORMAT(ts, 'yyyy-MM-dd\\'T\\'HH:mm:ss.SSS')",
        "DATE_FORMAT(ts, 'EEE, d MMM yyyy hh a')",
        "TO_DATE(s, 'yyyy-MM-dd')",  # was TO_DATE(s), a cast: lenient where this is not
        "TO_DATE(s, 'dd/MM/y')",
        "TO_DATE(s)",
        "TO_TIMESTAMP(s, 'yyyy-MM-dd HH:mm:ss')",
        "FROM_UNIXTIME(b, 'y')",
        "UNIX_TIMESTAMP(s, 'dd/MM/yyyy')",
    ],
)
def test_datetime_patterns_render_as_written(call: str) -> None:
    assert parse_one(f"SELECT {call}", read="spark").sql(dialect="spark") == f"SELECT {call}"
