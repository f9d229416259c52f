"""A rewrite's moved rows cancel on the projected columns, exactly (refresh/changes/reader.py)."""

from __future__ import annotations

import pytest

from icemv.lakehouse import Lakehouse
from icemv.refresh.changes.reader import change_reader

pytestmark = [pytest.mark.spark, pytest.mark.postgres]


def test_moved_rows_cancel_and_nothing_else(lakehouse: Lakehouse) -> None:
    rows = lakehouse.spark.createDataFrame(
        [
            (1, -0.0, {"a": 1}, 1),  # -0.0 in, 0.0 out: a real change, kept apart
            (1, 0.0, {"a": 1}, -1),
            (2, float("nan"), None, 1),  # moved: NaN, NULL and map values cancel
            (2, float("nan"), None, -1),
            (3, None, {"b": 2}, 1),
            (3, None, {"b": 2}, -1),
            (4, 1.5, None, 1),  # duplicates add up
            (4, 1.5, None, 1),
            (5, 2.0, None, -1),
        ],
        "id long, x double, m map<string,int>, __icemv_w int",
    )
    with change_reader(lakehouse.spark, lakehouse.catalog_name) as reader:
        cancelled = reader.netted(rows)
        assert cancelled.columns == rows.columns
        out = sorted((r[0], str(r[1]), r[2], r[3]) for r in cancelled.collect())
    assert out == [
        (1, "-0.0", {"a": 1}, 1),
        (1, "0.0", {"a": 1}, -1),
        (4, "1.5", None, 2),
        (5, "2.0", None, -1),
    ]
