"""Iceberg views in the JDBC catalog, with the atomicity table commits have.

pyiceberg's SqlCatalog has no view support, so views are read and written here, in the
same `iceberg_tables` rows (``iceberg_type = 'VIEW'``) that Iceberg's JdbcCatalog uses:
a create is an INSERT (fails if the name is taken), a replace is a compare-and-swap
UPDATE on the metadata location.
"""

from __future__ import annotations

import uuid

from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.io import load_file_io
from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from icemv.catalog.views import LoadedView
from icemv.errors import NoSuchViewError, ViewAlreadyExistsError, ViewCommitConflictError
from icemv.format.view_metadata import ViewMetadata, decode_view_metadata, encode_view_metadata
from icemv.identifiers import Identifier
from icemv.sql.memo import Memo

__all__ = ["LoadedView", "ViewStore"]

VIEW_TYPE = "VIEW"

# A view's metadata location (built once: building and caching the statement per call
# cost more than the round trip).
_LOCATION = select(IcebergTables.metadata_location).where(
    IcebergTables.catalog_name == bindparam("catalog"),
    IcebergTables.table_namespace == bindparam("namespace"),
    IcebergTables.table_name == bindparam("name"),
    IcebergTables.iceberg_type == VIEW_TYPE,
)


_decoded: Memo[ViewMetadata] = Memo(1024)  # by metadata location


class ViewStore:
    def __init__(self, catalog: SqlCatalog, statements: Engine | None = None) -> None:
        """`statements`: the catalog database in autocommit, for reads of one row
        (the catalog's own engine when not given)."""
        self._catalog = catalog
        self._statements = statements or catalog.engine
        self._io = load_file_io(catalog.properties)

    def load(self, identifier: Identifier) -> LoadedView:
        location = self._location(identifier)
        if location is None:
            raise NoSuchViewError(f"view {identifier} does not exist")
        return self.read(identifier, location)

    def read(self, identifier: Identifier, location: str) -> LoadedView:
        """The view whose metadata is at `location` (known from a listing): no query. A
        metadata file is written once under a new name, and the metadata is frozen: it
        is read once per process (the last 1,024 kept)."""
        metadata = _decoded.get(location)
        if metadata is None:
            with self._io.new_input(location).open() as stream:
                metadata = decode_view_metadata(stream.read())
            _decoded.put(location, metadata)
        return LoadedView(identifier, location, metadata)

    def exists(self, identifier: Identifier) -> bool:
        return self._location(identifier) is not None

    def list(self, namespace: tuple[str, ...] | None = None) -> list[Identifier]:
        query = select(IcebergTables.table_namespace, IcebergTables.table_name).where(
            IcebergTables.catalog_name == self._catalog.name,
            IcebergTables.iceberg_type == VIEW_TYPE,
        )
        if namespace is not None:
            query = query.where(IcebergTables.table_namespace == ".".join(namespace))
        with Session(self._catalog.engine) as session:
            rows = session.execute(query).all()
        return sorted(Identifier(tuple(ns.split(".")), name) for ns, name in rows)

    def create(self, identifier: Identifier, metadata: ViewMetadata) -> LoadedView:
        location = self._write(metadata, version=0)
        row = {
            "catalog_name": self._catalog.name,
            "table_namespace": identifier.namespace_str,
            "table_name": identifier.name,
            "metadata_location": location,
            "previous_metadata_location": None,
            "iceberg_type": VIEW_TYPE,
        }
        with Session(self._catalog.engine) as session:
            try:
                session.execute(insert(IcebergTables).values(**row))
                session.commit()
            except IntegrityError as exc:
                session.rollback()
                self._io.delete(location)
                raise ViewAlreadyExistsError(f"{identifier} already exists") from exc
        return LoadedView(identifier, location, metadata)

    def replace(self, view: LoadedView, metadata: ViewMetadata) -> LoadedView:
        """Swap in new metadata if nobody else did since `view` was loaded."""
        location = self._write(metadata, version=len(metadata.version_log))
        statement = (
            update(IcebergTables)
            .where(
                IcebergTables.catalog_name == self._catalog.name,
                IcebergTables.table_namespace == view.identifier.namespace_str,
                IcebergTables.table_name == view.identifier.name,
                IcebergTables.iceberg_type == VIEW_TYPE,
                IcebergTables.metadata_location == view.metadata_location,
            )
            .values(metadata_location=location, previous_metadata_location=view.metadata_location)
        )
        with Session(self._catalog.engine) as session:
            result = session.execute(statement)
            session.commit()
        if result.rowcount != 1:  # type: ignore[attr-defined]
            self._io.delete(location)
            raise ViewCommitConflictError(f"view {view.identifier} changed concurrently")
        return LoadedView(view.identifier, location, metadata)

    def drop(self, identifier: Identifier) -> None:
        statement = delete(IcebergTables).where(
            IcebergTables.catalog_name == self._catalog.name,
            IcebergTables.table_namespace == identifier.namespace_str,
            IcebergTables.table_name == identifier.name,
            IcebergTables.iceberg_type == VIEW_TYPE,
        )
        with Session(self._catalog.engine) as session:
            result = session.execute(statement)
            session.commit()
        if result.rowcount != 1:  # type: ignore[attr-defined]
            raise NoSuchViewError(f"view {identifier} does not exist")

    def _location(self, identifier: Identifier) -> str | None:
        names = {"catalog": self._catalog.name, "namespace": identifier.namespace_str,
                 "name": identifier.name}  # fmt: skip
        with self._statements.connect() as connection:
            return connection.execute(_LOCATION, names).scalar_one_or_none()

    def _write(self, metadata: ViewMetadata, version: int) -> str:
        path = f"{metadata.location}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"
        with self._io.new_output(path).create(overwrite=False) as stream:
            stream.write(encode_view_metadata(metadata))
        return path
