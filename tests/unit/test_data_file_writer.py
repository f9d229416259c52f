"""The commit's own data-file writer (refresh/commit/driver.py `_data_files`) writes the
file pyiceberg's writer writes: the same Parquet schema (field ids, sanitized names),
rows and statistics. Over pyiceberg's SQLite catalog in a temporary warehouse."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import DataFile

from icemv.catalog.arrow_schemas import arrow_schema
from icemv.refresh.commit.driver import _data_files, _file_layout

ROWS = pa.table(
    {
        "hour": pa.array(
            [datetime(2026, 1, 1, h, tzinfo=UTC) for h in range(3)] + [None],
            pa.timestamp("us", tz="UTC"),
        ),
        "total amount": pa.array(
            [Decimal("1.25"), Decimal("-0.01"), None, Decimal("99999999999999999999.99")],
            pa.decimal128(22, 2),
        ),
        "vendor": ["a", None, "ccc", "b"],
        "n": pa.array([1, 2, 3, None], pa.int64()),
        "ratio": [0.5, float("nan"), None, -1.0],
    }
)
STATISTICS = (
    "record_count", "value_counts", "null_value_counts", "nan_value_counts",
    "lower_bounds", "upper_bounds", "split_offsets", "file_format", "content",
)  # fmt: skip


def _local(data_file: DataFile) -> str:
    return data_file.file_path.removeprefix("file://")


def test_the_file_is_the_one_pyiceberg_writes(tmp_path: Path) -> None:
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    table = catalog.create_table("n.t", schema=ROWS.schema)
    rows = ROWS.cast(arrow_schema(table.schema()))
    assert _file_layout(table.metadata) is not None
    (ours,) = _data_files(table.metadata, rows, table, uuid.uuid4())
    (theirs,) = _dataframe_to_data_files(table.metadata, rows, table.io, write_uuid=uuid.uuid4())
    for field in STATISTICS:
        assert getattr(ours, field) == getattr(theirs, field), field
    assert ours.file_path != theirs.file_path
    assert ours.file_path.endswith(".parquet") and ours.file_size_in_bytes > 0
    ours_file, theirs_file = pq.ParquetFile(_local(ours)), pq.ParquetFile(_local(theirs))
    assert ours_file.schema_arrow == theirs_file.schema_arrow
    assert "total_x20amount" in ours_file.schema_arrow.names  # sanitized, as pyiceberg's
    assert ours_file.schema.equals(theirs_file.schema)  # field ids included
    assert str(ours_file.read().to_pylist()) == str(theirs_file.read().to_pylist())  # NaN


def test_a_partitioned_table_is_left_to_pyiceberg(tmp_path: Path) -> None:
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("n")
    table = catalog.create_table("n.t", schema=ROWS.schema)
    with table.update_spec() as spec:
        spec.add_identity("vendor")
    table = catalog.load_table("n.t")
    assert _file_layout(table.metadata) is None
    rows = ROWS.cast(arrow_schema(table.schema()))
    written = _data_files(table.metadata, rows, table, uuid.uuid4())
    assert sorted(f.record_count for f in written) == [1, 1, 1, 1]  # one per vendor
