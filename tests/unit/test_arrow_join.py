"""refresh/patch/arrow_select.py's joins, without storage: appended fact rows joined with an
unchanged dimension as Spark joins them (NULL keys never match, duplicate dimension keys
multiply rows, LEFT JOIN pads an unmatched row with NULLs, integer keys compared widened),
signed change rows joined each keeping its weight (the rows and the aggregate delta read
it), and the ON conditions and key types that stay with Spark. No JVM."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.types import DoubleType, LongType, StringType
from sqlglot import exp

from icemv.errors import ArrowUnsupportedError
from icemv.refresh.patch.arrow_aggregates import compile_aggregate_delta
from icemv.refresh.patch.arrow_rows import ArrowRowsDelta, compile_rows_delta
from icemv.refresh.patch.arrow_select import referenced_columns
from icemv.sql.analysis import AggregateAnalysis, RowsAnalysis, analyse
from icemv.sql.names import WEIGHT
from icemv.sql.state import aggregate_state
from tests.unit.sources import Sources

SOURCES = Sources(
    tables={
        "nyc.trips": ("id", "zone", "fare", "tag"),
        "nyc.zones": ("zone", "region", "active", "code"),
    }
)
TRIPS = pa.schema(
    [("id", pa.int64()), ("zone", pa.int32()), ("fare", pa.float64()), ("tag", pa.large_string())]
)
ZONES = pa.schema(
    [
        ("zone", pa.int64()),  # wider than trips.zone: Spark compares in BIGINT
        ("region", pa.large_string()),
        ("active", pa.bool_()),
        ("code", pa.float64()),
    ]
)
APPENDED = pa.Table.from_pylist(
    [
        {"id": 1, "zone": 10, "fare": 5.0, "tag": "x"},
        {"id": 2, "zone": 20, "fare": 7.0, "tag": "y"},  # two dimension rows: two rows
        {"id": 3, "zone": None, "fare": 1.0, "tag": "z"},  # NULL key: never matches
        {"id": 4, "zone": 99, "fare": 2.0, "tag": None},  # no dimension row
    ],
    schema=TRIPS,
)
DIMENSION = pa.Table.from_pylist(
    [
        {"zone": 10, "region": "north", "active": True, "code": 1.0},
        {"zone": 20, "region": "south", "active": True, "code": 2.0},
        {"zone": 20, "region": "south2", "active": False, "code": 2.5},
        {"zone": None, "region": "nowhere", "active": True, "code": 3.0},
    ],
    schema=ZONES,
)


def _delta(
    sql: str, outputs: list[tuple[str, pa.DataType]]
) -> tuple[ArrowRowsDelta, tuple[str, ...]]:
    """The compiled delta, and the dimension columns it reads."""
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert isinstance(analysis, RowsAnalysis), analysis
    query = analysis.query
    assert isinstance(query, exp.Select)
    alias = query.args["joins"][0].this.alias_or_name
    columns = referenced_columns(query, alias)
    dimension = pa.schema([ZONES.field(c) for c in columns])
    return compile_rows_delta(analysis, TRIPS, pa.schema(outputs), {alias: dimension}), columns


def _rows(
    sql: str, outputs: list[tuple[str, pa.DataType]], changed: pa.Table = APPENDED
) -> Counter[tuple[Any, ...]]:
    delta, columns = _delta(sql, outputs)
    joined = delta.select.joined(changed, [DIMENSION.select(list(columns))])
    return Counter(tuple(row.values()) for row in delta.projected(joined).to_pylist())


OUT = [("id", pa.int64()), ("region", pa.large_string())]


def test_inner_join_matches_as_spark() -> None:
    sql = "SELECT t.id, z.region FROM trips t JOIN zones z ON t.zone = z.zone"
    assert _rows(sql, OUT) == Counter({(1, "north"): 1, (2, "south"): 1, (2, "south2"): 1})


def test_left_join_pads_unmatched_rows() -> None:
    sql = "SELECT t.id, z.region FROM trips t LEFT JOIN zones z ON t.zone = z.zone"
    assert _rows(sql, OUT) == Counter(
        {(1, "north"): 1, (2, "south"): 1, (2, "south2"): 1, (3, None): 1, (4, None): 1}
    )


def test_on_terms_over_one_side_and_the_where() -> None:
    # A dimension-only ON term filters the dimension, under LEFT too (id 2 keeps one row;
    # id 1's row stays, padded, when its zone is filtered out).
    sql = (
        "SELECT t.id, z.region FROM trips t LEFT JOIN zones z "
        "ON t.zone = z.zone AND z.active AND z.region <> 'north' WHERE t.id < 4"
    )
    assert _rows(sql, OUT) == Counter({(1, None): 1, (2, "south"): 1, (3, None): 1})
    # Under INNER a fact-only ON term filters the fact rows.
    sql = "SELECT t.id, z.region FROM trips t JOIN zones z ON t.zone = z.zone AND t.fare > 6"
    assert _rows(sql, OUT) == Counter({(2, "south"): 1, (2, "south2"): 1})


# Signed change rows (arrow_changes.py): deleted rows of a matched key, a duplicated key
# and a NULL key, an added unmatched row, and a row added twice (weights sum identical rows).
SIGNED = pa.Table.from_pylist(
    [
        {"id": 1, "zone": 10, "fare": 5.0, "tag": "x", WEIGHT: -1},
        {"id": 2, "zone": 20, "fare": 7.0, "tag": "y", WEIGHT: -1},
        {"id": 3, "zone": None, "fare": 1.0, "tag": "z", WEIGHT: -1},
        {"id": 4, "zone": 99, "fare": 2.0, "tag": None, WEIGHT: 1},
        {"id": 5, "zone": 10, "fare": 8.0, "tag": "x", WEIGHT: 2},
    ],
    schema=TRIPS.append(pa.field(WEIGHT, pa.int32(), nullable=False)),
)


def test_signed_rows_keep_their_weight_through_the_join() -> None:
    """Each joined row carries its fact row's weight: the delta of `dtrips JOIN zones`."""
    inner = "SELECT t.id, z.region FROM trips t JOIN zones z ON t.zone = z.zone"
    expected: dict[tuple[Any, ...], int] = {
        (1, "north", -1): 1,
        (2, "south", -1): 1,
        (2, "south2", -1): 1,
        (5, "north", 2): 1,
    }
    assert _rows(inner, OUT, SIGNED) == Counter(expected)
    left = inner.replace(" JOIN ", " LEFT JOIN ")
    expected.update({(3, None, -1): 1, (4, None, 1): 1})  # padded, with their weights
    assert _rows(left, OUT, SIGNED) == Counter(expected)


def test_signed_rows_joined_merge_into_an_aggregate() -> None:
    """The aggregate delta reads the weight of joined rows: groups lose the deleted rows'
    counts and sums (a duplicated key's row leaves both its groups), and go when empty."""
    sql = (
        "SELECT z.region, count(*) AS n, sum(t.fare) AS total "
        "FROM trips t LEFT JOIN zones z ON t.zone = z.zone GROUP BY z.region"
    )
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert isinstance(analysis, AggregateAnalysis), analysis
    state = aggregate_state(analysis)
    types = {"region": StringType(), "n": LongType(), "total": DoubleType()}
    types.update({c.name: LongType() for c in state})  # the SUM's input count
    arrow = {StringType(): pa.large_string(), LongType(): pa.int64(), DoubleType(): pa.float64()}
    storage = pa.schema([(name, arrow[t]) for name, t in types.items()])
    dimension = pa.schema([ZONES.field("zone"), ZONES.field("region")])
    delta = compile_aggregate_delta(
        analysis, TRIPS, storage, state, types, {"z": dimension}, with_deletes=True
    )
    # Stored: ids 1, 2, 3 (id 2 in south and in south2; id 3 padded: region NULL).
    stored = pa.Table.from_pylist(
        [
            dict(zip(storage.names, row, strict=True))
            for row in [("north", 1, 5.0, 1), ("south", 1, 7.0, 1), ("south2", 1, 7.0, 1),
                        (None, 1, 1.0, 1)]
        ],
        schema=storage,
    )  # fmt: skip
    joined = delta.select.joined(SIGNED, [DIMENSION.select(["zone", "region"])])
    merged = delta.merged(joined, stored).to_pylist()
    # north: -5 (id 1) + 2 x 8 (id 5); NULL: -1 (id 3) + 2 (id 4); south, south2: gone.
    assert Counter(tuple(r.values()) for r in merged) == Counter(
        [("north", 2, 16.0, 2), (None, 1, 2.0, 1)]
    )


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT t.id, z.region FROM trips t JOIN zones z ON t.fare = z.code", "join key of"),
        ("SELECT t.id, z.region FROM trips t JOIN zones z ON t.tag = z.zone", "join key of"),
        ("SELECT t.id, z.region FROM trips t JOIN zones z ON t.zone < z.zone", "ON term"),
        ("SELECT t.id, z.region FROM trips t JOIN zones z ON t.zone <=> z.zone", "ON term"),
        (
            "SELECT t.id, z.region FROM trips t LEFT JOIN zones z "
            "ON t.zone = z.zone AND t.fare > 1",
            "ON term",
        ),
        ("SELECT t.id, z.region FROM trips t FULL JOIN zones z ON t.zone = z.zone", "FULL"),
        ("SELECT t.id, z.region FROM trips t CROSS JOIN zones z", "CROSS"),
    ],
    ids=[
        "double-key",
        "string-int-key",
        "inequality",
        "null-safe",
        "left-fact-term",
        "full",
        "cross",
    ],
)
def test_outside_the_subset_refuses(sql: str, reason: str) -> None:
    with pytest.raises(ArrowUnsupportedError, match=reason):
        _delta(sql, OUT)
