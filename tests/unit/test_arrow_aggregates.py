"""refresh/patch/arrow_aggregates.py, without storage: the merge rules of
aggregate_rules.py evaluated in Arrow (new groups, NULL keys and arguments, groups whose
inputs were all NULL, the WHERE), and what stays with Spark. No JVM."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.types import DoubleType, IcebergType, LongType, StringType

from icemv.errors import ArrowUnsupportedError
from icemv.refresh.patch.arrow_aggregates import ArrowAggregateDelta, compile_aggregate_delta
from icemv.sql.analysis import AggregateAnalysis, analyse
from icemv.sql.names import WEIGHT
from icemv.sql.state import aggregate_state
from tests.unit.sources import Sources

SOURCES = Sources(tables={"nyc.trips": ("id", "vendor", "fare")})
SOURCE = pa.schema([("id", pa.int64()), ("vendor", pa.large_string()), ("fare", pa.float64())])
SQL = (
    "SELECT vendor, count(*) AS n, sum(fare) AS total, avg(fare) AS mean, min(fare) AS lo, "
    "max(id) AS hi FROM trips WHERE id > 0 GROUP BY vendor"
)
TYPES: dict[str, IcebergType] = {
    "vendor": StringType(),
    "n": LongType(),
    "total": DoubleType(),
    "mean": DoubleType(),
    "lo": DoubleType(),
    "hi": LongType(),
    "_icemv_count_total": LongType(),
    "_icemv_sum_mean": DoubleType(),
    "_icemv_count_mean": LongType(),
}
ARROW = {LongType(): pa.int64(), DoubleType(): pa.float64(), StringType(): pa.large_string()}


def _analysis(sql: str) -> AggregateAnalysis:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert isinstance(analysis, AggregateAnalysis), analysis
    return analysis


def _compiled(sql: str, types: dict[str, IcebergType]) -> ArrowAggregateDelta:
    analysis = _analysis(sql)
    state = aggregate_state(analysis)
    storage = pa.schema([(name, ARROW[t]) for name, t in types.items()])
    assert list(storage.names) == [*analysis.output_columns, *(c.name for c in state)]
    return compile_aggregate_delta(analysis, SOURCE, storage, state, types)


def _table(schema: pa.Schema, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def test_merged_rows_follow_the_rules() -> None:
    delta = _compiled(SQL, TYPES)
    storage = pa.schema([(name, ARROW[t]) for name, t in TYPES.items()])
    stored = _table(
        storage,
        [
            dict(vendor="a", n=2, total=22.5, mean=11.25, lo=10.0, hi=2, _icemv_count_total=2,
                 _icemv_sum_mean=22.5, _icemv_count_mean=2),
            # Only NULL fares so far: SUM and AVG are NULL, their counts 0.
            dict(vendor="b", n=1, total=None, mean=None, lo=None, hi=3, _icemv_count_total=0,
                 _icemv_sum_mean=None, _icemv_count_mean=0),
            dict(vendor="z", n=1, total=1.0, mean=1.0, lo=1.0, hi=4, _icemv_count_total=1,
                 _icemv_sum_mean=1.0, _icemv_count_mean=1),
        ],
    )  # fmt: skip
    appended = _table(
        SOURCE,
        [
            dict(id=7, vendor="a", fare=1.0),
            dict(id=8, vendor="b", fare=None),
            dict(id=9, vendor="b", fare=4.0),
            dict(id=10, vendor=None, fare=2.0),  # a new group, keyed NULL
            dict(id=-1, vendor="a", fare=100.0),  # filtered out
        ],
    )
    merged = delta.merged(appended, stored)
    rows = sorted(merged.to_pylist(), key=lambda r: r["vendor"] or "")
    assert rows == [
        dict(vendor=None, n=1, total=2.0, mean=2.0, lo=2.0, hi=10, _icemv_count_total=1,
             _icemv_sum_mean=2.0, _icemv_count_mean=1),
        dict(vendor="a", n=3, total=23.5, mean=23.5 / 3, lo=1.0, hi=7, _icemv_count_total=3,
             _icemv_sum_mean=23.5, _icemv_count_mean=3),
        dict(vendor="b", n=3, total=4.0, mean=4.0, lo=4.0, hi=9, _icemv_count_total=1,
             _icemv_sum_mean=4.0, _icemv_count_mean=1),
    ]  # fmt: skip


def test_signed_rows_merge_deviations_and_drop_empty_groups() -> None:
    """Under deletes (signed weights): (n, mean, M2) of the deleted rows out, of the
    inserted in; a row deleted twice counts twice; a group left with no row goes."""
    sql = "SELECT vendor, count(*) AS n, stddev(fare) AS sd FROM trips GROUP BY vendor"
    types: dict[str, IcebergType] = {
        "vendor": StringType(),
        "n": LongType(),
        "sd": DoubleType(),
        "_icemv_count_sd": LongType(),
        "_icemv_mean_sd": DoubleType(),
        "_icemv_m2_sd": DoubleType(),
    }
    analysis = _analysis(sql)
    storage = pa.schema([(name, ARROW[t]) for name, t in types.items()])
    delta = compile_aggregate_delta(
        analysis, SOURCE, storage, aggregate_state(analysis), types, with_deletes=True
    )
    # a: fares 1, 2, 2, 4 (mean 2.25, M2 4.75); b: one fare 5.
    stored = _table(
        storage,
        [
            dict(vendor="a", n=4, sd=(4.75 / 3) ** 0.5, _icemv_count_sd=4, _icemv_mean_sd=2.25,
                 _icemv_m2_sd=4.75),
            dict(vendor="b", n=1, sd=None, _icemv_count_sd=1, _icemv_mean_sd=5.0,
                 _icemv_m2_sd=0.0),
        ],
    )  # fmt: skip
    weighted = SOURCE.append(pa.field(WEIGHT, pa.int32()))
    changed = _table(
        weighted,
        [
            dict(id=1, vendor="a", fare=2.0, **{WEIGHT: -2}),  # both 2s
            dict(id=2, vendor="a", fare=10.0, **{WEIGHT: 1}),
            dict(id=3, vendor="b", fare=5.0, **{WEIGHT: -1}),  # b's last row
        ],
    )
    rows = delta.merged(changed, stored).to_pylist()
    assert [r["vendor"] for r in rows] == ["a"]
    (a,) = rows
    # a: fares 1, 4, 10: mean 5, M2 16 + 1 + 25 = 42.
    assert (a["n"], a["_icemv_count_sd"]) == (3, 3)
    assert a["_icemv_mean_sd"] == pytest.approx(5.0)
    assert a["_icemv_m2_sd"] == pytest.approx(42.0)
    assert a["sd"] == pytest.approx(21.0**0.5)


def test_nan_under_min_is_left_to_spark() -> None:
    delta = _compiled(SQL, TYPES)
    storage = pa.schema([(name, ARROW[t]) for name, t in TYPES.items()])
    appended = _table(SOURCE, [dict(id=1, vendor="a", fare=float("nan"))])
    with pytest.raises(ArrowUnsupportedError, match="NaN"):
        delta.merged(appended, storage.empty_table())


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT vendor, count(DISTINCT id) AS n FROM trips GROUP BY vendor", "recompute"),
        ("SELECT fare, count(*) AS n FROM trips GROUP BY fare", "group key"),
        ("SELECT vendor, min(vendor) AS m FROM trips GROUP BY vendor", "MIN of"),
        ("SELECT vendor, sum(fare % 2) AS m FROM trips GROUP BY vendor", "Mod of double"),
        ("SELECT a.vendor, count(*) AS n FROM trips a JOIN trips b ON a.id = b.id "
         "GROUP BY a.vendor", "no unchanged table"),
    ],
)  # fmt: skip
def test_outside_the_subset(sql: str, reason: str) -> None:
    analysis = _analysis(sql)
    state = aggregate_state(analysis)
    names = [*analysis.output_columns, *(c.name for c in state)]
    storage = pa.schema([(n, pa.int64()) for n in names])
    types: dict[str, IcebergType] = {n: LongType() for n in names}
    with pytest.raises(ArrowUnsupportedError, match=reason):
        compile_aggregate_delta(analysis, SOURCE, storage, state, types)
