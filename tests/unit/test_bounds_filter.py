"""The file filter of the rows a patch removes (refresh/patch/row_images.py
`bounds_filter`): a DECIMAL bound is widened to its storage column's scale, exactly, for
values of every width a DECIMAL(38, s) column holds."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThanOrEqual
from pyiceberg.schema import Schema
from pyiceberg.types import DecimalType, NestedField

from icemv.refresh.patch.row_images import bounds_filter


def test_a_decimal_bound_of_38_digits_is_widened_exactly() -> None:
    """A DECIMAL(38, 6) value has up to 38 digits: past Python's default 28, rounding it
    to a scale raised InvalidOperation and the refresh failed (found by make fuzz-sql)."""
    low = Decimal("1881676372353657772490265749424.926")  # 34 digits, scale 3
    high = Decimal("1881676372353657772490265749425.001")
    schema = Schema(NestedField(1, "c", DecimalType(38, 6), required=False))
    rows = pa.table({"c": pa.array([low, high], pa.decimal128(37, 3))})
    assert bounds_filter(rows, schema) == And(
        GreaterThanOrEqual(term="c", value=Decimal("1881676372353657772490265749424.926000")),
        LessThanOrEqual(term="c", value=Decimal("1881676372353657772490265749425.001000")),
    )
