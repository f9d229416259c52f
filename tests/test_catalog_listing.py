"""The JDBC catalog's one-query listing and the polls' reads built on it (SQLite file, no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.avro.file import AvroFile, AvroOutputFile
from pyiceberg.avro.resolver import resolve_reader, resolve_writer
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriter,
    write_manifest,
)
from pyiceberg.serializers import FromInputFile
from sqlalchemy import event

from icemv.catalog import manifest_reads, manifest_writes
from icemv.catalog.jdbc import JdbcBackend
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse, PollReads, refresh_reads, remember
from icemv.mv.model import list_materialized_views
from icemv.sql.memo import Memo
from tests.support.views import long_view_metadata

A, B = Identifier(("nyc",), "a"), Identifier(("nyc",), "b")
MV, STORAGE = Identifier(("nyc",), "agg"), Identifier(("nyc",), "agg__storage")
PLAIN = Identifier(("nyc",), "plain")
ROWS = pa.schema([pa.field("v", pa.int64())])


@pytest.fixture
def lakehouse(sqlite_lakehouse: Lakehouse) -> Lakehouse:
    lakehouse = sqlite_lakehouse
    for table in (A, B, STORAGE):
        lakehouse.catalog.create_table(table.as_tuple(), schema=ROWS)
    for view, storage in ((MV, STORAGE), (PLAIN, None)):
        metadata = long_view_metadata(lakehouse, view.name, "SELECT v FROM nyc.a", storage)
        lakehouse.views.create(view, metadata)
    return lakehouse


def append(lakehouse: Lakehouse, table: Identifier) -> None:
    lakehouse.load_table(table).append(pa.table({"v": pa.array([1], pa.int64())}, schema=ROWS))


def test_listing_is_every_table_and_view_with_its_location(lakehouse: Lakehouse) -> None:
    backend = lakehouse.backend
    assert isinstance(backend, JdbcBackend)
    listing = backend.listing()
    assert set(listing.tables) == {A, B, STORAGE}
    assert set(listing.views) == {MV, PLAIN}
    for table in (A, B, STORAGE):
        assert listing.tables[table] == lakehouse.load_table(table).metadata_location
        read = listing.load_table(table)
        assert read.name() == table.as_tuple()
        assert read.metadata == lakehouse.load_table(table).metadata
    assert listing.load_view(MV).metadata == lakehouse.views.load(MV).metadata


def test_a_listing_may_be_limited_to_some_namespaces_tables(lakehouse: Lakehouse) -> None:
    backend = lakehouse.backend
    assert isinstance(backend, JdbcBackend)
    lakehouse.catalog.create_namespace(("other",))
    elsewhere = Identifier(("other",), "c")
    lakehouse.catalog.create_table(elsewhere.as_tuple(), schema=ROWS)
    assert set(backend.listing().tables) == {A, B, STORAGE, elsewhere}
    scoped = backend.listing([("other",)])
    assert set(scoped.tables) == {elsewhere}
    assert set(scoped.views) == {MV, PLAIN}  # views: always all
    assert scoped.covers(elsewhere) and not scoped.covers(A)
    none = backend.listing([])
    assert not none.tables and set(none.views) == {MV, PLAIN}
    # Reads through a scoped listing load a table it does not cover by name.
    reads = CatalogReads(lakehouse, scoped)
    assert reads.load_table(A).metadata_location == lakehouse.load_table(A).metadata_location
    assert reads.find_table(Identifier(("other",), "absent")) is None
    assert reads.table_loads == 1


def test_polls_reuse_what_did_not_change(lakehouse: Lakehouse) -> None:
    polls = PollReads(lakehouse)
    first = polls.begin()  # lists views only: no namespace was asked about yet
    tables = {t: first.load_table(t) for t in (A, B, STORAGE)}
    assert first.load_table(A) is tables[A]  # once per poll
    assert first.find_table(MV) is None  # a view is no table
    assert [mv.identifier for mv in list_materialized_views(lakehouse, first)] == [MV]
    assert (first.table_loads, first.table_reuses, first.view_loads) == (4, 0, 2)
    polls.finish(first)

    append(lakehouse, A)
    second = polls.begin()
    assert second.find_table(Identifier(("nyc",), "absent")) is None  # listed as missing
    assert second.load_table(B) is tables[B]  # unchanged: the previous poll's, nothing read
    assert second.load_table(STORAGE) is tables[STORAGE]
    changed = second.load_table(A)
    assert changed.current_snapshot() is not None  # the commit is seen
    assert (second.table_loads, second.table_reuses) == (1, 2)
    assert second.load_view(MV) is first.load_view(MV)
    assert second.view_reuses == 1
    polls.finish(second)

    # What a poll did not read is not kept: B is read again after a poll that skipped it.
    lakehouse.catalog.drop_table(STORAGE.as_tuple())
    third = polls.begin()
    assert third.find_table(STORAGE) is None
    assert third.load_table(A) is changed
    polls.finish(third)
    fourth = polls.begin()
    assert fourth.load_table(B) is not tables[B]
    assert (fourth.table_loads, fourth.table_reuses) == (1, 0)


def test_a_forgotten_table_loads_from_the_catalog(lakehouse: Lakehouse) -> None:
    polls = PollReads(lakehouse)
    reads = polls.begin()
    before = reads.load_table(A)
    append(lakehouse, A)  # after the listing
    assert reads.load_table(A) is before  # one state per poll
    reads.forget(A)
    assert reads.load_table(A).current_snapshot() is not None
    assert reads.table_loads == 2


def test_without_a_listing_every_table_is_loaded_once(lakehouse: Lakehouse) -> None:
    reads = CatalogReads(lakehouse)
    assert reads.load_table(A) is reads.load_table(A)
    assert [mv.identifier for mv in list_materialized_views(lakehouse, reads)] == [MV]
    assert [mv.identifier for mv in list_materialized_views(lakehouse)] == [MV]
    assert (reads.table_loads, reads.view_loads, reads.table_reuses) == (1, 2, 0)


def test_a_table_load_parses_each_metadata_file_once_and_sees_every_commit(
    lakehouse: Lakehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[str] = []
    parse = FromInputFile.table_metadata

    def counting(input_file: Any, *args: Any, **kwargs: Any) -> Any:
        read.append(input_file.location)
        return parse(input_file, *args, **kwargs)

    monkeypatch.setattr(FromInputFile, "table_metadata", staticmethod(counting))
    catalog = lakehouse.catalog
    other = SqlCatalog(catalog.name, **catalog.properties)  # pyiceberg's, another writer
    rows = pa.table({"v": pa.array([1], pa.int64())}, schema=ROWS)
    other.load_table(A.as_tuple()).append(rows)
    before = len(read)
    first = catalog.load_table(A.as_tuple())
    second = catalog.load_table(A.as_tuple())
    assert second.metadata is first.metadata
    assert read[before:] == [first.metadata_location]  # parsed once
    snapshot = first.current_snapshot()
    assert snapshot is not None
    other.load_table(A.as_tuple()).append(rows)
    third = catalog.load_table(A.as_tuple())
    assert third.metadata_location != first.metadata_location
    assert third.metadata.snapshots[-1].parent_snapshot_id == snapshot.snapshot_id
    assert third.metadata.current_snapshot_id == third.metadata.snapshots[-1].snapshot_id
    assert read[-1] == third.metadata_location
    # A commit through this catalog keeps the metadata it wrote parsed: no read.
    before, parent = len(read), third.metadata.current_snapshot_id
    third.append(rows)
    fourth = catalog.load_table(A.as_tuple())
    assert fourth.metadata is third.metadata and len(read) == before
    assert fourth.metadata.snapshots[-1].parent_snapshot_id == parent
    for missing in (MV, Identifier(("nyc",), "nowhere")):  # a view's row is not a table
        with pytest.raises(NoSuchTableError):
            catalog.load_table(missing.as_tuple())


def test_manifests_are_decoded_once_and_every_reader_sees_the_table_as_it_is(
    lakehouse: Lakehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []  # every Avro file pyiceberg decodes
    enter = AvroFile.__enter__

    def counting(self: AvroFile[Any]) -> Any:
        opened.append(self.input_file.location)
        return enter(self)

    monkeypatch.setattr(AvroFile, "__enter__", counting)
    for _ in range(3):
        append(lakehouse, B)
    table = lakehouse.load_table(B)
    opened.clear()
    first = [task.file.file_path for task in table.scan().plan_files()]
    again = [task.file.file_path for task in table.scan().plan_files()]
    assert sorted(first) == sorted(again) and len(first) == 3
    decoded = [path for path in opened if not path.rsplit("/", 1)[-1].startswith("snap-")]
    assert len(decoded) == len(set(decoded)) == 3  # one manifest per append, each read once
    assert len(opened) == 4  # and the manifest list once, for two scans

    table.delete("v = 1")  # every row: pyiceberg's overwrite drops all three files
    table = lakehouse.load_table(B)
    assert table.scan().to_arrow().num_rows == 0
    assert list(table.scan().plan_files()) == []
    snapshot = table.current_snapshot()
    assert snapshot is not None
    manifests = snapshot.manifests(table.io)
    live = [e for m in manifests for e in m.fetch_manifest_entry(table.io)]
    every = [e for m in manifests for e in m.fetch_manifest_entry(table.io, False)]
    assert live == [] and len(every) >= 3
    assert {e.status for e in every} == {ManifestEntryStatus.DELETED}
    every.clear()  # a reader's list is its own
    assert len([e for m in manifests for e in m.fetch_manifest_entry(table.io, False)]) >= 3


def test_a_manifests_reader_tree_is_built_once_per_schema_and_reads_as_pyiceberg_does(
    lakehouse: Lakehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[object] = []

    def counting(*args: Any) -> Any:
        built.append(args[1])
        return resolve_reader(*args)

    monkeypatch.setattr(manifest_reads, "resolve_reader", counting)
    for _ in range(3):
        append(lakehouse, B)
    table = lakehouse.load_table(B)
    snapshot = table.current_snapshot()
    assert snapshot is not None
    manifests = snapshot.manifests(table.io)
    entries = [e for m in manifests for e in m.fetch_manifest_entry(table.io)]
    assert len(manifests) == len(entries) == 3
    # Four new files (three manifests, a list), at most one tree per read schema.
    assert len(built) <= 2 and len(set(map(id, built))) == len(built)
    # pyiceberg's own decode (a read schema of its own: no tree kept) reads the same.
    fresh = MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION].model_copy()
    for manifest, entry in zip(manifests, entries, strict=True):
        with AvroFile[ManifestEntry](
            table.io.new_input(manifest.manifest_path),
            fresh,
            read_types={-1: ManifestEntry, 2: DataFile},
            read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
        ) as reader:
            (decoded,) = list(reader)
        assert decoded.data_file == entry.data_file
        assert decoded.status == entry.status
    assert len(built) <= 3  # the one pyiceberg read above resolved its own


def test_manifest_writers_are_set_up_once_per_schema_and_write_what_pyiceberg_writes(
    lakehouse: Lakehouse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for memo in ("_entry_schemas", "_writers", "_headers"):  # as a new process has them
        monkeypatch.setattr(manifest_writes, memo, Memo(64))
    resolved: list[object] = []

    def counting(**kwargs: Any) -> Any:
        resolved.append(kwargs["file_schema"])
        return resolve_writer(**kwargs)

    monkeypatch.setattr(manifest_writes, "resolve_writer", counting)
    for _ in range(3):
        append(lakehouse, B)
    # Three manifests and three lists: one tree for each kind of file, not one per file.
    assert len(resolved) == 2
    table = lakehouse.load_table(B)
    snapshot = table.current_snapshot()
    assert snapshot is not None
    entries = [e for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io)]
    assert len(entries) == 3

    def written(path: Path) -> tuple[dict[str, str], list[ManifestEntry], int]:
        output = table.io.new_output(str(path))
        with write_manifest(
            2, table.spec(), table.schema(), output, snapshot.snapshot_id, "deflate"
        ) as writer:
            for entry in entries:
                writer.add_entry(entry)
        with AvroFile[ManifestEntry](
            table.io.new_input(str(path)),
            MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION].model_copy(),  # no kept reader
            read_types={-1: ManifestEntry, 2: DataFile},
            read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
        ) as reader:
            return dict(reader.header.meta), list(reader), path.stat().st_size

    kept = written(tmp_path / "kept.avro")
    originals = getattr(manifest_writes, "_originals")  # noqa: B009 (pyiceberg's own set-up)
    monkeypatch.setattr(ManifestWriter, "_with_partition", originals["with_partition"])
    monkeypatch.setattr(AvroOutputFile, "__init__", originals["init"])
    monkeypatch.setattr(AvroOutputFile, "_write_header", originals["header"])
    assert written(tmp_path / "pyiceberg.avro") == kept  # the same header, entries and size
    assert len(resolved) == 2  # pyiceberg's own set-up resolved its own tree


def test_a_refresh_asks_for_what_the_last_one_read_in_one_query(lakehouse: Lakehouse) -> None:
    catalog = lakehouse.backend.catalog
    assert isinstance(catalog, SqlCatalog)
    statements: list[str] = []

    def counted(*args: Any) -> None:
        statements.append(str(args[2]))

    first = refresh_reads(lakehouse, MV)
    assert first.listing is None  # nothing read before in this process
    for table in (STORAGE, A):
        first.load_table(table)
    first.load_view(MV)
    remember(MV, first)
    append(lakehouse, A)
    engines = {catalog.engine, catalog.statements}  # type: ignore[attr-defined]
    for engine in engines:
        event.listen(engine, "before_cursor_execute", counted)
    try:
        second = refresh_reads(lakehouse, MV)
        assert second.listing is not None and len(statements) == 1  # one query, three names
        assert second.load_view(MV).metadata == lakehouse.views.load(MV).metadata
        storage = lakehouse.load_table(STORAGE).metadata_location
        statements.clear()
        assert second.load_table(A).current_snapshot() is not None  # the append is seen
        assert second.load_table(STORAGE).metadata_location == storage
        assert not statements  # both from their listed locations
        assert second.find_table(Identifier(("nyc",), "absent")) is None
        assert len(statements) == 1  # not read last time: asked for by name
        statements.clear()
        assert second.load_table(B).name() == B.as_tuple()  # not read last time: by name
        assert second.load_view(PLAIN).metadata.current_version.storage_table is None
        assert len(statements) == 2
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", counted)
