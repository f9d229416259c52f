"""A joined table read restricted to a delta's keys (refresh/embedded/reads.py
`matching_rows`) holds exactly the rows whose key is among the values (NULL when asked),
whatever the route: a short list pyiceberg filters by, a long one filtered batch by batch,
BIGINT values against an INT column, string and date keys, files pruned by the values'
bounds, and a table with equality deletes (read by icemv). Checked against the table read
whole and filtered in Python."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.embedded.reads import matching_rows
from tests.support.tables import equality_delete

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

ROWS = pa.schema(
    [
        pa.field("k", pa.int32()),
        pa.field("name", pa.string()),
        pa.field("day", pa.date32()),
        pa.field("v", pa.int64()),
    ]
)
DAY0 = dt.date(2024, 1, 1)


def _rows(start: int, count: int) -> pa.Table:
    ids = range(start, start + count)
    return pa.Table.from_pydict(
        {
            "k": [None if i % 97 == 0 else i for i in ids],
            "name": [None if i % 89 == 0 else f"n{i % 500}" for i in ids],
            "day": [DAY0 + dt.timedelta(days=i % 400) for i in ids],
            "v": list(ids),
        },
        schema=ROWS,
    )


def _expected(table: pa.Table, column: str, values: set[Any], with_null: bool) -> set[int]:
    return {
        row["v"]
        for row in table.to_pylist()
        if row[column] in values or (with_null and row[column] is None)
    }


CASES = [
    ("k", set(range(100, 150)), False),  # a short list
    ("k", set(range(0, 6000, 7)) | {2**40}, True),  # long, NULL too, a BIGINT past INT
    ("name", {f"n{i}" for i in range(0, 500, 2)}, False),  # long strings
    ("day", {DAY0 + dt.timedelta(days=d) for d in (0, 5, 399)}, True),
    ("k", set(), True),  # NULL only
]


def test_restricted_reads_keep_exactly_the_matching_rows(
    lakehouse: Lakehouse, namespace: str
) -> None:
    table = lakehouse.catalog.create_table(
        (namespace, "dim"), schema=ROWS, properties={"format-version": "2"}
    )
    for start in (0, 3000):  # two data files with disjoint key bounds
        table.append(_rows(start, 3000))
    table = lakehouse.load_table(Identifier((namespace,), "dim"))
    whole = table.scan().to_arrow()
    snapshot = table.current_snapshot()
    assert snapshot is not None
    for column, values, with_null in CASES:
        rows = matching_rows(
            table,
            snapshot.snapshot_id,
            table.schema(),
            ("v", column),
            column,
            list(values),
            with_null,
        )
        assert rows.column_names == ["v", column]
        assert set(rows.column("v").to_pylist()) == _expected(whole, column, values, with_null)
        assert rows.num_rows == len(set(rows.column("v").to_pylist()))
    # Equality deletes (pyiceberg's scan refuses them): icemv reads and filters.
    equality_delete(lakehouse, namespace, "k", [100, 101, None], name="dim")
    table = lakehouse.load_table(Identifier((namespace,), "dim"))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    gone = pc.is_in(whole["k"], pa.array([100, 101], pa.int32()))
    live = whole.filter(pc.and_(pc.invert(gone), pc.is_valid(whole["k"])))
    for column, values, with_null in CASES:
        rows = matching_rows(
            table, snapshot.snapshot_id, table.schema(), ("v",), column, list(values), with_null
        )
        assert set(rows.column("v").to_pylist()) == _expected(live, column, values, with_null)
