"""Base tables for tests, written the way "another writer" would: with pyiceberg."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyiceberg.table import Table

from daemon.identifiers import Identifier
from daemon.lakehouse import Lakehouse

TRIPS = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("vendor", pa.string()),
        pa.field("fare", pa.float64()),
        pa.field("day", pa.date32()),
    ]
)


def trips(rows: list[tuple[Any, ...]]) -> pa.Table:
    return pa.Table.from_pylist(
        [dict(zip(TRIPS.names, row, strict=True)) for row in rows], schema=TRIPS
    )


def create_trips(
    lakehouse: Lakehouse,
    namespace: str,
    name: str = "trips",
    rows: list[tuple[Any, ...]] | None = None,
) -> Table:
    table = lakehouse.catalog.create_table(
        (namespace, name), schema=TRIPS, properties={"format-version": "2"}
    )
    if rows:
        table.append(trips(rows))
    return lakehouse.load_table(Identifier((namespace,), name))


def append_trips(
    lakehouse: Lakehouse, namespace: str, rows: list[tuple[Any, ...]], name: str = "trips"
) -> int:
    table = lakehouse.load_table(Identifier((namespace,), name))
    table.append(trips(rows))
    snapshot = lakehouse.load_table(Identifier((namespace,), name)).current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id
