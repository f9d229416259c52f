"""A materialized view as loaded from the catalog: its Iceberg view plus its storage table."""

from __future__ import annotations

from dataclasses import dataclass

from icemv.catalog.lakehouse import Lakehouse
from icemv.catalog.views import LoadedView
from icemv.errors import NoSuchViewError, NotAMaterializedViewError
from icemv.identifiers import Identifier
from icemv.spec.view_metadata import ViewVersion

# View properties that steer icemv.
REFRESH_POLICY_PROPERTY = "icemv.refresh-policy"
MAX_STALENESS_PROPERTY = "icemv.max-staleness"


@dataclass(frozen=True)
class MaterializedView:
    view: LoadedView

    @property
    def identifier(self) -> Identifier:
        return self.view.identifier

    @property
    def version(self) -> ViewVersion:
        return self.view.metadata.current_version

    @property
    def storage(self) -> Identifier:
        storage = self.version.storage_table
        assert storage is not None, "checked by load_materialized_view"
        return storage

    @property
    def sql(self) -> str:
        sql = self.version.sql_for("spark")
        if sql is None:
            raise NotAMaterializedViewError(f"{self.identifier} has no Spark SQL representation")
        return sql

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.view.metadata.properties)


def load_materialized_view(lakehouse: Lakehouse, identifier: Identifier) -> MaterializedView:
    try:
        view = lakehouse.views.load(identifier)
    except NoSuchViewError:
        raise NotAMaterializedViewError(f"no materialized view {identifier}") from None
    if not view.metadata.is_materialized:
        raise NotAMaterializedViewError(f"{identifier} is a plain view, not a materialized view")
    return MaterializedView(view)


def list_materialized_views(lakehouse: Lakehouse) -> list[MaterializedView]:
    found = []
    for identifier in lakehouse.views.list():
        try:
            found.append(load_materialized_view(lakehouse, identifier))
        except (NotAMaterializedViewError, NoSuchViewError):
            continue  # plain view, or dropped meanwhile
    return found
