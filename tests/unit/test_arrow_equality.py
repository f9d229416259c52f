"""Which equality deletes apply to a data file, and which rows they remove (no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from icemv.refresh.embedded.equality import EqualityDelete, EqualityIndex, EqualityValues


def _file(
    path: str, spec_id: int = 0, partition: tuple[object, ...] = (), **kw: object
) -> DataFile:
    data = DataFile.from_args(
        content=kw.get("content", DataFileContent.DATA),
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=1,
        file_size_in_bytes=1,
        equality_ids=kw.get("equality_ids"),
    )
    data.spec_id = spec_id
    return data


def _delete(
    path: str, sequence: int, spec_id: int = 0, partition: tuple[object, ...] = ()
) -> EqualityDelete:
    return EqualityDelete(
        _file(path, spec_id, partition, content=DataFileContent.EQUALITY_DELETES, equality_ids=[1]),
        sequence,
    )


def test_a_delete_applies_to_older_files_of_its_partition_or_to_all_if_unpartitioned() -> None:
    index = EqualityIndex(unpartitioned=frozenset({0}))
    index.deletes += [_delete("global", 5), _delete("day1", 5, 1, ("d1",))]
    older, same, newer = (
        (_file("f", 1, ("d1",)), 4),
        (_file("f", 1, ("d1",)), 5),
        (_file("f", 1, ("d1",)), 6),
    )
    assert [d.file.file_path for d in index.applying(*older)] == ["global", "day1"]
    assert index.applying(*same) == [] and index.applying(*newer) == []
    other_day = _file("g", 1, ("d2",))
    assert [d.file.file_path for d in index.applying(other_day, 1)] == ["global"]


def test_values_match_nulls_as_iceberg_does(tmp_path: object) -> None:
    path = f"{tmp_path}/eq.parquet"
    field = pa.field("vendor", pa.string(), metadata={b"PARQUET:field_id": b"1"})
    pq.write_table(
        pa.table({"vendor": pa.array(["a", None], pa.string())}, schema=pa.schema([field])), path
    )
    values = EqualityValues(PyArrowFileIO())
    delete = _delete(path, 1)
    key = pa.array(["a", "b", None, "a"])
    assert values.matched([delete], key, 1).to_pylist() == [True, False, True, True]
    assert values.matched([delete], key, 2).to_pylist() == [False] * 4  # another column's
