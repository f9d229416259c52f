"""The literal bounds of touched keys (refresh/patch/touched_keys.py); no JVM."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from icemv.refresh.patch.touched_keys import key_bounds
from icemv.sql.delta import IN_LIST_MAX


def _sql(bounds_part: object) -> str | None:
    return None if bounds_part is None else bounds_part.sql(dialect="spark")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("family", "values", "low", "high"),
    [
        ("integral", [7, None, -3, 7, 0], "-3", "7"),
        ("string", ["b", "a'b", "\u00e9", "a\\c"], "'a\\'b'", "'\u00e9'"),
        ("date", [dt.date(2024, 3, 1), dt.date(2023, 12, 31)],
         "CAST('2023-12-31' AS DATE)", "CAST('2024-03-01' AS DATE)"),
        ("decimal", [Decimal("2.50"), Decimal("-1.05"), Decimal("1E+2")], "-1.05", "100"),
    ],
)  # fmt: skip
def test_bounds_are_the_least_and_greatest_key(
    family: str, values: list[object], low: str, high: str
) -> None:
    bounds = key_bounds(family, values)
    assert (_sql(bounds.low), _sql(bounds.high)) == (low, high)
    assert bounds.has_null == (None in values)
    distinct = {v for v in values if v is not None}
    assert len(bounds.values) == len(distinct)  # every distinct key listed once


def test_only_null_keys_have_no_range() -> None:
    bounds = key_bounds("integral", [None, None])
    assert (bounds.low, bounds.high, bounds.values, bounds.has_null) == (None, None, (), True)


def test_the_in_list_stops_where_icebergs_evaluators_stop_reading_it() -> None:
    assert len(key_bounds("integral", list(range(IN_LIST_MAX))).values) == IN_LIST_MAX
    many = key_bounds("integral", list(range(IN_LIST_MAX + 1)))
    assert many.values == () and _sql(many.high) == str(IN_LIST_MAX)
    assert key_bounds("integral", [1, 2], in_list=False).values == ()


def test_a_value_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError):
        key_bounds("integral", [True])
