"""Manifests and manifest lists decoded once per process, not once per reader.

pyiceberg decodes a manifest (Avro, in Python: ~3.5 ms for a one-file manifest here) on
every `fetch_manifest_entry`, and a manifest list on every `Snapshot.manifests`. One
refresh of a small aggregate MV read the storage table's current manifest three times
(planning the held rows, then pyiceberg's overwrite finding the files it keeps and the
ones it deletes), and every MV over a source reads that source's new manifests: 4.4
manifest decodes and 2.6 list decodes per refresh of a fleet MV, 16 and 5 ms of its ~85.

Both are files written once under a name no other file takes, so a path names its
content, and what is decoded from it is kept by path:

- a manifest's entries (all of them, live and deleted; a reader that discards deleted
  ones gets the live ones), for manifests of at most `_MAX_ENTRIES` entries, the last
  `_MANIFESTS` of them: a fleet's storage tables and its sources' recent appends, not a
  large table's planning;
- a manifest list's manifests (pyiceberg keeps the `ManifestFile` objects themselves by
  path already), the last `_LISTS` of them.

An entry's inherited fields (its snapshot id and sequence number when the manifest does
not carry them) come from the manifest's own row in the manifest list, which is the same
in every list that holds the manifest once it is committed; pyiceberg's own manifest cache
keys those rows by path alone. No reader changes an entry it gets: pyiceberg's writers
build new entries from them, and icemv only reads. Every reader gets a list of its own.

A file read for the first time still costs its decode, and most of that was not the
entries: pyiceberg converts the file's Avro schema to an Iceberg schema and resolves a
reader tree against the read schema for every file (2.3 ms of a 2.4 ms one-entry
manifest here), yet every manifest of an unpartitioned table, and every manifest list,
carries the same schema text. So the reader tree is kept too, by that text, for
pyiceberg's own reads of manifests and manifest lists (its two read schemas, types and
enums, which are module constants); pyiceberg's reader trees hold no state between
reads (each read builds a new record). A fleet MV's refresh reads its storage table's
newest manifest and manifest list, written by its last refresh, for the first time.

`keep_manifest_reads()` replaces `ManifestFile.fetch_manifest_entry`, the manifest
list reader `pyiceberg.table.snapshots` imports and `AvroFile.__enter__` (private names:
pyiceberg 0.12.*); opening a catalog backend installs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pyiceberg.avro.decoder import new_decoder
from pyiceberg.avro.file import META_SCHEMA, AvroFile, AvroFileHeader
from pyiceberg.avro.reader import Reader
from pyiceberg.avro.resolver import construct_reader, resolve_reader
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS,
    MANIFEST_LIST_FILE_SCHEMAS,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.schema import Schema
from pyiceberg.table import snapshots

from icemv.sql.memo import Memo

_MAX_ENTRIES = 128
_MANIFESTS = 2048
_LISTS = 1024

_entries: Memo[tuple[ManifestEntry, ...]] = Memo(_MANIFESTS)
_lists: Memo[tuple[ManifestFile, ...]] = Memo(_LISTS)
# Reader trees by the file's Avro schema text and what they read it as (which of
# pyiceberg's read schemas, its record types and enums).
_readers: Memo[tuple[Schema, Reader]] = Memo(64)
_KEPT_READS = (
    MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION],
    MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION],
)
_HEADER = construct_reader(META_SCHEMA, {-1: AvroFileHeader})
_installed = threading.Lock()
_originals: dict[str, Callable[..., object]] = {}


def keep_manifest_reads() -> None:
    """Install the kept reads (once per process; later calls do nothing)."""
    with _installed:
        if _originals:
            return
        _originals["entries"] = ManifestFile.fetch_manifest_entry
        _originals["list"] = getattr(snapshots, "_manifests")  # noqa: B009 (not exported)
        _originals["enter"] = AvroFile.__enter__
        ManifestFile.fetch_manifest_entry = _fetch_manifest_entry  # type: ignore[method-assign]
        setattr(snapshots, "_manifests", _manifest_list)  # noqa: B010
        AvroFile.__enter__ = _enter  # type: ignore[method-assign]


def _fetch_manifest_entry(
    self: ManifestFile, io: FileIO, discard_deleted: bool = True
) -> list[ManifestEntry]:
    entries = _entries.get(self.manifest_path)
    if entries is None:
        read = _originals["entries"](self, io, discard_deleted=False)
        assert isinstance(read, list)
        entries = tuple(read)
        if len(entries) <= _MAX_ENTRIES:
            _entries.put(self.manifest_path, entries)
    if discard_deleted:
        return [e for e in entries if e.status != ManifestEntryStatus.DELETED]
    return list(entries)


def _manifest_list(io: FileIO, manifest_list: str) -> tuple[ManifestFile, ...]:
    manifests = _lists.get(manifest_list)
    if manifests is None:
        read = _originals["list"](io, manifest_list)
        assert isinstance(read, tuple)
        manifests = read
        _lists.put(manifest_list, manifests)
    return manifests


def _enter(self: AvroFile[Any]) -> AvroFile[Any]:
    """`AvroFile.__enter__`, its reader tree kept for pyiceberg's manifest and manifest
    list reads (see the module)."""
    read = next((i for i, kept in enumerate(_KEPT_READS) if self.read_schema is kept), None)
    if read is None or self.read_schema is None:
        return _originals["enter"](self)  # type: ignore[return-value]
    with self.input_file.open() as f:
        self.decoder = new_decoder(f.read())
    self.header = _HEADER.read(self.decoder)
    key = (
        self.header.meta.get("avro.schema"),
        read,
        tuple(self.read_types.items()),
        tuple(self.read_enums.items()),
    )
    kept = _readers.get(key)
    if kept is None:
        schema = self.header.get_schema()
        kept = (schema, resolve_reader(schema, self.read_schema, self.read_types, self.read_enums))
        _readers.put(key, kept)
    self.schema, self.reader = kept
    return self
