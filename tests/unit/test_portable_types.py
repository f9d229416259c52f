"""The gate reads a type by its kind without rendering it (sql/portable/common.py
`spark_type_of`) and builds each type once (sql/spark_types.py `built`): both shortcuts
must say what the rendered text says, and a built type must belong to one tree only."""

from __future__ import annotations

from sqlglot import exp

from icemv.sql.portable import common as portable
from icemv.sql.spark_types import built


def test_a_type_read_by_its_kind_is_the_type_its_text_names() -> None:
    for kind in exp.DataType.Type:
        bare = exp.DataType(this=kind)
        text = bare.sql(dialect="spark").upper()
        assert portable.spark_type_of(bare) == portable.spark_type_of_text(text), kind


def test_a_parameterised_type_is_read_from_its_text() -> None:
    decimal = exp.DataType.build("DECIMAL(12, 2)", dialect="spark")
    assert portable.spark_type_of(decimal).sql() == "DECIMAL(12, 2)"


def test_a_built_type_is_a_fresh_tree_each_time() -> None:
    first, second = built("DECIMAL(38, 6)"), built("DECIMAL(38, 6)")
    assert first == second and first is not second
    exp.Cast(this=exp.column("a"), to=first)
    assert second.parent is None and built("DECIMAL(38, 6)").parent is None


def test_a_decimal_read_off_its_node_is_the_type_its_text_names() -> None:
    texts = ["DECIMAL(12, 2)", "DECIMAL(38, 18)", "DECIMAL(1, 0)", "DECIMAL(20,0)", "DECIMAL",
             "DECIMAL(10)", "NUMERIC(7, 3)", "DEC(5, 1)", "DOUBLE",
             "ARRAY<DECIMAL(4, 2)>"]  # fmt: skip
    for text in texts:
        for node in (exp.DataType.build(text, dialect="spark"), built(text)):
            rendered = node.sql(dialect="spark").upper()
            assert portable.spark_type_of(node) == portable.spark_type_of_text(rendered), text


def test_a_column_the_gate_copies_renders_as_the_original() -> None:
    for sql in ['"t"."Mixed Case"', "t.a", "a", '"a"', "c.d.t.a", "t.*"]:
        column = exp.maybe_parse(sql, into=exp.Column, dialect="duckdb")
        copied = portable._copied_column(column)  # noqa: SLF001 (the gate's own helper)
        assert copied == column and copied is not column
        assert copied.sql(dialect="duckdb") == column.sql(dialect="duckdb")
