"""Pinning with an in-memory resolver: what is recorded, and the SQL that reads it; no JVM."""

from __future__ import annotations

import pytest

from icemv.errors import UnknownSourceError, ViewSqlError
from icemv.sql.pinning import pin_sources
from icemv.sql.sources import ViewInfo
from tests.unit.sources import Sources, ident

TABLES = {"nyc.trips": ("id", "fare"), "nyc.Zones Mixed": ("id",), "nyc.agg__storage": ("n",)}


def _view(name: str, sql: str | None, storage: str | None = None) -> ViewInfo:
    return ViewInfo(
        identifier=ident(name),
        uuid=f"uuid-{name}",
        version_id=3,
        default_namespace=("nyc",),
        sql=sql,
        storage_table=ident(storage) if storage else None,
    )


SOURCES = Sources(
    tables=TABLES,
    views={
        "nyc.cheap": _view("nyc.cheap", "SELECT id FROM trips WHERE fare < 5"),
        "nyc.agg": _view("nyc.agg", "SELECT count(*) AS n FROM trips", "nyc.agg__storage"),
        "nyc.loop": _view("nyc.loop", "SELECT * FROM loop"),
    },
)


def test_tables_are_pinned_at_their_current_snapshot_and_quoted_exactly() -> None:
    pinned = pin_sources(
        SOURCES, "SELECT t.id FROM trips t JOIN `Zones Mixed` z USING (id)", ("nyc",)
    )
    assert pinned.sql == (
        "SELECT t.id FROM `lake`.`nyc`.`trips` VERSION AS OF 100 AS `t` "
        "JOIN `lake`.`nyc`.`Zones Mixed` VERSION AS OF 100 AS `z` USING (id)"
    )
    assert [(s.type, s.name, s.snapshot_id, s.uuid) for s in pinned.sources] == [
        ("table", "Zones Mixed", 100, "uuid-Zones Mixed"),
        ("table", "trips", 100, "uuid-trips"),
    ]


def test_at_overrides_the_snapshot_and_none_reads_empty() -> None:
    pinned = pin_sources(SOURCES, "SELECT id FROM trips", ("nyc",), at={ident("nyc.trips"): None})
    assert (
        pinned.sql == "SELECT id FROM (SELECT * FROM `lake`.`nyc`.`trips` WHERE FALSE) AS `trips`"
    )
    assert pinned.sources[0].snapshot_id is None


def test_a_plain_view_is_inlined_and_recorded_by_version() -> None:
    pinned = pin_sources(SOURCES, "SELECT id FROM cheap", ("nyc",))
    assert "VERSION AS OF 100" in pinned.sql and "cheap" in pinned.sql
    assert {(s.type, s.name) for s in pinned.sources} == {("table", "trips"), ("view", "cheap")}
    view = next(s for s in pinned.sources if s.type == "view")
    assert view.version_id == 3


def test_a_materialized_view_is_read_from_its_storage_table() -> None:
    pinned = pin_sources(SOURCES, "SELECT n FROM agg", ("nyc",))
    assert "`agg__storage` VERSION AS OF 100" in pinned.sql
    assert {(s.type, s.name) for s in pinned.sources} == {
        ("table", "agg__storage"),
        ("view", "agg"),
    }


def test_unknown_sources_and_cycles_are_errors() -> None:
    with pytest.raises(UnknownSourceError):
        pin_sources(SOURCES, "SELECT * FROM nowhere", ("nyc",))
    with pytest.raises(ViewSqlError, match="cycle"):
        pin_sources(SOURCES, "SELECT * FROM loop", ("nyc",))


def test_the_sql_rendered_later_reads_what_was_pinned() -> None:
    """The pinned tree is built when its SQL is first asked for (a refresh on the embedded
    engine never asks): it reads the snapshots and view versions recorded at pinning, not
    what the resolver answers by then."""
    sources = Sources(tables=dict(TABLES), views=dict(SOURCES.views))
    pinned = pin_sources(sources, "SELECT id FROM cheap JOIN agg ON TRUE", ("nyc",))
    recorded = pinned.sources
    sources.tables = {}  # every table gone, the views replaced
    sources.views = {"nyc.cheap": _view("nyc.cheap", "SELECT 1 AS id"), "nyc.agg": None}  # type: ignore[dict-item]
    assert "`trips` VERSION AS OF 100" in pinned.sql
    assert "`agg__storage` VERSION AS OF 100" in pinned.sql
    assert "fare < 5" in pinned.sql
    assert pinned.sources == recorded
