"""Base tables for tests, written the way "another writer" would: with pyiceberg."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyiceberg.table import Table

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse

TRIPS = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("vendor", pa.string()),
        pa.field("fare", pa.float64()),
        pa.field("day", pa.date32()),
    ]
)


# Two vendors, a NULL vendor and a NULL fare, over two days: most shapes' edge cases.
SAMPLE_TRIPS: list[tuple[Any, ...]] = [
    (1, "a", 10.0, dt.date(2024, 1, 1)),
    (2, "a", 12.5, dt.date(2024, 1, 1)),
    (3, "b", None, dt.date(2024, 1, 1)),
    (4, None, 7.5, dt.date(2024, 1, 2)),
    (5, "b", 2.5, dt.date(2024, 1, 2)),
    (6, "b", 4.0, dt.date(2024, 1, 2)),
]


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


def equality_delete(
    lakehouse: Lakehouse,
    namespace: str,
    column: str,
    values: Sequence[object],
    name: str = "trips",
) -> None:
    """Commit an equality-delete file on `column` naming `values` (as Flink upserts
    write): written with pyarrow through the table's FileIO (the field id in the Parquet
    schema, as Iceberg reads it), added with Iceberg's Java API."""
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    identifier = Identifier((namespace,), name)
    table = lakehouse.load_table(identifier)
    field = table.schema().find_field(column)
    arrow = schema_to_pyarrow(table.schema().select(column)).field(0)  # carries the field id
    rows = pa.Table.from_arrays([pa.array(values, arrow.type)], schema=pa.schema([arrow]))
    path = table.location_provider().new_data_location(f"eq-delete-{uuid.uuid4().hex}.parquet")
    output = table.io.new_output(path)
    with output.create(overwrite=True) as stream:
        pq.write_table(rows, stream)
    spark = lakehouse.spark
    jvm: Any = spark.sparkContext._jvm
    gateway: Any = spark.sparkContext._gateway
    java_table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, lakehouse.quoted(identifier)
    )
    field_ids = gateway.new_array(jvm.int, 1)
    field_ids[0] = field.field_id
    delete = (
        jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(java_table.spec())
        .ofEqualityDeletes(field_ids)
        .withPath(path)
        .withFormat("parquet")
        .withFileSizeInBytes(len(table.io.new_input(path)))
        .withRecordCount(len(values))
        .build()
    )
    java_table.newRowDelta().addDeletes(delete).commit()


def create_spark_table(lakehouse: Lakehouse, table: str, columns: str, values: str) -> None:
    """A format v2 merge-on-read table (quoted name `table`) made and filled by Spark."""
    lakehouse.spark.sql(
        f"CREATE TABLE {table} ({columns}) USING iceberg TBLPROPERTIES ('format-version' = "
        "'2', 'write.delete.mode' = 'merge-on-read', 'write.update.mode' = 'merge-on-read')"
    )
    lakehouse.spark.sql(f"INSERT INTO {table} VALUES {values}")
