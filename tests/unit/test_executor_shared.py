"""Shared rows stay registered on an idle DuckDB connection for the next refresh that
names the same rows; any other rows under that name, or none, never see them."""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from icemv.refresh.embedded.executor import DuckDBExecutor

SETTINGS = (1, "256MB", "UTC")


def _rows(executor: DuckDBExecutor, name: str) -> list[int]:
    table = exp.Table(this=exp.to_identifier(name, quoted=True))
    query = exp.select("x").from_(table).order_by("x")
    found = executor.collect(query, 100)
    assert found is not None
    return found.column("x").to_pylist()


def _views(executor: DuckDBExecutor) -> set[str]:
    rows = executor.connection.execute("SELECT view_name FROM duckdb_views()").fetchall()
    return {name for (name,) in rows if name.startswith("__icemv_")}


def test_the_same_rows_are_found_registered_and_other_rows_replace_them() -> None:
    first, second = pa.table({"x": [1, 2]}), pa.table({"x": [3]})
    one = DuckDBExecutor(*SETTINGS)
    connection = one.connection
    name = one.add_rows("delta", first, shared=True)
    held = one.add_rows("stored", pa.table({"x": [9]}))
    assert _rows(one, name) == [1, 2]
    one.drop()

    two = DuckDBExecutor(*SETTINGS)
    assert two.connection is connection  # the idle connection, taken again
    assert _views(two) == {name}  # the shared rows stayed, the others went
    assert held not in _views(two)
    assert two.add_rows("delta", first, shared=True) == name
    assert _rows(two, name) == [1, 2]
    two.drop()

    three = DuckDBExecutor(*SETTINGS)
    assert three.connection is connection
    assert three.add_rows("delta", second, shared=True) == name  # other rows, same name
    assert _rows(three, name) == [3]
    three.drop()

    four = DuckDBExecutor(*SETTINGS)
    assert four.add_rows("delta", first) == name  # not shared: registered, then dropped
    assert _rows(four, name) == [1, 2]
    four.drop()
    five = DuckDBExecutor(*SETTINGS)
    assert _views(five) == set()
    five.drop()


def test_rows_kept_from_an_earlier_refresh_go_when_a_refresh_does_not_name_them() -> None:
    one = DuckDBExecutor(*SETTINGS)
    one.add_rows("delta", pa.table({"x": [1]}), shared=True)
    one.drop()
    two = DuckDBExecutor(*SETTINGS)
    two.add_rows("held", pa.table({"x": [2]}))
    two.drop()
    three = DuckDBExecutor(*SETTINGS)
    assert _views(three) == set()
    three.drop()
