"""A materialized view as loaded from the catalog: its Iceberg view plus its storage table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from icemv.catalog.views import LoadedView
from icemv.errors import (
    DurationError,
    MaterializedViewPropertyError,
    NoSuchViewError,
    NotAMaterializedViewError,
)
from icemv.format.durations import parse_duration
from icemv.format.view_metadata import ViewVersion
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse

# View properties that steer icemv.
REFRESH_POLICY_PROPERTY = "icemv.refresh-policy"
MAX_STALENESS_PROPERTY = "icemv.max-staleness"
# Read by the daemon's poller (service/poller.py names them too).
REFRESH_INTERVAL_PROPERTY = "icemv.refresh-interval"
REFRESH_CRON_PROPERTY = "icemv.refresh-cron"
# Checked at create/replace here, and enforced at refresh time by refresh/policy.py.
REFRESH_POLICIES = ("auto", "incremental", "incremental-strict", "full")


def validate_properties(properties: Mapping[str, str]) -> None:
    """Refuses property values that would fail (or be ignored) at every refresh later.

    Checked when a definition is created or replaced, so the mistake surfaces where it
    was made instead of as a warning in the daemon's log.
    """
    for key in (MAX_STALENESS_PROPERTY, REFRESH_INTERVAL_PROPERTY):
        if key in properties:
            try:
                parse_duration(properties[key])
            except DurationError as exc:
                raise MaterializedViewPropertyError(f"{key}: {exc}") from None
    policy = properties.get(REFRESH_POLICY_PROPERTY)
    if policy is not None and policy not in REFRESH_POLICIES:
        raise MaterializedViewPropertyError(
            f"{REFRESH_POLICY_PROPERTY}={policy!r} is not one of {', '.join(REFRESH_POLICIES)}"
        )
    cron = properties.get(REFRESH_CRON_PROPERTY)
    if cron is not None:
        from apscheduler.triggers.cron import CronTrigger

        try:
            CronTrigger.from_crontab(cron)
        except ValueError as exc:
            raise MaterializedViewPropertyError(
                f"{REFRESH_CRON_PROPERTY}={cron!r} is not a crontab expression: {exc}"
            ) from None


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


def load_materialized_view(
    lakehouse: Lakehouse, identifier: Identifier, reads: CatalogReads | None = None
) -> MaterializedView:
    """The MV `identifier`; loaded through `reads` when given."""
    try:
        view = reads.load_view(identifier) if reads else lakehouse.views.load(identifier)
    except NoSuchViewError:
        raise NotAMaterializedViewError(f"no materialized view {identifier}") from None
    if not view.metadata.is_materialized:
        raise NotAMaterializedViewError(f"{identifier} is a plain view, not a materialized view")
    return MaterializedView(view)


def list_materialized_views(
    lakehouse: Lakehouse, reads: CatalogReads | None = None
) -> list[MaterializedView]:
    """Every MV of the catalog; through `reads` (a poll's) when given."""
    reads = reads or CatalogReads(lakehouse)
    found = []
    for identifier in reads.list_views():
        view = reads.find_view(identifier)
        if view is not None and view.metadata.is_materialized:  # else plain, or dropped meanwhile
            found.append(MaterializedView(view))
    return found
