"""icemv's Spark rendering (sql/spark_dialect.py) writes a view's datetime patterns as
the view has them (sqlglot's round trip through strftime patterns changed them), and no
function argument is dropped on the way."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

import icemv.sql  # noqa: F401 (the dialect put right)
from icemv.errors import ViewSqlError
from icemv.sql.parse import parse_query


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


@pytest.mark.parametrize(
    "call",
    [
        "PERCENTILE(x, 0.25)",
        "PERCENTILE(DISTINCT x, 0.25)",
        "PERCENTILE_APPROX(x, 0.5, 100)",
        "MAX_BY(x, y)",
    ],
)
def test_aggregates_keep_their_arguments(call: str) -> None:
    assert parse_query(f"SELECT {call} FROM t").sql(dialect="spark") == f"SELECT {call} FROM t"


def test_an_argument_sqlglot_would_drop_is_an_error() -> None:
    # percentile's frequency: sqlglot's node has no place for it, and rendered PERCENTILE(x, 0.5)
    with pytest.raises(ViewSqlError, match="percentile with 3 arguments is not supported"):
        parse_query("SELECT k, percentile(x, 0.5, f) AS p FROM t GROUP BY k")
