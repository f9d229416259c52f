"""A TIMESTAMP's date parts and truncation on its UTC time (the gate's `utc`) give DuckDB's
ICU values in a UTC session, over generated instants of Spark's whole range.

Spark's values of the ICU forms are checked by the engine corpus (tests/test_engine_corpus.py,
which runs both forms); this checks the rewrite itself, on many more values, and that the
rewritten statements run prepared without being bound again."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import parse_one

from icemv.refresh.embedded.executor import connect
from icemv.sql.portable import UTC_ZONES, to_duckdb
from icemv.sql.portable.common import _TRUNC_UNITS
from icemv.sql.spark_types import TIMESTAMP

# Spark's TIMESTAMP range, 0001-01-01 to 9999-12-31 23:59:59.999999 UTC, in microseconds.
FIRST, LAST = -62135596800000000, 253402300799999999
EXPRESSIONS = [
    *(f"date_trunc('{unit}', ts)" for unit in sorted(_TRUNC_UNITS)),
    *(f"{part}(ts)" for part in ("year", "quarter", "month", "day", "dayofmonth", "hour",
                                 "minute", "second")),
]  # fmt: skip
# Functions of the table that read a TIMESTAMP's local time (Argument.local_time), over
# years 1000-9999 (date_format raises outside them, in both forms).
FUNCTIONS = ["date_format(ts, 'yyyy-MM-dd HH:mm:ss.SSS EEE D')", "months_between(ts, t2)",
             "months_between(t2, ts, false)"]  # fmt: skip
YEAR_1000 = -30610224000000000
EDGES = [FIRST, LAST, 0, -1, 1, -86400000000, 951782400000000, 951868799999999,
         -12219292800000000, -12219292800000001]  # fmt: skip


@pytest.fixture(scope="module")
def connection() -> Any:
    connection = connect(threads=1, memory_limit="256MB", time_zone="UTC")
    yield connection
    connection.close()


def _sql(expression: str, utc: bool) -> str:
    query = parse_one(f"SELECT {expression} AS v FROM t", read="spark")
    return to_duckdb(query, {"t": {"ts": TIMESTAMP, "t2": TIMESTAMP}}, utc=utc).sql


def test_utc_forms_differ_only_where_meant() -> None:
    """Truncation and the time of day on the UTC time; the date's parts come from the
    DATE cast (Spark's parser writes them so), which DuckDB does not bind again."""
    for expression in EXPRESSIONS:
        dated = expression.startswith(("year", "quarter", "month", "day"))
        assert ("EPOCH_US" in _sql(expression, utc=True)) is not dated, expression
        assert "EPOCH_US" not in _sql(expression, utc=False), expression
    assert "UTC" in UTC_ZONES and "Europe/Paris" not in UTC_ZONES


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(FIRST, LAST), min_size=1, max_size=400))
def test_utc_forms_equal_icu_in_utc(connection: Any, micros: list[int]) -> None:
    t = pa.table({"ts": pa.array([*micros, *EDGES, None], pa.timestamp("us", tz="UTC"))})
    for expression in EXPRESSIONS:
        icu = connection.sql(_sql(expression, utc=False)).to_arrow_table()
        local = connection.sql(_sql(expression, utc=True)).to_arrow_table()
        assert icu.column("v").type == local.column("v").type, expression
        assert icu.column("v").to_pylist() == local.column("v").to_pylist(), expression
    del t


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(YEAR_1000, LAST), st.integers(YEAR_1000, LAST)),
                min_size=1, max_size=300))  # fmt: skip
def test_local_time_functions_in_utc_equal_icu(
    connection: Any, pairs: list[tuple[int, int]]
) -> None:
    stamps = pa.timestamp("us", tz="UTC")
    t = pa.table({"ts": pa.array([a for a, _ in pairs] + [None], stamps),
                  "t2": pa.array([b for _, b in pairs] + [0], stamps)})  # fmt: skip
    for expression in FUNCTIONS:
        utc_form = _sql(expression, utc=True)
        assert "EPOCH_US" in utc_form, expression
        icu = connection.sql(_sql(expression, utc=False)).to_arrow_table()
        local = connection.sql(utc_form).to_arrow_table()
        assert icu.column("v").to_pylist() == local.column("v").to_pylist(), expression
    del t


def _prepare(connection: duckdb.DuckDBPyConnection, name: str, statement: str) -> None:
    t = pa.table({"ts": pa.array(range(0, 10**12, 10**9), pa.timestamp("us", tz="UTC"))})
    connection.execute(f"PREPARE {name} AS {statement}")  # finds `t` in this frame
    del t


def test_utc_form_is_not_bound_again_on_execute(connection: Any) -> None:
    """DuckDB binds ICU's functions anew on every EXECUTE, the UTC form once. Binding
    looks up the relation `t` by name, a variable of the frame that prepared the statement:
    from here, bound again, it is not found."""
    query = "SELECT max(v) FROM ({}) q"
    _prepare(connection, "utc_form", query.format(_sql("date_trunc('HOUR', ts)", utc=True)))
    _prepare(connection, "icu_form", query.format(_sql("date_trunc('HOUR', ts)", utc=False)))
    assert connection.execute("EXECUTE utc_form").fetchall()[0][0] is not None
    with pytest.raises(duckdb.CatalogException, match="Table with name t does not exist"):
        connection.execute("EXECUTE icu_form").fetchall()
