"""Rows stay registered on an idle DuckDB connection (shared ones, and small ones of a
refresh's own) for the next refresh that names the same rows; any other rows under that
name replace them, and a refresh that does not name them leaves them unregistered."""

from __future__ import annotations

import pyarrow as pa
import pytest
from sqlglot import exp

from icemv.refresh.embedded import executor as executor_module
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
    assert _views(two) == {name, held}  # both kept: small
    assert two.add_rows("delta", first, shared=True) == name
    assert _rows(two, name) == [1, 2]
    two.drop()  # it did not name `held`: unregistered

    three = DuckDBExecutor(*SETTINGS)
    assert three.connection is connection
    assert _views(three) == {name}
    assert three.add_rows("delta", second, shared=True) == name  # other rows, same name
    assert _rows(three, name) == [3]
    three.drop()

    four = DuckDBExecutor(*SETTINGS)
    assert four.add_rows("delta", first) == name  # not shared, other rows: registered
    assert _rows(four, name) == [1, 2]
    four.drop()
    five = DuckDBExecutor(*SETTINGS)
    assert _views(five) == {name}
    # what four kept, under the name; a refresh's trees name only what it registered
    kept = five.connection.execute(f'SELECT x FROM "{name}" ORDER BY x').fetchall()
    assert kept == [(1,), (2,)]
    five.drop()
    six = DuckDBExecutor(*SETTINGS)
    six.drop()
    seven = DuckDBExecutor(*SETTINGS)
    assert _views(seven) == set()  # six named nothing
    seven.drop()


def test_a_refresh_s_own_rows_over_the_budget_are_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = pa.table({"x": list(range(1000))})
    monkeypatch.setattr(executor_module, "_KEEP_OWN_BYTES", rows.nbytes - 1)
    one = DuckDBExecutor(*SETTINGS)
    small = one.add_rows("stored", pa.table({"x": [1]}))
    large = one.add_rows("stored", rows)
    shared = one.add_rows("delta", rows, shared=True)  # shared rows have their own budget
    one.drop()
    two = DuckDBExecutor(*SETTINGS)
    assert _views(two) == {small, shared}
    assert large not in _views(two)
    two.drop()


def test_rows_kept_from_an_earlier_refresh_go_when_a_refresh_does_not_name_them() -> None:
    one = DuckDBExecutor(*SETTINGS)
    one.add_rows("delta", pa.table({"x": [1]}), shared=True)
    one.drop()
    two = DuckDBExecutor(*SETTINGS)
    held = two.add_rows("held", pa.table({"x": [2]}))
    two.drop()
    three = DuckDBExecutor(*SETTINGS)
    assert _views(three) == {held}
    three.drop()
