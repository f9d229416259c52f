"""Commit-event parsing: every format, every bad-event reason, deduplication, and a fuzz that
nothing but a list or BadEventError ever comes out."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icemv.errors import BadEventError
from icemv.events.dedup import EventDeduplicator
from icemv.events.formats.icemv import IcemvCommitEvent
from icemv.events.hints import EventHint, IgnoredEvent, TableCommitHint, ViewChangeHint
from icemv.events.parse import parse_event

UUID = "6891e4cd-ebac-4e4a-b511-dd3bcb3b6798"
EVENT_ID = "01968fa6-3c1a-7d41-9b5c-0c2a6f7e9d10"


def js(value: object) -> bytes:
    return json.dumps(value).encode()


def bad_reason(
    value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = (), key: bytes | None = None
) -> str:
    with pytest.raises(BadEventError) as caught:
        parse_event(value, headers, key)
    return caught.value.reason


# --- icemv -------------------------------------------------------------------------------

SPEC_EXAMPLE = {
    "type": "table-commit",
    "catalog": "lake",
    "namespace": ["nyc"],
    "name": "taxis",
    "table-uuid": UUID.upper(),
    "snapshot-id": 3838051412002077211,
    "parent-snapshot-id": 3838051412002077000,
    "sequence-number": 7,
    "operation": "append",
    "timestamp-ms": 1711842668070,
    "metadata-location": "file:///w/nyc/taxis/metadata/00007-x.metadata.json",
}


def test_icemv_table_commit_from_the_spec() -> None:
    assert parse_event(js(SPEC_EXAMPLE), key=b"nyc.taxis") == [
        TableCommitHint(
            namespace=("nyc",),
            name="taxis",
            format="icemv",
            table_uuid=UUID,  # canonical lower case, to deduplicate across formats
            snapshot_id=3838051412002077211,
            timestamp_ms=1711842668070,
            event_id=None,
            catalog="lake",
        )
    ]


def test_icemv_needs_only_namespace_and_name() -> None:
    value = js({"type": "table-commit", "namespace": "a.b", "name": "t"})
    assert parse_event(value) == [TableCommitHint(("a", "b"), "t", "icemv")]


def test_icemv_view_commit_is_a_view_change() -> None:
    named = js({"type": "view-commit", "namespace": ["nyc"], "name": "pickup_agg"})
    assert parse_event(named) == [ViewChangeHint(("nyc",), "pickup_agg", "icemv")]
    assert parse_event(js({"type": "view-commit"})) == [ViewChangeHint(None, None, "icemv")]


def test_encode_icemv_event_key_value_and_omitted_fields() -> None:
    key, value = IcemvCommitEvent(
        ["nyc", "2024"], "taxis", snapshot_id=5, operation="append"
    ).encode()
    assert key == b"nyc.2024.taxis"
    assert json.loads(value) == {
        "type": "table-commit",
        "namespace": ["nyc", "2024"],
        "name": "taxis",
        "snapshot-id": 5,
        "operation": "append",
    }


def test_encode_icemv_event_round_trips_every_field() -> None:
    key, value = IcemvCommitEvent(
        ("nyc",),
        "taxis",
        catalog="lake",
        table_uuid=UUID,
        snapshot_id=-1,
        parent_snapshot_id=2,
        sequence_number=3,
        operation="overwrite",
        timestamp_ms=4,
        metadata_location="s3://b/m.json",
    ).encode()
    assert json.loads(value)["metadata-location"] == "s3://b/m.json"
    assert parse_event(value, key=key) == [
        TableCommitHint(("nyc",), "taxis", "icemv", UUID, -1, 4, None, "lake")
    ]


@pytest.mark.parametrize(
    ("namespace", "name", "fields"),
    [
        ([], "t", {}),
        (["a", ""], "t", {}),
        (["a"], "", {}),
        (["a"], "t", {"snapshot_id": True}),
        (["a"], "t", {"snapshot_id": 2**63}),
        (["a"], "t", {"table_uuid": "not-a-uuid"}),
        (["a"], "t\x00", {}),
        (["a\n"], "t", {}),
        (["a"], "t" * 256, {}),
    ],
)
def test_encode_icemv_event_refuses_what_it_could_not_read_back(
    namespace: list[str], name: str, fields: dict[str, object]
) -> None:
    with pytest.raises(ValueError):
        IcemvCommitEvent(namespace, name, **fields).encode()  # type: ignore[arg-type]


# Catalog names: anything but control characters and lone surrogates (those are bad events).
names = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=20)


@given(
    namespace=st.lists(names, min_size=1, max_size=3),
    name=names,
    snapshot_id=st.none() | st.integers(-(2**63), 2**63 - 1),
    timestamp_ms=st.none() | st.integers(0, 2**62),
    table_uuid=st.none() | st.uuids().map(str),
    catalog=st.none() | names,
)
def test_encode_then_parse_is_identity(
    namespace: list[str],
    name: str,
    snapshot_id: int | None,
    timestamp_ms: int | None,
    table_uuid: str | None,
    catalog: str | None,
) -> None:
    key, value = IcemvCommitEvent(
        namespace,
        name,
        catalog=catalog,
        table_uuid=table_uuid,
        snapshot_id=snapshot_id,
        timestamp_ms=timestamp_ms,
    ).encode()
    assert parse_event(value, key=key) == [
        TableCommitHint(
            tuple(namespace), name, "icemv", table_uuid, snapshot_id, timestamp_ms, None, catalog
        )
    ]


# --- Lakekeeper CloudEvents --------------------------------------------------------------

COMMIT_REQUEST = {
    "identifier": {"namespace": ["nyc", "raw"], "name": "taxis"},
    "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1}],
    "updates": [
        {
            "action": "add-snapshot",
            "snapshot": {
                "snapshot-id": 1,
                "timestamp-ms": 1000,
                "summary": {"operation": "append"},
            },
        },
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1},
        {
            "action": "add-snapshot",
            "snapshot": {
                "snapshot-id": 2,
                "parent-snapshot-id": 1,
                "sequence-number": 9,
                "timestamp-ms": 2000,
                "summary": {"operation": "overwrite"},
            },
        },
    ],
}


WAREHOUSE_ID = "a0b1c2d3-0000-4000-8000-000000000000"


def lakekeeper_attributes(kind: str, **extra: object) -> dict[str, object]:
    return {
        "specversion": "1.0",
        "id": EVENT_ID,
        "source": "uri:iceberg-catalog-service:catalog-0",
        "type": kind,
        "time": "2025-01-01T00:00:01.5Z",
        "tabular-type": "Table",
        "tabular-id": UUID,
        "warehouse-id": WAREHOUSE_ID,
        "name": "taxis",
        "namespace": "nyc\x1fraw",
        "prefix": "",
        "num-events": 1,
        "sequence-number": 0,
        "trace-id": "t",
        **extra,
    }


def structured_event(kind: str, data: object = None, **extra: object) -> dict[str, object]:
    attributes = lakekeeper_attributes(kind, **extra)
    return {**attributes, "datacontenttype": "application/json", "data": data}


def structured(kind: str, data: object = None, **extra: object) -> bytes:
    return js(structured_event(kind, data, **extra))


def binary_headers(kind: str, **extra: object) -> list[tuple[str, bytes | None]]:
    """The CloudEvents Kafka binding: each attribute in a `ce_` header, as a string."""
    headers: list[tuple[str, bytes | None]] = [("content-type", b"application/json")]
    for name, value in lakekeeper_attributes(kind, **extra).items():
        headers.append((f"ce_{name}", str(value).encode()))
    return headers


UPDATE_HINT = TableCommitHint(
    namespace=("nyc", "raw"),
    name="taxis",
    format="lakekeeper",
    table_uuid=UUID,
    snapshot_id=2,  # the last add-snapshot of the commit
    timestamp_ms=2000,
    event_id=EVENT_ID,
    warehouse=WAREHOUSE_ID,  # matched against the REST catalog's warehouse / prefix
)


def test_lakekeeper_structured_update_table_takes_the_added_snapshot() -> None:
    assert parse_event(structured("updateTable", COMMIT_REQUEST), key=UUID.encode()) == [
        UPDATE_HINT
    ]


def test_lakekeeper_binary_mode_equals_structured_mode() -> None:
    assert parse_event(js(COMMIT_REQUEST), binary_headers("updateTable")) == [UPDATE_HINT]


def test_lakekeeper_flat_add_snapshot_is_tolerated() -> None:
    data = {"updates": [{"action": "add-snapshot", "snapshot-id": 7, "timestamp-ms": 8}]}
    [hint] = parse_event(structured("updateTable", data))
    assert isinstance(hint, TableCommitHint)
    assert (hint.snapshot_id, hint.timestamp_ms, hint.namespace) == (7, 8, ("nyc", "raw"))


@pytest.mark.parametrize("kind", ["createTable", "registerTable", "dropTable", "renameTable"])
def test_lakekeeper_table_lifecycle_events_name_the_table_in_attributes(kind: str) -> None:
    expected = TableCommitHint(
        ("nyc", "raw"),
        "taxis",
        "lakekeeper",
        UUID,
        None,
        1735689601500,
        EVENT_ID,
        warehouse=WAREHOUSE_ID,
    )
    assert parse_event(structured(kind)) == [expected]
    # Binary mode: drop and rename carry no data at all.
    assert parse_event(None, binary_headers(kind)) == [expected]
    assert parse_event(b"null", binary_headers(kind)) == [expected]


def test_lakekeeper_dotted_or_list_namespace_attribute() -> None:
    [dotted] = parse_event(structured("dropTable", namespace="a.b"))
    [listed] = parse_event(structured("dropTable", namespace=["a.b"]))
    assert isinstance(dotted, TableCommitHint) and isinstance(listed, TableCommitHint)
    assert (dotted.namespace, listed.namespace) == (("a", "b"), ("a.b",))


def test_lakekeeper_table_uuid_falls_back_to_the_record_key() -> None:
    headers = [h for h in binary_headers("dropTable") if h[0] != "ce_tabular-id"]
    [hint] = parse_event(None, headers, key=UUID.upper().encode())
    assert isinstance(hint, TableCommitHint) and hint.table_uuid == UUID
    [unkeyed] = parse_event(None, headers, key=b"\xff not a uuid")
    assert isinstance(unkeyed, TableCommitHint) and unkeyed.table_uuid is None


@pytest.mark.parametrize("kind", ["createView", "updateView", "dropView", "renameView"])
def test_lakekeeper_view_events(kind: str) -> None:
    expected = [ViewChangeHint(("nyc", "raw"), "taxis", "lakekeeper", EVENT_ID)]
    assert parse_event(structured(kind, {"name": "taxis"}, **{"tabular-type": "View"})) == expected
    assert parse_event(js({"name": "taxis"}), binary_headers(kind)) == expected


@pytest.mark.parametrize(
    ("tabular_type", "expected_class"),
    [("Table", TableCommitHint), ("view", ViewChangeHint), ("GenericTable", IgnoredEvent)],
)
def test_lakekeeper_undrop_follows_the_tabular_type(
    tabular_type: str, expected_class: type[EventHint]
) -> None:
    [hint] = parse_event(structured("undropTabulars", **{"tabular-type": tabular_type}))
    assert type(hint) is expected_class


@pytest.mark.parametrize("kind", ["createNamespace", "dropNamespace", "someFutureEvent"])
def test_lakekeeper_other_types_are_ignored_not_bad(kind: str) -> None:
    expected = [IgnoredEvent("lakekeeper", "not-a-table-or-view-event", kind)]
    assert parse_event(structured(kind)) == expected
    assert parse_event(None, binary_headers(kind)) == expected


# --- Polaris -----------------------------------------------------------------------------


def polaris_event(event_type: str, **fields: object) -> dict[str, object]:
    return {
        "event_type": event_type,
        "event_id": EVENT_ID,
        "timestamp": "2025-01-01T00:00:01.123456789Z",
        "catalog_name": "lake",
        "realm_id": "POLARIS",
        "principal": "root",
        "request_id": "r-1",
        **fields,
    }


def polaris(event_type: str, **fields: object) -> bytes:
    return js(polaris_event(event_type, **fields))


def polaris_hint(namespace: tuple[str, ...], name: str) -> TableCommitHint:
    return TableCommitHint(namespace, name, "polaris", None, None, 1735689601123, EVENT_ID, "lake")


@pytest.mark.parametrize(
    "event_type",
    ["AFTER_UPDATE_TABLE", "AFTER_CREATE_TABLE", "AFTER_REGISTER_TABLE", "AFTER_DROP_TABLE"],
)
def test_polaris_table_events(event_type: str) -> None:
    by_parts = polaris(event_type, namespace=["nyc", "raw"], table_name="taxis")
    by_identifier = polaris(event_type, table_identifier=["nyc", "raw", "taxis"])
    expected = [polaris_hint(("nyc", "raw"), "taxis")]
    assert parse_event(by_parts) == expected
    assert parse_event(by_identifier) == expected


def test_polaris_rename_names_both_ends() -> None:
    value = polaris("AFTER_RENAME_TABLE", source=["a", "old"], destination=["b", "new"])
    assert parse_event(value) == [polaris_hint(("a",), "old"), polaris_hint(("b",), "new")]


def test_polaris_transaction_lists_tables_or_defers_to_per_table_events() -> None:
    listed = polaris("AFTER_COMMIT_TRANSACTION", table_identifiers=[["a", "t1"], ["b", "t2"]])
    assert parse_event(listed) == [polaris_hint(("a",), "t1"), polaris_hint(("b",), "t2")]
    assert parse_event(polaris("AFTER_COMMIT_TRANSACTION")) == [
        IgnoredEvent("polaris", "no-tables-listed", "AFTER_COMMIT_TRANSACTION")
    ]


@pytest.mark.parametrize(
    "event_type", ["AFTER_CREATE_VIEW", "AFTER_REPLACE_VIEW", "AFTER_DROP_VIEW"]
)
def test_polaris_view_events(event_type: str) -> None:
    named = polaris(event_type, namespace=["nyc"], view_name="agg")
    assert parse_event(named) == [ViewChangeHint(("nyc",), "agg", "polaris", EVENT_ID)]
    by_identifier = polaris(event_type, view_identifier=["nyc", "agg"])
    assert parse_event(by_identifier) == [ViewChangeHint(("nyc",), "agg", "polaris", EVENT_ID)]
    assert parse_event(polaris(event_type)) == [ViewChangeHint(None, None, "polaris", EVENT_ID)]


@pytest.mark.parametrize(
    "event_type", ["AFTER_CREATE_NAMESPACE", "BEFORE_UPDATE_TABLE", "AFTER_LOAD_TABLE"]
)
def test_polaris_other_events_are_ignored(event_type: str) -> None:
    value = polaris(event_type, namespace=["nyc"], table_name="taxis")
    assert parse_event(value) == [IgnoredEvent("polaris", "not-a-table-or-view-event", event_type)]


def test_polaris_event_id_falls_back_to_the_record_key() -> None:
    value = js({"event_type": "AFTER_UPDATE_TABLE", "table_identifier": ["n", "t"]})
    assert parse_event(value, key=EVENT_ID.encode()) == [
        TableCommitHint(("n",), "t", "polaris", event_id=EVENT_ID)
    ]


# --- bad events --------------------------------------------------------------------------


def icemv(**fields: object) -> bytes:
    return js({"type": "table-commit", "namespace": ["n"], "name": "t", **fields})


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "empty"),
        (b" \n", "empty"),
        (b"{not json", "not-json"),
        (b"\xff\xfe\x00garbage", "not-json"),
        (b"[" * 100_000, "not-json"),  # deeper than the JSON decoder recurses
        (b"9" * 5000, "not-json"),  # beyond Python's integer-string limit
        (b"[1, 2]", "not-an-object"),
        (b'"text"', "not-an-object"),
        (js({"table": "t"}), "unknown-format"),
        (js({"type": "table-drop", "namespace": ["n"], "name": "t"}), "unknown-type"),
        (js({"type": 5}), "bad-field"),
        (js({"type": "table-commit", "namespace": ["n"]}), "missing-table-name"),
        (js({"type": "table-commit", "name": "t"}), "missing-namespace"),
        (icemv(name=""), "bad-field"),
        (icemv(name=["t"]), "bad-field"),
        (icemv(namespace=[]), "bad-field"),
        (icemv(namespace=["n", ""]), "bad-field"),
        (icemv(namespace="n..m"), "bad-field"),
        (icemv(namespace=[1]), "bad-field"),
        (icemv(namespace={"n": 1}), "bad-field"),
        (icemv(**{"snapshot-id": "123"}), "bad-field"),
        (icemv(**{"snapshot-id": True}), "bad-field"),
        (icemv(**{"snapshot-id": 1.5}), "bad-field"),
        (icemv(**{"snapshot-id": 2**63}), "bad-field"),
        (icemv(**{"timestamp-ms": -(2**63) - 1}), "bad-field"),
        (icemv(**{"table-uuid": "nope"}), "bad-field"),
        (icemv(catalog=7), "bad-field"),
        (js({"type": "view-commit", "name": 3}), "bad-field"),
        (js({"specversion": "1.0", "type": "updateTable", "id": "x"}), "missing-table-name"),
        (js({"specversion": "1.0", "type": "updateTable", "name": "t"}), "missing-namespace"),
        (js({"specversion": "1.0", "id": "x"}), "bad-field"),
        (structured("updateTable", [1]), "bad-field"),
        (structured("updateTable", {"identifier": "n.t"}), "bad-field"),
        (structured("updateTable", {"identifier": {"namespace": ["n"]}}), "missing-table-name"),
        (structured("updateTable", {"updates": {"action": "add-snapshot"}}), "bad-field"),
        (structured("updateTable", {"updates": [1]}), "bad-field"),
        (
            structured("updateTable", {"updates": [{"action": "add-snapshot", "snapshot": 1}]}),
            "bad-field",
        ),
        (structured("dropTable", time="yesterday"), "bad-field"),
        (structured("dropTable", id=42), "bad-field"),
        (structured("dropTable", **{"tabular-id": "not-a-uuid"}), "bad-field"),
        (polaris("AFTER_UPDATE_TABLE"), "missing-table-name"),
        (polaris("AFTER_UPDATE_TABLE", table_name="t"), "missing-namespace"),
        (polaris("AFTER_UPDATE_TABLE", table_identifier=["t"]), "missing-namespace"),
        (polaris("AFTER_UPDATE_TABLE", table_identifier=[["n"], "t"]), "bad-field"),
        (polaris("AFTER_COMMIT_TRANSACTION", table_identifiers="n.t"), "bad-field"),
        (polaris("AFTER_UPDATE_TABLE", table_identifier=["n", "t"], timestamp="soon"), "bad-field"),
        (js({"event_type": None}), "bad-field"),
    ],
)
def test_bad_events_raise_with_a_reason(value: bytes | None, reason: str) -> None:
    assert bad_reason(value) == reason


def test_bad_binary_mode_events() -> None:
    assert bad_reason(b"{}", [("ce_type", b"\xffupdate")]) == "bad-header"
    assert bad_reason(b"{oops", binary_headers("updateTable")) == "not-json"
    headers = [h for h in binary_headers("updateTable") if h[0] not in ("ce_name",)]
    assert bad_reason(None, headers) == "missing-table-name"
    assert bad_reason(None, [("ce_specversion", b"1.0")]) == "bad-field"  # no ce_type


def test_headers_without_cloudevent_attributes_are_not_binary_mode() -> None:
    headers: list[tuple[str, bytes | None]] = [("traceparent", b"00-x"), ("ce_type", None)]
    assert parse_event(icemv(), headers) == [TableCommitHint(("n",), "t", "icemv")]


# --- deduplication -----------------------------------------------------------------------


def test_dedup_by_event_id() -> None:
    dedup = EventDeduplicator()
    [hint] = parse_event(structured("dropTable"))
    assert dedup.seen(hint) is False
    assert dedup.seen(hint) is True


def test_dedup_by_table_uuid_and_snapshot_across_formats() -> None:
    dedup = EventDeduplicator()
    [lakekeeper] = parse_event(structured("updateTable", COMMIT_REQUEST))
    _, value = IcemvCommitEvent(["nyc", "raw"], "taxis", table_uuid=UUID, snapshot_id=2).encode()
    [own] = parse_event(value)
    [other_snapshot] = parse_event(
        IcemvCommitEvent(["nyc", "raw"], "taxis", table_uuid=UUID, snapshot_id=3).encode()[1]
    )
    assert dedup.seen(lakekeeper) is False
    assert dedup.seen(own) is True
    assert dedup.seen(other_snapshot) is False


def test_dedup_keeps_every_table_of_one_event_apart() -> None:
    dedup = EventDeduplicator()
    old, new = parse_event(polaris("AFTER_RENAME_TABLE", source=["a", "o"], destination=["a", "n"]))
    assert (dedup.seen(old), dedup.seen(new)) == (False, False)
    assert (dedup.seen(old), dedup.seen(new)) == (True, True)


def test_hints_without_identity_are_never_duplicates() -> None:
    dedup = EventDeduplicator()
    anonymous = TableCommitHint(("n",), "t", "icemv", table_uuid=UUID)  # no snapshot id
    ignored = IgnoredEvent("polaris", "not-a-table-or-view-event")
    assert [dedup.seen(anonymous), dedup.seen(anonymous), dedup.seen(ignored)] == [False] * 3
    assert len(dedup) == 0


def test_dedup_is_a_bounded_lru() -> None:
    dedup = EventDeduplicator(max_entries=2)
    a, b, c = (TableCommitHint(("n",), "t", "icemv", UUID, snapshot) for snapshot in (1, 2, 3))
    assert not dedup.seen(a) and not dedup.seen(b)
    assert dedup.seen(a)  # refreshes a: b is now the least recent
    assert not dedup.seen(c)  # evicts b
    assert len(dedup) == 2
    assert dedup.seen(a)
    assert not dedup.seen(b)
    with pytest.raises(ValueError):
        EventDeduplicator(max_entries=0)


# --- identifiers a catalog cannot hold -------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        {"type": "table-commit", "namespace": ["n"], "name": "t\x00"},
        {"type": "table-commit", "namespace": ["n\x00"], "name": "t"},
        {"type": "table-commit", "namespace": "a.b\x7f", "name": "t"},
        {"type": "table-commit", "namespace": ["n"], "name": "t\ud800"},
        {"type": "table-commit", "namespace": ["n"], "name": "t" * 256},
        {"type": "table-commit", "namespace": ["n"] * 33, "name": "t"},
        {"type": "view-commit", "namespace": ["n"], "name": "v\x1b[31m"},
        {"event_type": "AFTER_UPDATE_TABLE", "table_identifier": ["n", "t\x00"]},
        {"specversion": "1.0", "type": "updateTable", "namespace": "n", "name": "t\x00"},
    ],
)
def test_names_with_control_characters_or_absurd_length_are_bad(event: object) -> None:
    assert bad_reason(js(event)) == "bad-identifier"


def test_the_longest_name_a_catalog_holds_is_accepted() -> None:
    [hint] = parse_event(js({"type": "table-commit", "namespace": ["n"], "name": "t" * 255}))
    assert isinstance(hint, TableCommitHint) and len(hint.name) == 255


def test_huge_values_and_string_fields_are_bad() -> None:
    padding = "x" * (1024 * 1024)
    assert bad_reason(js({"type": "table-commit", "pad": padding})) == "too-large"
    event = {"type": "table-commit", "namespace": ["n"], "name": "t", "catalog": "c" * 5000}
    assert bad_reason(js(event)) == "bad-field"


def test_huge_keys_are_not_taken_as_event_ids() -> None:
    event = {"event_type": "AFTER_UPDATE_TABLE", "table_identifier": ["n", "t"]}
    [hint] = parse_event(js(event), key=b"k" * 5000)
    assert isinstance(hint, TableCommitHint) and hint.event_id is None


# --- fuzz --------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
KNOWN_KEYS = [
    "type", "specversion", "event_type", "namespace", "name", "data", "identifier",
    "updates", "action", "snapshot", "snapshot-id", "timestamp-ms", "table-uuid", "tabular-id",
    "tabular-type", "id", "time", "timestamp", "event_id", "catalog", "catalog_name",
    "table_name", "table_identifier", "table_identifiers", "source", "destination",
    "view_name", "view_identifier",
]  # fmt: skip
KNOWN_TYPES = [
    "table-commit", "view-commit", "updateTable", "createTable", "dropTable", "renameTable",
    "createView", "undropTabulars", "createNamespace", "AFTER_UPDATE_TABLE",
    "AFTER_RENAME_TABLE", "AFTER_COMMIT_TRANSACTION", "AFTER_CREATE_VIEW", "1.0",
]  # fmt: skip
field_values = (
    json_values | st.sampled_from(KNOWN_TYPES) | st.lists(st.text(max_size=4), max_size=3)
)
shaped_objects = st.recursive(
    st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=5), field_values, max_size=8),
    lambda children: st.dictionaries(
        st.sampled_from(KNOWN_KEYS), children | st.lists(children, max_size=3), max_size=6
    ),
    max_leaves=10,
)
header_lists = st.lists(
    st.tuples(
        st.sampled_from(["ce_type", "ce_specversion", "ce_id", "ce_namespace", "ce_name",
                         "ce_tabular-id", "ce_tabular-type", "ce_time", "content-type"])
        | st.text(max_size=8),
        st.none() | st.binary(max_size=12) | st.sampled_from(KNOWN_TYPES).map(str.encode),
    ),
    max_size=6,
)  # fmt: skip


VALID_EVENTS = [
    SPEC_EXAMPLE,
    {"type": "view-commit", "namespace": ["n"], "name": "v"},
    structured_event("updateTable", COMMIT_REQUEST),
    structured_event("dropTable"),
    structured_event("undropTabulars"),
    structured_event("createView", {"name": "v"}),
    polaris_event("AFTER_UPDATE_TABLE", namespace=["n"], table_name="t"),
    polaris_event("AFTER_RENAME_TABLE", source=["a", "o"], destination=["b", "n"]),
    polaris_event("AFTER_COMMIT_TRANSACTION", table_identifiers=[["a", "t1"], ["b", "t2"]]),
    polaris_event("AFTER_REPLACE_VIEW", view_identifier=["n", "v"]),
]


@st.composite
def mutated(draw: st.DrawFn, value: object, depth: int = 0) -> object:
    """`value` with a few members deleted, replaced by arbitrary JSON, or mutated in turn."""
    if isinstance(value, dict | list) and value and depth < 4:
        copy = dict(value) if isinstance(value, dict) else dict(enumerate(value))
        for member in draw(st.lists(st.sampled_from(sorted(copy)), max_size=2, unique=True)):
            action = draw(st.sampled_from(["delete", "replace", "mutate"]))
            if action == "delete":
                del copy[member]
            elif action == "replace":
                copy[member] = draw(field_values)
            else:
                copy[member] = draw(mutated(copy[member], depth + 1))
        return copy if isinstance(value, dict) else list(copy.values())
    return draw(field_values) if draw(st.booleans()) else value


def assert_well_formed(result: list[EventHint]) -> None:
    assert isinstance(result, list)
    for hint in result:
        assert isinstance(hint, TableCommitHint | ViewChangeHint | IgnoredEvent)
        if isinstance(hint, TableCommitHint):
            assert hint.namespace and all(isinstance(p, str) and p for p in hint.namespace)
            assert isinstance(hint.name, str) and hint.name
            assert hint.snapshot_id is None or type(hint.snapshot_id) is int


def parse_or_bad(
    value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = (), key: bytes | None = None
) -> None:
    try:
        result = parse_event(value, headers, key)
    except BadEventError as error:
        assert isinstance(error.reason, str) and error.reason
    else:
        assert_well_formed(result)


@settings(max_examples=500, deadline=None)
@given(value=st.none() | st.binary(max_size=200), key=st.none() | st.binary(max_size=40))
def test_fuzz_arbitrary_bytes(value: bytes | None, key: bytes | None) -> None:
    parse_or_bad(value, (), key)


@settings(max_examples=500, deadline=None)
@given(
    event=json_values | shaped_objects, headers=header_lists, key=st.none() | st.binary(max_size=40)
)
def test_fuzz_arbitrary_json_and_headers(
    event: object, headers: list[tuple[str, bytes | None]], key: bytes | None
) -> None:
    value = json.dumps(event).encode()
    parse_or_bad(value, (), key)
    parse_or_bad(value, headers, key)


@settings(max_examples=1000, deadline=None)
@given(event=st.sampled_from(VALID_EVENTS).flatmap(mutated), key=st.none() | st.binary(max_size=40))
def test_fuzz_mutated_valid_events(event: object, key: bytes | None) -> None:
    parse_or_bad(js(event), (), key)
    if isinstance(event, dict) and "specversion" in event:
        # The same attributes in binary mode, header values as the producer's strings.
        headers = [(f"ce_{name}", str(value).encode()) for name, value in event.items()]
        parse_or_bad(js(event.get("data")), headers, key)
