"""Pin every source of a view at one snapshot and rewrite the SQL to read exactly those.

Exactly-once refreshes depend on this: the ids recorded in refresh-state are the ids read,
never "current" ids looked up after the read. Plain views are expanded inline (recorded by
version); a materialized view is read from its storage table (recorded as view + table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table
from sqlglot import exp

from icemv.catalog.jdbc_views import LoadedView
from icemv.catalog.lakehouse import Lakehouse
from icemv.errors import NoSuchViewError, UnknownSourceError, ViewSqlError
from icemv.identifiers import Identifier
from icemv.spec.refresh_state import SourceState
from icemv.sql.parse import parse_query, table_references

MAX_VIEW_DEPTH = 16


@dataclass(frozen=True)
class PinnedQuery:
    sql: str
    sources: tuple[SourceState, ...]


@dataclass
class _Pinning:
    lakehouse: Lakehouse
    # Snapshot ids to read instead of the current ones (the oracle, old-state reads).
    at: Mapping[Identifier, int | None]
    states: dict[tuple[object, ...], SourceState] = field(default_factory=dict)

    def query(
        self, sql: str, default_namespace: tuple[str, ...], path: tuple[str, ...]
    ) -> exp.Query:
        if len(path) > MAX_VIEW_DEPTH:
            raise ViewSqlError(f"views nest deeper than {MAX_VIEW_DEPTH}: {' -> '.join(path)}")
        query = parse_query(sql)
        for table in table_references(query):
            identifier = self._qualify(table, default_namespace)
            if identifier.dotted in path:
                raise ViewSqlError(f"view cycle: {' -> '.join((*path, identifier.dotted))}")
            alias = table.alias or identifier.name
            table.replace(self._source(identifier, alias, path))
        return query

    def _qualify(self, table: exp.Table, default_namespace: tuple[str, ...]) -> Identifier:
        if isinstance(table.args.get("catalog"), exp.Dot) or isinstance(table.this, exp.Dot):
            raise ViewSqlError(f"multi-level namespaces are not supported: {table.sql('spark')}")
        catalog_name = self.lakehouse.catalog_name
        if table.catalog and table.catalog != catalog_name:
            raise UnknownSourceError(
                f"{table.sql('spark')} is in catalog {table.catalog!r}; "
                f"sources must be in the MV's catalog {catalog_name!r}"
            )
        namespace = (table.db,) if table.db else default_namespace
        return Identifier(namespace, table.name)

    def _source(self, identifier: Identifier, alias: str, path: tuple[str, ...]) -> exp.Expr:
        try:
            table = self.lakehouse.load_table(identifier)
        except NoSuchTableError:
            pass
        else:
            return self._pinned_table(identifier, table, alias)
        try:
            view = self.lakehouse.views.load(identifier)
        except NoSuchViewError:
            raise UnknownSourceError(f"table or view {identifier} does not exist") from None
        self._record(_view_state(view))
        storage = view.metadata.current_version.storage_table
        if storage is not None:
            try:
                storage_table = self.lakehouse.load_table(storage)
            except NoSuchTableError:
                raise UnknownSourceError(
                    f"materialized view {identifier} has lost its storage table {storage}"
                ) from None
            return self._pinned_table(storage, storage_table, alias)
        version = view.metadata.current_version
        sql = version.sql_for("spark")
        if sql is None:
            raise ViewSqlError(f"view {identifier} has no Spark SQL representation")
        inner = self.query(
            sql, version.default_namespace or identifier.namespace, (*path, identifier.dotted)
        )
        return exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias)))

    def _pinned_table(self, identifier: Identifier, table: Table, alias: str) -> exp.Expr:
        key = ("table", identifier)
        state = self.states.get(key)
        if state is None:
            if identifier in self.at:
                snapshot_id = self.at[identifier]
            else:
                snapshot = table.current_snapshot()
                snapshot_id = snapshot.snapshot_id if snapshot else None
            state = SourceState(
                type="table",
                namespace=identifier.namespace,
                name=identifier.name,
                uuid=str(table.metadata.table_uuid),
                snapshot_id=snapshot_id,
            )
            self._record(state)
        return table_at(self.lakehouse.catalog_name, identifier, state.snapshot_id, alias)

    def _record(self, state: SourceState) -> None:
        key = (state.type, Identifier(state.namespace, state.name))
        self.states.setdefault(key, state)


def table_at(catalog: str, identifier: Identifier, snapshot_id: int | None, alias: str) -> exp.Expr:
    """A reference to `identifier` read at `snapshot_id`, quoted, under `alias`."""
    node = exp.Table(
        this=exp.to_identifier(identifier.name, quoted=True),
        db=exp.to_identifier(identifier.namespace_str, quoted=True),
        catalog=exp.to_identifier(catalog, quoted=True),
    )
    table_alias = exp.TableAlias(this=exp.to_identifier(alias, quoted=True))
    if snapshot_id is None:
        # A table with no snapshot yet is empty; reading "current" could see a later commit.
        empty = exp.select("*").from_(node).where(exp.false())
        return exp.Subquery(this=empty, alias=table_alias)
    node.set(
        "version",
        exp.Version(this="VERSION", kind="AS OF", expression=exp.Literal.number(snapshot_id)),
    )
    node.set("alias", table_alias)
    return node


def _view_state(view: LoadedView) -> SourceState:
    return SourceState(
        type="view",
        namespace=view.identifier.namespace,
        name=view.identifier.name,
        uuid=view.metadata.view_uuid,
        version_id=view.metadata.current_version_id,
    )


def pin_sources(
    lakehouse: Lakehouse,
    sql: str,
    default_namespace: tuple[str, ...],
    at: Mapping[Identifier, int | None] | None = None,
) -> PinnedQuery:
    """Pin at the current snapshots, or at the snapshots `at` names for some tables."""
    pinning = _Pinning(lakehouse, dict(at or {}))
    query = pinning.query(sql, default_namespace, ())
    sources = sorted(pinning.states.values(), key=lambda s: (s.type, s.namespace, s.name))
    return PinnedQuery(sql=query.sql(dialect="spark"), sources=tuple(sources))
