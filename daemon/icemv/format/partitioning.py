"""Partition expressions for storage tables (`days(pickup_ts)`, `bucket(16, id)`, `vendor`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import IcebergType

from icemv.errors import PartitionSpecError

_UNARY: dict[str, type[Transform[Any, Any]]] = {
    "years": YearTransform,
    "year": YearTransform,
    "months": MonthTransform,
    "month": MonthTransform,
    "days": DayTransform,
    "day": DayTransform,
    "date": DayTransform,
    "hours": HourTransform,
    "hour": HourTransform,
}


@dataclass(frozen=True)
class PartitionField:
    source_column: str
    transform: Transform[Any, Any]
    name: str


_CALL = re.compile(r"^\s*(\w+)\s*\(\s*(?:(\d+)\s*,\s*)?([^(),]+?)\s*\)\s*$")
_COLUMN = re.compile(r"^\s*`?([^`(),]+?)`?\s*$")


def parse_partition_field(text: str) -> PartitionField:
    if call := _CALL.match(text):
        name, width, column = call.group(1).lower(), call.group(2), call.group(3).strip("` ")
        if name in _UNARY and width is None:
            return PartitionField(column, _UNARY[name](), f"{column}_{name.rstrip('s')}")
        if name in ("bucket", "truncate") and width is not None:
            n = int(width)
            if n < 1:
                raise PartitionSpecError(f"{name} width must be at least 1 in {text!r}")
            transform: Transform[Any, Any] = (
                BucketTransform(n) if name == "bucket" else TruncateTransform(n)
            )
            return PartitionField(column, transform, f"{column}_{name}")
    elif column := _COLUMN.match(text):
        return PartitionField(column.group(1), IdentityTransform(), column.group(1))
    raise PartitionSpecError(
        f"unsupported partition expression {text!r}: use a column, years/months/days/hours(col), "
        "bucket(N, col) or truncate(N, col)"
    )


def check_source_type(field: PartitionField, source_type: IcebergType) -> None:
    """Refuses a transform the column's type does not support (`days` of a string).

    pyiceberg would accept some of these into the spec and every later write would fail.
    """
    if not field.transform.can_transform(source_type):
        raise PartitionSpecError(
            f"partition transform {field.transform} cannot apply to column "
            f"{field.source_column!r} of type {source_type}"
        )
