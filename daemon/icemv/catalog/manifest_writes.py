"""Manifest and manifest-list writers set up once per schema, not once per file.

Every storage commit writes two or three Avro files through pyiceberg (the added
manifest, the deleted files' manifest, the manifest list), and pyiceberg sets up each one
from scratch: it builds the manifest entry schema for the table's partition type (twice:
the file's format version and its read version), resolves a writer tree from one to the
other, and converts the file schema to Avro JSON for the header. That is ~0.7 ms a file
here, ~2 ms of a small fleet refresh's ~35 ms, and it is the same work for every file of
a table with the same partition type.

Kept per process, for at most `_KEPT` schemas each:

- the entry schema, by (format version, partition type); pyiceberg's types are immutable
  and compare by value, and the schema is only read (it becomes the file's schema);
- the writer tree, by the two schema objects it resolves (identity: the schemas kept
  above, or pyiceberg's module constants for manifest lists); the tree holds no state
  between writes (each write is handed its encoder and record);
- the header's Avro JSON, by the file schema object and record name;
- the header's writer tree (one constant schema).

A kept value holds the schema objects its key names, so an identity cannot be reused
while its entry lives. `keep_manifest_writes()` replaces `ManifestWriter._with_partition`,
`AvroOutputFile.__init__` and `AvroOutputFile._write_header` (private names: pyiceberg
0.12.*); opening a catalog backend installs it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

from pyiceberg.avro.codecs import AVRO_CODEC_KEY, CODEC_MAPPING_ICEBERG_TO_AVRO
from pyiceberg.avro.file import (
    _SCHEMA_KEY,
    MAGIC,
    META_SCHEMA,
    SYNC_SIZE,
    AvroFileHeader,
    AvroOutputFile,
)
from pyiceberg.avro.resolver import construct_writer, resolve_writer
from pyiceberg.avro.writer import Writer
from pyiceberg.io import OutputFile
from pyiceberg.manifest import (
    ManifestWriter,
    data_file_with_partition,
    manifest_entry_schema_with_data_file,
)
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.typedef import EMPTY_DICT
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

from icemv.sql.memo import Memo

_KEPT = 64

_entry_schemas: Memo[Schema] = Memo(_KEPT)
# By the schemas' identities; each value holds its schemas (see the module).
_writers: Memo[tuple[Schema | None, Schema, Writer]] = Memo(_KEPT)
_headers: Memo[tuple[Schema, str]] = Memo(_KEPT)
_HEADER_WRITER = construct_writer(META_SCHEMA)
_installed = threading.Lock()
_originals: dict[str, Callable[..., Any]] = {}


def keep_manifest_writes() -> None:
    """Install the kept set-ups (once per process; later calls do nothing)."""
    with _installed:
        if _originals:
            return
        _originals["with_partition"] = getattr(ManifestWriter, "_with_partition")  # noqa: B009
        _originals["init"] = AvroOutputFile.__init__
        _originals["header"] = getattr(AvroOutputFile, "_write_header")  # noqa: B009
        setattr(ManifestWriter, "_with_partition", _with_partition)  # noqa: B010
        AvroOutputFile.__init__ = _init  # type: ignore[method-assign]
        setattr(AvroOutputFile, "_write_header", _write_header)  # noqa: B010


def _with_partition(self: ManifestWriter, format_version: Any) -> Schema:
    partition_type = self._spec.partition_type(self._schema)
    key = (format_version, partition_type)
    schema = _entry_schemas.get(key)
    if schema is None:
        data_file = data_file_with_partition(partition_type, format_version)
        schema = manifest_entry_schema_with_data_file(format_version, data_file)
        _entry_schemas.put(key, schema)
    return schema


def _init(
    self: AvroOutputFile[Any],
    output_file: OutputFile,
    file_schema: Schema,
    schema_name: str,
    record_schema: Schema | None = None,
    metadata: dict[str, str] = EMPTY_DICT,
) -> None:
    self.output_file = output_file
    self.file_schema = file_schema
    self.schema_name = schema_name
    self.sync_bytes = os.urandom(SYNC_SIZE)
    self.writer = _writer(record_schema, file_schema)
    self.metadata = metadata


def _writer(record_schema: Schema | None, file_schema: Schema) -> Writer:
    key = (id(record_schema), id(file_schema))
    kept = _writers.get(key)
    if kept is not None and kept[0] is record_schema and kept[1] is file_schema:
        return kept[2]
    if record_schema is None:
        writer = construct_writer(file_schema=file_schema)
    else:
        writer = resolve_writer(record_schema=record_schema, file_schema=file_schema)
    _writers.put(key, (record_schema, file_schema, writer))
    return writer


def _write_header(self: AvroOutputFile[Any]) -> None:
    codec_name = self.metadata.get(AVRO_CODEC_KEY, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)
    codec_name = CODEC_MAPPING_ICEBERG_TO_AVRO.get(codec_name) or codec_name
    meta = {**self.metadata, _SCHEMA_KEY: _avro_json(self.file_schema, self.schema_name)}
    meta[AVRO_CODEC_KEY] = codec_name
    _HEADER_WRITER.write(self.encoder, AvroFileHeader(MAGIC, meta, self.sync_bytes))


def _avro_json(schema: Schema, name: str) -> str:
    key = (id(schema), name)
    kept = _headers.get(key)
    if kept is not None and kept[0] is schema:
        return kept[1]
    text = json.dumps(AvroSchemaConversion().iceberg_to_avro(schema, schema_name=name))
    _headers.put(key, (schema, text))
    return text
