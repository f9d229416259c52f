"""The filter an equality delete's values push into the change read (no Spark)."""

from __future__ import annotations

from pyiceberg.expressions.visitors import expression_evaluator
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from icemv.refresh.changes.pushdown import RANGES, column_values, values_filter

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


def test_more_values_than_iceberg_prunes_by_become_ranges_cut_at_the_widest_gaps() -> None:
    few = column_values({3, 1, 2, None})
    assert (few.null, few.values, few.ranges) == (True, (1, 2, 3), ())
    clusters = {*range(1000, 1300), *range(50_000, 50_100), 7}
    many = column_values(clusters)
    assert (many.null, many.values) == (False, ())
    assert many.ranges == ((7, 7), (1000, 1299), (50_000, 50_099))
    spread = column_values(set(range(0, 10_000, 10)))
    assert len(spread.ranges) == RANGES
    assert all(any(lo <= v <= hi for lo, hi in spread.ranges) for v in range(0, 10_000, 10))  # type: ignore[operator]
    words = column_values({f"k{i:04}" for i in range(300)})
    assert words.ranges == (("k0000", "k0299"),)


def test_ranges_keep_every_value_and_rule_out_the_gaps() -> None:
    values: dict[str, set[object]] = {"id": {*range(1000, 1300), 5000}}
    assert _matches(values, (1000, "a")) and _matches(values, (1299, "a"))
    assert _matches(values, (5000, "a"))
    assert not _matches(values, (1300, "a")) and not _matches(values, (4999, "a"))
