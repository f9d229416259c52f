"""The gate's answers kept per tree and relation types (sql/portable/
`to_duckdb`), and the executor naming its relations alike on every refresh
(refresh/embedded/executor.py), which is what lets a refresh find its last one's answers."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
import sqlglot
from sqlglot import exp

from icemv.errors import EngineRefusedError
from icemv.refresh.embedded.executor import DuckDBExecutor
from icemv.sql import portable
from icemv.sql.spark_types import BIGINT, DOUBLE, INT, STRING

SUM = "SELECT k, sum(v) AS s FROM r GROUP BY k"


def _query(sql: str) -> exp.Query:
    parsed = sqlglot.parse_one(sql, read="spark")
    assert isinstance(parsed, exp.Query)
    return parsed


def test_the_same_text_over_the_same_types_gets_the_same_answer() -> None:
    relations = {"r": {"k": STRING, "v": INT}}
    first = portable.to_duckdb(_query(SUM), relations)
    assert portable.to_duckdb(_query(SUM), relations) is first  # kept, not gated again
    assert first.columns == (("k", STRING), ("s", BIGINT))


def test_other_types_of_a_relation_are_gated_anew() -> None:
    integers = portable.to_duckdb(_query(SUM), {"r": {"k": STRING, "v": INT}})
    doubles = portable.to_duckdb(_query(SUM), {"r": {"k": STRING, "v": DOUBLE}})
    assert doubles.columns == (("k", STRING), ("s", DOUBLE))
    assert doubles.sql != integers.sql


def test_a_refusal_is_kept_and_raised_again() -> None:
    relations = {"r": {"k": DOUBLE, "v": INT}}
    query = "SELECT DISTINCT k FROM r"  # -0.0 and NaN group apart in DuckDB
    with pytest.raises(EngineRefusedError) as first:
        portable.to_duckdb(_query(query), relations)
    with pytest.raises(EngineRefusedError) as again:
        portable.to_duckdb(_query(query), relations)
    assert str(again.value) == str(first.value)


def test_each_refresh_names_its_relations_alike_and_holds_its_own() -> None:
    one = DuckDBExecutor(threads=1, memory_limit="64MB", time_zone="UTC")
    two = DuckDBExecutor(threads=1, memory_limit="64MB", time_zone="UTC")
    try:
        names = [
            one.add_rows(purpose, pa.table({"x": [value]}))
            for purpose, value in (("delta", 1), ("delta", 2), ("held", 3))
        ]
        assert names == ["__icemv_delta_1", "__icemv_delta_2", "__icemv_held_1"]
        assert two.add_rows("delta", pa.table({"x": [9]})) == "__icemv_delta_1"
        assert one.rows("__icemv_delta_1").column("x").to_pylist() == [1]
        assert two.rows("__icemv_delta_1").column("x").to_pylist() == [9]
        query = _query("SELECT x + 1 AS y FROM __icemv_delta_1")
        assert _ys(one.collect(query, 10)) == [2]
        assert _ys(two.collect(query, 10)) == [10]  # the same text, parsed once
    finally:
        one.drop()
        two.drop()


def test_a_connection_given_back_holds_no_relation_of_its_last_refresh() -> None:
    first = DuckDBExecutor(threads=1, memory_limit="64MB", time_zone="Asia/Tokyo")
    first.add_rows("delta", pa.table({"x": [1]}))
    connection = first.connection
    first.drop()
    second = DuckDBExecutor(threads=1, memory_limit="64MB", time_zone="Asia/Tokyo")
    try:
        assert second.connection is connection  # kept idle, not set up again
        with pytest.raises(duckdb.CatalogException):
            second.connection.execute('SELECT * FROM "__icemv_delta_1"')
        zone = second.connection.execute("SELECT current_setting('TimeZone')").fetchone()
        assert zone == ("Asia/Tokyo",)
    finally:
        second.drop()


def test_a_connection_whose_statement_failed_is_closed_not_given_back() -> None:
    failing = DuckDBExecutor(threads=1, memory_limit="64MB", time_zone="Europe/Oslo")
    failing.add_rows("delta", pa.table({"x": pa.array([2**63 - 1], pa.int64())}))
    with pytest.raises(EngineRefusedError, match="DuckDB"):  # Spark wraps, DuckDB raises
        failing.collect(_query("SELECT x + 1 AS y FROM __icemv_delta_1"), 10)
    connection = failing.connection
    failing.drop()
    after = DuckDBExecutor(threads=1, memory_limit="64MB", time_zone="Europe/Oslo")
    try:
        assert after.connection is not connection
    finally:
        after.drop()


def _ys(rows: pa.Table | None) -> list[object]:
    assert rows is not None
    return rows.column("y").to_pylist()


def test_a_tree_key_keeps_case_and_every_argument() -> None:
    upper = _query("SELECT k AS K FROM r WHERE k = 'A'")
    lower = _query("SELECT k AS k FROM r WHERE k = 'A'")
    assert portable.tree_key(upper) != portable.tree_key(lower)
    key = portable.tree_key
    assert key(upper) == key(_query("SELECT k AS K FROM r WHERE k = 'A'"))
    assert key(upper) != key(_query("SELECT k AS K FROM r WHERE k = 'a'"))
    distinct = _query("SELECT DISTINCT k AS K FROM r WHERE k = 'A'")
    assert portable.tree_key(distinct) != portable.tree_key(upper)
    relations = {"r": {"k": STRING}}
    assert portable.to_duckdb(upper, relations).columns == (("K", STRING),)
    assert portable.to_duckdb(lower, relations).columns == (("k", STRING),)
