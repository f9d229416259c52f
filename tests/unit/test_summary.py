"""The summary keys and codes are a format other tools read: their strings never change."""

from __future__ import annotations

import json

from icemv.format.summary import RefreshMode, RefreshReason, StorageWrite, SummaryKey, summary_of


def test_summary_keys_keep_their_strings() -> None:
    assert {k.value for k in SummaryKey} == {
        "icemv.refresh-id",
        "icemv.mode",
        "icemv.reason",
        "icemv.storage-write",
        "icemv.rows-inserted",
        "icemv.rows-deleted",
        "icemv.engine",
        "icemv.verify-diff",
    }


def test_modes_and_writes_keep_their_strings() -> None:
    assert [m.value for m in RefreshMode] == ["full", "incremental", "no-op", "skipped"]
    assert [w.value for w in StorageWrite] == ["driver", "spark"]


def test_reasons_compare_equal_to_their_literals() -> None:
    assert RefreshReason.SOURCE_CHANGED == "source-changed"
    assert f"{RefreshReason.DELTA_TOO_LARGE}" == "delta-too-large"
    assert RefreshReason("never-refreshed") is RefreshReason.NEVER_REFRESHED
    assert len({r.value for r in RefreshReason}) == len(RefreshReason)


def test_summary_of_nothing_is_empty() -> None:
    assert summary_of(None) == {}


def test_modes_work_where_plain_strings_are_expected() -> None:
    """Metrics labels, scheduler sets and JSON logs take the members as their strings."""
    assert RefreshMode.NO_OP in frozenset({"full", "incremental", "no-op"})
    assert {"skipped": 1}[RefreshMode.SKIPPED] == 1
    assert str(RefreshMode.INCREMENTAL) == "incremental"
    assert json.dumps({"mode": RefreshMode.FULL}) == '{"mode": "full"}'
