"""The embedded engine's function table (sql/functions/table.py) as the gate reads it: rows
drive admission and rendering, literal conditions refuse with the row's reason, and the
docs' list is built from the tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import parse_one

from icemv.errors import EngineRefusedError
from icemv.sql.functions import FUNCTIONS, HANDLED, REFUSED, function_of, function_table
from icemv.sql.portable import to_duckdb
from icemv.sql.spark_types import BIGINT, DATE, DOUBLE, INT, STRING, TIMESTAMP, SparkType

RELATIONS = {"t": {"s": STRING, "d": DATE, "ts": TIMESTAMP, "i": INT, "b": BIGINT,
                   "x": DOUBLE, "m": SparkType("decimal", 12, 2)}}  # fmt: skip
DOCS = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "embedded-engine.md"


def _gate(expression: str) -> tuple[str, list[SparkType]]:
    portable = to_duckdb(parse_one(f"SELECT {expression} AS v FROM t", read="spark"), RELATIONS)
    return portable.sql, [kind for _, kind in portable.columns]


def test_every_row_is_one_function_of_its_node() -> None:
    for function in FUNCTIONS:
        assert (function.duckdb is None) != (function.spark_tree is None), function.name
    assert function_of(parse_one("lpad(s, 3, 'x')", read="spark")).name == "lpad"  # type: ignore[union-attr]
    assert function_of(parse_one("rpad(s, 3, 'x')", read="spark")).name == "rpad"  # type: ignore[union-attr]
    assert function_of(parse_one("abs(i)", read="spark")) is None  # a handler's, not a row's


def test_rows_render_spark_s_semantics_and_types() -> None:
    sql, kinds = _gate("dayofweek(ts)")
    assert "DAYOFWEEK" in sql.upper() and "AS DATE" in sql.upper() and kinds == [INT]
    sql, _ = _gate("reverse(s)")
    assert "LIST_REVERSE(STRING_SPLIT(" in sql.upper()  # code points, not graphemes
    assert _gate("floor(m)")[1] == [SparkType("decimal", 11, 0)]
    assert _gate("unix_timestamp(ts)")[1] == [BIGINT]
    assert _gate("nullif(i, 0)")[1] == [INT]  # Spark's own tree: if(i = 0, NULL, i)


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("repeat(s, i)", "repeat with i: a literal"),
        ("split_part(s, '', 1)", "a non-empty literal"),
        ("split_part(s, ',', 0)", "a literal other than 0"),
        ("left(s, -1)", "a literal >= 0"),
        ("sha2(s, 512)", "256 or 0"),
        ("pmod(NULL, i)", "pmod of null"),
        ("floor(i)", "floor of int"),
        ("last_day(ts)", "last_day of timestamp"),
        ("locate('a', s, 2)", "instr with position"),
        ("next_day(d, s)", "a literal day"),
        ("substring_index(s, ',,', 1)", "a one-character literal"),
        ("concat_ws(',')", "without all its arguments"),
        ("concat_ws(',', i)", "concat_ws of int"),
        ("months_between(ts, ts, f)", "a literal"),
        ("crc32(s)", "Spark only"),
    ],
)
def test_a_row_refuses_what_it_does_not_admit(expression: str, why: str) -> None:
    with pytest.raises(EngineRefusedError, match=why):
        _gate(expression)


def test_the_docs_list_is_built_from_the_tables() -> None:
    table = function_table()
    for function in FUNCTIONS:
        assert f"| `{function.name}` |" in table
    for names in REFUSED:
        assert f"| {names} |" in table
    assert "<!-- icemv:functions -->" in DOCS.read_text(encoding="utf-8")


@pytest.mark.parametrize(("names", "call"), [(names, call) for names, call, _ in HANDLED])
def test_each_function_the_docs_list_as_handled_is_admitted(names: str, call: str) -> None:
    sql = f"SELECT {call} AS v FROM t"
    if call.startswith("explode("):  # a generator: in a LATERAL VIEW
        sql = f"SELECT i, v FROM t LATERAL VIEW {call} e AS v"
    if call.startswith("grouping_id("):  # meaningful with grouping sets only
        sql = f"SELECT i, {call} AS v FROM t GROUP BY GROUPING SETS ((i), ())"
    to_duckdb(parse_one(sql, read="spark"), RELATIONS)  # EngineRefusedError if refused
