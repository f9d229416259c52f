"""Base tables for tests, written the way "another writer" would: with pyiceberg."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
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
    values: list[str | float | None],
    name: str = "trips",
) -> None:
    """Commit an equality-delete file (as Flink upserts write), through Iceberg's Java API."""
    spark = lakehouse.spark
    jvm: Any = spark.sparkContext._jvm
    gateway: Any = spark.sparkContext._gateway
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, lakehouse.quoted(Identifier((namespace,), name))
    )
    schema = table.schema()
    delete_schema = schema.select(jvm.java.util.Collections.singletonList(column))
    field_ids = gateway.new_array(jvm.int, 1)
    field_ids[0] = schema.findField(column).fieldId()
    factory = jvm.org.apache.iceberg.data.GenericAppenderFactory(
        schema, table.spec(), field_ids, delete_schema, None
    )
    path = table.locationProvider().newDataLocation(f"eq-delete-{uuid.uuid4().hex}.parquet")
    output = jvm.org.apache.iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
        table.io().newOutputFile(path)
    )
    writer = factory.newEqDeleteWriter(output, jvm.org.apache.iceberg.FileFormat.PARQUET, None)
    for value in values:
        record = jvm.org.apache.iceberg.data.GenericRecord.create(delete_schema)
        record.setField(column, value)
        writer.write(record)
    writer.close()
    table.newRowDelta().addDeletes(writer.toDeleteFile()).commit()


def equality_delete_ids(lakehouse: Lakehouse, quoted: str, column: str, ids: range) -> None:
    """Commit an equality-delete file on a BIGINT column naming `ids` (as a Flink upsert
    writes): written with pyarrow (the field id in the Parquet schema, as Iceberg reads
    it), added with Iceberg's Java API. Local warehouses only."""
    import pyarrow.parquet as pq

    spark = lakehouse.spark
    jvm: Any = spark.sparkContext._jvm
    gateway: Any = spark.sparkContext._gateway
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, quoted)
    field_id = int(table.schema().findField(column).fieldId())
    path = str(table.locationProvider().newDataLocation(f"eq-delete-{uuid.uuid4().hex}.parquet"))
    local = Path(path.removeprefix("file:"))
    local.parent.mkdir(parents=True, exist_ok=True)
    field = pa.field(column, pa.int64(), metadata={b"PARQUET:field_id": str(field_id).encode()})
    values = pa.array(ids, pa.int64())
    pq.write_table(pa.Table.from_arrays([values], schema=pa.schema([field])), str(local))
    field_ids = gateway.new_array(jvm.int, 1)
    field_ids[0] = field_id
    delete = (
        jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec())
        .ofEqualityDeletes(field_ids)
        .withPath(path)
        .withFormat("parquet")
        .withFileSizeInBytes(local.stat().st_size)
        .withRecordCount(len(ids))
        .build()
    )
    table.newRowDelta().addDeletes(delete).commit()
