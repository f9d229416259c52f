"""The demo lakehouse: `nyc.taxis` and the `nyc.pickup_agg` MV of daily pickup counts."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from icemv.catalog.jdbc import ensure_namespace
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse

TAXIS = Identifier(("nyc",), "taxis")
PICKUP_AGG = Identifier(("nyc",), "pickup_agg")
PICKUP_AGG_SQL = (
    "SELECT date(pickup_ts) AS pickup_date, vendor_id, count(*) AS trips, "
    "sum(fare_amount) AS total_fare FROM nyc.taxis GROUP BY date(pickup_ts), vendor_id"
)
TAXIS_SCHEMA = pa.schema(
    [
        pa.field("vendor_id", pa.int64()),
        pa.field("trip_id", pa.int64()),
        pa.field("trip_distance", pa.float32()),
        pa.field("fare_amount", pa.float64()),
        pa.field("store_and_fwd_flag", pa.string()),
        pa.field("pickup_ts", pa.timestamp("us", tz="UTC")),
    ]
)


def ensure_taxis(lakehouse: Lakehouse) -> Table:
    ensure_namespace(lakehouse.catalog, TAXIS.namespace)
    try:
        return lakehouse.load_table(TAXIS)
    except NoSuchTableError:
        return lakehouse.catalog.create_table(
            TAXIS.as_tuple(), schema=TAXIS_SCHEMA, properties={"format-version": "2"}
        )


def taxi_batch(rows: int, seed: int, start: datetime | None = None) -> pa.Table:
    rng = random.Random(seed)
    start = start or datetime(2024, 1, 1, tzinfo=UTC)
    return pa.Table.from_pylist(
        [
            {
                "vendor_id": rng.randint(1, 3),
                "trip_id": seed * 1_000_000 + i,
                "trip_distance": round(rng.uniform(0.3, 20.0), 2),
                "fare_amount": round(rng.uniform(3.0, 90.0), 2),
                "store_and_fwd_flag": rng.choice("NY"),
                "pickup_ts": start + timedelta(minutes=rng.randint(0, 7 * 24 * 60)),
            }
            for i in range(rows)
        ],
        schema=TAXIS_SCHEMA,
    )


def append_taxis(lakehouse: Lakehouse, rows: int, seed: int) -> None:
    """Commit a batch as "another writer" would: pyiceberg, not icemv's Spark."""
    ensure_taxis(lakehouse).append(taxi_batch(rows, seed))
