"""A statement finds its relations among the rows its own refresh named, nowhere else:
nothing is registered on the connection, so a connection given back and taken again
carries no relation, and the same name in another refresh is that refresh's rows."""

from __future__ import annotations

import warnings

import pyarrow as pa
import pytest
from sqlglot import exp

from icemv.errors import EngineRefusedError
from icemv.refresh.embedded.executor import DuckDBExecutor
from icemv.refresh.embedded.prepared import __name__ as executor_module

SETTINGS = (1, "256MB", "UTC")


def _rows(executor: DuckDBExecutor, name: str) -> list[int]:
    table = exp.Table(this=exp.to_identifier(name, quoted=True))
    query = exp.select("x").from_(table).order_by("x")
    found = executor.collect(query, 100)
    assert found is not None
    return found.column("x").to_pylist()


def _catalog(executor: DuckDBExecutor) -> set[str]:
    found = executor.connection.execute(
        "SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views()"
    ).fetchall()
    return {name for (name,) in found if name.startswith("__icemv_")}


def test_each_refresh_reads_its_own_rows_under_a_name() -> None:
    one = DuckDBExecutor(*SETTINGS)
    connection = one.connection
    name = one.add_rows("delta", pa.table({"x": [2, 1]}))
    assert _rows(one, name) == [1, 2]
    assert _catalog(one) == set()  # found as the statement's variable, not registered
    one.drop()

    two = DuckDBExecutor(*SETTINGS)
    assert two.connection is connection  # the idle connection, taken again
    assert two.add_rows("delta", pa.table({"x": [3]})) == name  # the same name: its own rows
    assert _rows(two, name) == [3]
    two.drop()


def test_a_name_no_rows_were_given_for_is_refused() -> None:
    one = DuckDBExecutor(*SETTINGS)
    one.add_rows("delta", pa.table({"x": [1]}))
    one.drop()
    two = DuckDBExecutor(*SETTINGS)
    with pytest.raises(EngineRefusedError, match="__icemv_delta_1"):
        _rows(two, "__icemv_delta_1")  # an earlier refresh's name finds nothing
    two.drop()


def test_duckdb_finds_only_the_rows_it_is_run_with() -> None:
    """Past the gate (which knows the name from an earlier refresh's rows), DuckDB itself
    finds no relation by that name: not registered, not a variable anywhere else."""
    one = DuckDBExecutor(*SETTINGS)
    name = one.add_rows("delta", pa.table({"x": [1]}))
    schema = one.schemas[name]
    one.drop()
    two = DuckDBExecutor(*SETTINGS)
    two.schemas[name] = schema  # what the gate reads; no rows
    with pytest.raises(EngineRefusedError, match=r"DuckDB: .*__icemv_delta_1"):
        _rows(two, name)
    two.drop()


def test_a_forgotten_relation_is_gone() -> None:
    executor = DuckDBExecutor(*SETTINGS)
    kept = executor.add_rows("held", pa.table({"x": [5]}))
    gone = executor.add_rows("held", pa.table({"x": [6]}))
    executor.forget(gone)
    assert _rows(executor, kept) == [5]
    with pytest.raises(EngineRefusedError):
        _rows(executor, gone)
    executor.drop()


def test_a_statement_run_warns_of_nothing() -> None:
    """DuckDB warns that Arrow output of an `execute` result is an extra copy; the
    executor chose that (its module says why) and filters the warning, raised in the frame
    that runs the statement: one line per worker process otherwise."""
    executor = DuckDBExecutor(*SETTINGS)
    name = executor.add_rows("delta", pa.table({"x": [1]}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # every warning, then the module's filter again
        warnings.filterwarnings("ignore", message="Arrow output on", module=executor_module)
        assert _rows(executor, name) == [1]
    executor.drop()
    assert [str(w.message) for w in caught] == []
