"""Change classification from snapshot metadata, on a real SQLite-file catalog; no JVM."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Table

from icemv.errors import FullRefreshRequiredError
from icemv.format.refresh_state import SourceState
from icemv.lakehouse import Lakehouse
from icemv.refresh.changes.classify import classify_change

SCHEMA = pa.schema([("id", pa.int64()), ("vendor", pa.string())])


def _rows(*ids: int) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "vendor": "a"} for i in ids], schema=SCHEMA)


@pytest.fixture
def table(sqlite_lakehouse: Lakehouse) -> Table:
    table = sqlite_lakehouse.catalog.create_table(("nyc", "Trips Mixed"), schema=SCHEMA)
    table.append(_rows(1, 2, 3))
    return table


def _recorded(table: Table) -> SourceState:
    snapshot = table.current_snapshot()
    return SourceState(
        type="table",
        namespace=("nyc",),
        name="Trips Mixed",
        uuid=str(table.metadata.table_uuid),
        snapshot_id=snapshot.snapshot_id if snapshot else None,
    )


def _current(table: Table) -> int:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def test_unchanged(table: Table) -> None:
    change = classify_change(table, _recorded(table), _current(table))
    assert (change.kind, change.snapshots, change.changed_records) == ("unchanged", (), 0)


def test_appends_are_append_only_and_counted(table: Table) -> None:
    recorded = _recorded(table)
    table.append(_rows(4, 5))
    table.append(_rows(6))
    change = classify_change(table, recorded, _current(table))
    assert change.kind == "append-only"
    assert change.operations == ("append", "append")
    assert (change.changed_records, change.total_records) == (3, 6)
    assert change.identifier.name == "Trips Mixed"


def test_a_delete_makes_the_change_general(table: Table) -> None:
    recorded = _recorded(table)
    table.append(_rows(4))
    table.delete(EqualTo("id", 2))
    change = classify_change(table, recorded, _current(table))
    assert change.kind == "general"
    assert change.operations[0] == "append"


def test_a_recreated_table_needs_a_full_refresh(sqlite_lakehouse: Lakehouse, table: Table) -> None:
    recorded = _recorded(table)
    sqlite_lakehouse.catalog.drop_table(("nyc", "Trips Mixed"))
    again = sqlite_lakehouse.catalog.create_table(("nyc", "Trips Mixed"), schema=SCHEMA)
    again.append(_rows(1))
    with pytest.raises(FullRefreshRequiredError) as raised:
        classify_change(again, recorded, _current(again))
    assert raised.value.reason == "source-replaced"


def test_a_snapshot_off_the_history_needs_a_full_refresh(table: Table) -> None:
    recorded = _recorded(table)
    table.append(_rows(4))
    rolled_back = SourceState(**{**recorded.__dict__, "snapshot_id": 12345})
    with pytest.raises(FullRefreshRequiredError) as raised:
        classify_change(table, rolled_back, _current(table))
    assert raised.value.reason == "source-history-lost"
