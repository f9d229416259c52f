"""The `icemv.quarantine` storage-table property (format/quarantine.py): one codec, golden."""

from __future__ import annotations

from icemv.format.quarantine import (
    QUARANTINE_PROPERTY,
    Quarantine,
    decode_quarantine,
    encode_quarantine,
    quarantine_of,
)

GOLDEN = (
    '{"detail":"the delta deletes rows the storage table does not hold",'
    '"rule":"affected-keys","since-ms":1764130000000,"snapshots":{"ns.orders":5123},'
    '"view-version-id":3}'
)
QUARANTINE = Quarantine(
    rule="affected-keys",
    view_version_id=3,
    since_ms=1_764_130_000_000,
    detail="the delta deletes rows the storage table does not hold",
    snapshots={"ns.orders": 5123},
)


def test_the_property_keeps_its_shape() -> None:
    assert encode_quarantine(QUARANTINE) == GOLDEN
    assert decode_quarantine(GOLDEN) == QUARANTINE


def test_it_applies_to_its_definition_and_rule_only() -> None:
    assert QUARANTINE.applies(3, "affected-keys")
    assert not QUARANTINE.applies(4, "affected-keys")  # the definition changed
    assert not QUARANTINE.applies(3, "row-deltas")


def test_a_value_that_is_not_one_never_stops_refreshes() -> None:
    for text in (
        "",
        "null",
        "[]",
        "{}",
        '{"rule": "x"}',
        "not json",
        '{"rule":1,"view-version-id":"a","since-ms":0}',
    ):
        assert decode_quarantine(text) is None, text
    assert quarantine_of({}) is None
    assert quarantine_of({QUARANTINE_PROPERTY: GOLDEN}) == QUARANTINE


def test_the_detail_is_bounded() -> None:
    long = Quarantine("row-deltas", 1, 0, "x" * 10_000)
    decoded = decode_quarantine(encode_quarantine(long))
    assert decoded is not None and len(decoded.detail) == 500
