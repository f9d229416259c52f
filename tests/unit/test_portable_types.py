"""The gate reads a type by its kind without rendering it (sql/portable.py `spark_type_of`)
and builds each type once (sql/spark_types.py `built`): both shortcuts must say what the
rendered text says, and a built type must belong to one tree only."""

from __future__ import annotations

from sqlglot import exp

from icemv.sql import portable
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
