"""View store, refresh history and freshness on a real SQLite-file catalog (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from icemv.errors import (
    NoSuchViewError,
    NotAMaterializedViewError,
    ViewAlreadyExistsError,
    ViewCommitConflictError,
)
from icemv.format.refresh_state import RefreshState, SourceState, encode_refresh_state
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.freshness import assess_freshness
from icemv.mv.history import history_as_6420, latest_refresh, refresh_history
from icemv.mv.model import list_materialized_views, load_materialized_view
from tests.support.views import long_view_metadata

BASE = Identifier(("nyc",), "taxis")
MV = Identifier(("nyc",), "agg")
STORAGE = Identifier(("nyc",), "agg__storage")
ROWS = pa.schema([pa.field("v", pa.int64())])


@pytest.fixture
def lakehouse(sqlite_lakehouse: Lakehouse) -> Lakehouse:
    return sqlite_lakehouse


def _view(lakehouse: Lakehouse, storage: Identifier | None = STORAGE) -> Any:
    return long_view_metadata(lakehouse, "agg", "SELECT v FROM nyc.taxis", storage)


def _rows(*values: int) -> pa.Table:
    return pa.table({"v": pa.array(values, pa.int64())}, schema=ROWS)


def _commit_refresh(lakehouse: Lakehouse, version_id: int = 1) -> int:
    """One commit carrying data plus refresh-state (the rows do not matter here)."""
    base = lakehouse.load_table(BASE)
    snapshot = base.current_snapshot()
    assert snapshot is not None
    state = RefreshState(
        version_id,
        snapshot.timestamp_ms,
        (
            SourceState(
                "table", ("nyc",), "taxis", str(base.metadata.table_uuid), snapshot.snapshot_id
            ),
        ),
    )
    storage = lakehouse.load_table(STORAGE)
    storage.append(
        base.scan().to_arrow(), snapshot_properties={"refresh-state": encode_refresh_state(state)}
    )
    current = lakehouse.load_table(STORAGE).current_snapshot()
    assert current is not None
    return current.snapshot_id


def test_view_store_create_load_replace_drop(lakehouse: Lakehouse) -> None:
    views = lakehouse.views
    created = views.create(MV, _view(lakehouse))
    with pytest.raises(ViewAlreadyExistsError):
        views.create(MV, _view(lakehouse))
    loaded = views.load(MV)
    assert loaded.metadata.current_version.storage_table == STORAGE
    assert views.list() == [MV] and views.list(("other",)) == []

    schema = dict(created.metadata.schemas[0])
    newer = loaded.metadata.with_new_version(
        "SELECT v + 1 AS v FROM nyc.taxis", schema, STORAGE, ("nyc",), "lake"
    )
    replaced = views.replace(loaded, newer)
    assert views.load(MV).metadata.current_version_id == 2
    # A writer holding the old metadata loses the compare-and-swap.
    with pytest.raises(ViewCommitConflictError):
        views.replace(loaded, newer)
    assert views.load(MV).metadata_location == replaced.metadata_location

    # The raw metadata file on disk carries storage-table.
    path = replaced.metadata_location.removeprefix("file://")
    assert (
        json.loads(Path(path).read_text())["versions"][1]["storage-table"]["name"] == "agg__storage"
    )

    views.drop(MV)
    with pytest.raises(NoSuchViewError):
        views.load(MV)


def test_views_do_not_shadow_tables(lakehouse: Lakehouse) -> None:
    lakehouse.catalog.create_table(BASE.as_tuple(), schema=ROWS)
    with pytest.raises(ViewAlreadyExistsError):
        lakehouse.views.create(BASE, _view(lakehouse))
    # pyiceberg's table listing does not see views, and views listing does not see tables.
    lakehouse.views.create(MV, _view(lakehouse))
    assert lakehouse.catalog.list_tables(("nyc",)) == [("nyc", "taxis")]
    assert lakehouse.views.list() == [MV]


def test_plain_view_is_not_an_mv(lakehouse: Lakehouse) -> None:
    lakehouse.views.create(MV, _view(lakehouse, storage=None))
    with pytest.raises(NotAMaterializedViewError, match="plain view"):
        load_materialized_view(lakehouse, MV)
    assert list_materialized_views(lakehouse) == []


def test_freshness_follows_commits_and_maintenance_does_not_hide_it(lakehouse: Lakehouse) -> None:
    catalog = lakehouse.catalog
    base = catalog.create_table(BASE.as_tuple(), schema=ROWS)
    base.append(_rows(1, 2))
    catalog.create_table(STORAGE.as_tuple(), schema=ROWS)
    lakehouse.views.create(MV, _view(lakehouse))
    mv = load_materialized_view(lakehouse, MV)

    never = assess_freshness(lakehouse, mv)
    assert (never.state, never.reason) == ("invalid", "never-refreshed")

    first = _commit_refresh(lakehouse)
    fresh = assess_freshness(lakehouse, mv)
    assert fresh.state == "fresh" and fresh.staleness_seconds == 0
    assert fresh.last_refresh is not None and fresh.last_refresh.snapshot_id == first

    lakehouse.load_table(BASE).append(_rows(3))
    lakehouse.load_table(BASE).append(_rows(4))
    appended = [s for s in lakehouse.load_table(BASE).snapshots()][-2]
    stale = assess_freshness(lakehouse, mv, now_ms=appended.timestamp_ms + 5_000)
    assert stale.state == "stale" and stale.pending_snapshots == 2
    assert stale.staleness_seconds == pytest.approx(5.0)

    second = _commit_refresh(lakehouse)
    # A maintenance-only snapshot (no refresh-state) after the refresh changes nothing.
    storage = lakehouse.load_table(STORAGE)
    storage.append(_rows(), snapshot_properties={"note": "maintenance"})
    assert lakehouse.load_table(STORAGE).current_snapshot().snapshot_id != second  # type: ignore[union-attr]
    assert assess_freshness(lakehouse, mv).state == "fresh"
    history = refresh_history(lakehouse.load_table(STORAGE))
    assert [r.snapshot_id for r in history] == [second, first]
    assert latest_refresh(lakehouse.load_table(STORAGE)).snapshot_id == second  # type: ignore[union-attr]
    shaped = history_as_6420(history, "lake")
    assert shaped["current-refresh-id"] == second
    assert [r["refresh-id"] for r in shaped["refreshes"]] == [first, second]
    assert shaped["refreshes"][0]["base-tables"]["nyc.taxis"]["type"] == "iceberg-metastore"


def test_definition_change_and_recreated_source_make_it_invalid(lakehouse: Lakehouse) -> None:
    catalog = lakehouse.catalog
    catalog.create_table(BASE.as_tuple(), schema=ROWS).append(_rows(1))
    catalog.create_table(STORAGE.as_tuple(), schema=ROWS)
    created = lakehouse.views.create(MV, _view(lakehouse))
    _commit_refresh(lakehouse)

    catalog.drop_table(BASE.as_tuple())
    catalog.create_table(BASE.as_tuple(), schema=ROWS).append(_rows(1))
    mv = load_materialized_view(lakehouse, MV)
    assert (assess_freshness(lakehouse, mv).state, assess_freshness(lakehouse, mv).reason) == (
        "invalid",
        "source-replaced",
    )
    _commit_refresh(lakehouse)
    assert assess_freshness(lakehouse, mv).state == "fresh"

    schema = dict(created.metadata.schemas[0])
    newer = created.metadata.with_new_version(
        "SELECT v FROM nyc.taxis WHERE v > 0", schema, STORAGE, ("nyc",), "lake"
    )
    lakehouse.views.replace(created, newer)
    mv = load_materialized_view(lakehouse, MV)
    assert assess_freshness(lakehouse, mv).reason == "definition-changed"
    catalog.drop_table(BASE.as_tuple())
    assert assess_freshness(lakehouse, mv).state == "invalid"
