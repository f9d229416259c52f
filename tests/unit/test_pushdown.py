"""The filter an equality delete's values push into the change read (no Spark)."""

from __future__ import annotations

from pyiceberg.expressions.visitors import expression_evaluator
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from icemv.refresh.changes.pushdown import values_filter

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "vendor", StringType(), required=False),
)


def _matches(values: dict[str, set[object]], row: tuple[object, ...]) -> bool:
    return expression_evaluator(SCHEMA, values_filter(values), case_sensitive=True)(Record(*row))


def test_a_row_matches_when_every_column_holds_one_of_its_values() -> None:
    values: dict[str, set[object]] = {"id": {1, 2}, "vendor": {"a"}}
    assert _matches(values, (1, "a"))
    assert _matches(values, (2, "a"))
    assert not _matches(values, (3, "a"))
    assert not _matches(values, (1, "b"))


def test_none_matches_null_and_only_null() -> None:
    assert _matches({"vendor": {None}}, (1, None))
    assert not _matches({"vendor": {None}}, (1, "a"))
    assert _matches({"vendor": {None, "a"}}, (1, None))
    assert _matches({"vendor": {None, "a"}}, (1, "a"))
    assert not _matches({"vendor": {"a"}}, (1, None))
