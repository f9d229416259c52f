"""Equality deletes read on the driver: which apply to a data file, which rows they remove.

An equality delete (as Flink upserts write) removes the rows of older data files whose
columns equal one of its rows: it applies to a data file when its data sequence number is
higher and it is in the file's partition (or its spec is unpartitioned). The Arrow change
read (embedded/changes.py) gathers a snapshot's live ones while planning it (pyiceberg's
planner refuses them) and applies them itself: a data file read whole loses the rows whose
key is one of their values; a data file live at both ends of the range gets the positions
of those rows added to its deleted positions at each end. Handled: one column of integers
or strings, NULL matching NULL as Iceberg does (`is_in` with nulls kept). Other equality
deletes raise EngineRefusedError, and Spark reads the range.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, ManifestEntry
from pyiceberg.table import Table

from icemv.errors import EngineRefusedError
from icemv.refresh.changes.pushdown import PUSHDOWN_TYPES

_FIELD_ID = b"PARQUET:field_id"


def column_names_by_id(schema: pa.Schema) -> dict[int, str]:
    """A Parquet file's column names by their Iceberg field ids."""
    found: dict[int, str] = {}
    for column in schema:
        if column.metadata and _FIELD_ID in column.metadata:
            found[int(column.metadata[_FIELD_ID])] = column.name
    return found


@dataclass(frozen=True)
class EqualityDelete:
    file: DataFile
    sequence: int  # its data sequence number

    @property
    def field_id(self) -> int:
        return int((self.file.equality_ids or [0])[0])


def equality_delete(table: Table, entry: ManifestEntry) -> EqualityDelete:
    """The entry's delete, if the driver read applies it (one integer or string column)."""
    data = entry.data_file
    ids = list(data.equality_ids or ())
    if len(ids) != 1 or not isinstance(table.schema().find_type(ids[0]), PUSHDOWN_TYPES):
        raise EngineRefusedError("an equality delete on other than one integer or string column")
    return EqualityDelete(data, int(entry.sequence_number or 0))


@dataclass
class EqualityIndex:
    """The live equality deletes of one snapshot."""

    unpartitioned: frozenset[int]  # spec ids without partition fields
    deletes: list[EqualityDelete] = field(default_factory=list)

    @classmethod
    def of(cls, table: Table) -> EqualityIndex:
        specs = table.specs()
        return cls(frozenset(i for i, spec in specs.items() if spec.is_unpartitioned()))

    def applying(self, data: DataFile, sequence: int) -> list[EqualityDelete]:
        """The deletes that apply to a data file of that data sequence number."""
        return [
            d
            for d in self.deletes
            if d.sequence > sequence
            and (
                d.file.spec_id in self.unpartitioned
                or (d.file.spec_id == data.spec_id and d.file.partition == data.partition)
            )
        ]


class EqualityValues:
    """Delete files' key values, each file read once; and the rows they match."""

    def __init__(self, io: FileIO) -> None:
        self._io = io
        self._read: dict[str, pa.Array] = {}

    def of(self, delete: EqualityDelete) -> pa.Array:
        cached = self._read.get(delete.file.file_path)
        if cached is not None:
            return cached
        with self._io.new_input(delete.file.file_path).open() as stream:
            parquet = pq.ParquetFile(stream)
            name = column_names_by_id(parquet.schema_arrow).get(delete.field_id)
            if name is None:
                raise EngineRefusedError(f"{delete.file.file_path}: no key column by field id")
            values = parquet.read(columns=[name]).column(0).combine_chunks()
        self._read[delete.file.file_path] = values
        return values

    def matched(self, deletes: Iterable[EqualityDelete], key: pa.Array, field_id: int) -> pa.Array:
        """Which values of `key` (the column of that field id) the `deletes` on that column
        remove (NULL matching NULL)."""
        mask = pa.repeat(pa.scalar(False), len(key))
        for delete in deletes:
            if delete.field_id != field_id:
                continue
            values = self.of(delete).cast(key.type)
            mask = pc.or_(mask, pc.is_in(key, value_set=values, skip_nulls=False))
        return mask
