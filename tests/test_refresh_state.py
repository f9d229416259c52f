import json

import pytest

from icemv.errors import RefreshStateError
from icemv.format.refresh_state import (
    RefreshState,
    SourceState,
    decode_refresh_state,
    encode_refresh_state,
    refresh_state_from_summary,
)

STATE = RefreshState(
    view_version_id=1,
    refresh_start_timestamp_ms=1573518435000,
    source_states=(
        SourceState("table", ("nyc",), "taxis", uuid="d4a1", snapshot_id=6148331192489823102),
        SourceState("view", ("nyc",), "trips_clean", uuid="v-1", version_id=3),
    ),
)


def test_encodes_exactly_the_spec_fields() -> None:
    raw = json.loads(encode_refresh_state(STATE))
    assert set(raw) == {"view-version-id", "refresh-start-timestamp-ms", "source-states"}
    table, view = raw["source-states"]
    assert table == {
        "type": "table",
        "namespace": ["nyc"],
        "name": "taxis",
        "uuid": "d4a1",
        "snapshot-id": 6148331192489823102,
        "ref": "main",
    }
    assert view == {
        "type": "view",
        "namespace": ["nyc"],
        "name": "trips_clean",
        "uuid": "v-1",
        "version-id": 3,
    }


def test_round_trip() -> None:
    assert decode_refresh_state(encode_refresh_state(STATE)) == STATE


def test_reads_older_producers() -> None:
    old = {
        "refresh-version-id": 1,
        "refresh-start-timestamp-ms": 1573518435000,
        "source-table-states": [
            {
                "namespace": ["nyc"],
                "name": "taxis",
                "uuid": "d4a1",
                "snapshot-id": 6148331192489823102,
            }
        ],
        "source-view-states": [
            {"namespace": ["nyc"], "name": "trips_clean", "uuid": "v-1", "version-id": 3}
        ],
    }
    assert decode_refresh_state(json.dumps(old)) == STATE


def test_reads_trino_summary_keys() -> None:
    state = refresh_state_from_summary(
        {
            "operation": "overwrite",
            "dependsOnTables": "nyc.taxis=6148331192489823102,nyc.zones=42",
            "trino-query-start-time": "2024-03-30T23:51:08.070Z",
        }
    )
    assert state is not None
    assert state.view_version_id is None
    assert [(s.dotted, s.snapshot_id) for s in state.source_states] == [
        ("nyc.taxis", 6148331192489823102),
        ("nyc.zones", 42),
    ]
    assert state.refresh_start_timestamp_ms == 1711842668070


def test_maintenance_snapshots_carry_no_state() -> None:
    assert refresh_state_from_summary({"operation": "replace"}) is None


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"refresh-start-timestamp-ms": 1}',
        '{"view-version-id": 1, "refresh-start-timestamp-ms": 1, "source-states": [{"type": "x"}]}',
        '{"view-version-id": 1, "refresh-start-timestamp-ms": 1, "source-states": [{"type": "view",'
        ' "namespace": ["a"], "name": "b"}]}',
    ],
)
def test_malformed_states_are_clear_errors(text: str) -> None:
    with pytest.raises(RefreshStateError):
        decode_refresh_state(text)
