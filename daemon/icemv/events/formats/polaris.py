"""Apache Polaris' Kafka event listener: JSON with `event_type`; no snapshot id, so reload."""

from __future__ import annotations

from collections.abc import Mapping

from icemv.errors import BadEventError
from icemv.events.fields import (
    MAX_STRING_LENGTH,
    optional_str,
    optional_time,
    required_str,
    table_name,
    table_namespace,
)
from icemv.events.hints import POLARIS, EventHint, IgnoredEvent, TableCommitHint, ViewChangeHint

_TABLE_TYPES = {
    "AFTER_CREATE_TABLE",
    "AFTER_REGISTER_TABLE",
    "AFTER_UPDATE_TABLE",
    "AFTER_COMMIT_TABLE",  # older Polaris releases
    "AFTER_DROP_TABLE",
    "AFTER_RENAME_TABLE",
}
_TRANSACTION = "AFTER_COMMIT_TRANSACTION"
_VIEW_TYPES = {
    "AFTER_CREATE_VIEW",
    "AFTER_REPLACE_VIEW",
    "AFTER_COMMIT_VIEW",
    "AFTER_DROP_VIEW",
    "AFTER_RENAME_VIEW",
}


def parse_polaris(event: Mapping[str, object], key: bytes | None) -> list[EventHint]:
    kind = required_str(event, "event_type")
    event_id = optional_str(event, "event_id")
    if event_id is None and key and len(key) <= MAX_STRING_LENGTH:
        event_id = key.decode("utf-8", errors="replace")  # Polaris keys records by event id
    if kind in _VIEW_TYPES:
        views = _identifiers(event, "view_identifier", "view_name")
        if not views:
            return [ViewChangeHint(None, None, POLARIS, event_id)]
        return [ViewChangeHint(namespace, name, POLARIS, event_id) for namespace, name in views]
    if kind not in _TABLE_TYPES and kind != _TRANSACTION:
        return [IgnoredEvent(POLARIS, "not-a-table-or-view-event", kind)]
    tables = _identifiers(event, "table_identifier", "table_name")
    if not tables:
        if kind == _TRANSACTION:
            # Polaris follows a transaction with one AFTER_UPDATE_TABLE per table.
            return [IgnoredEvent(POLARIS, "no-tables-listed", kind)]
        raise BadEventError("missing-table-name", "no table_identifier or table_name")
    timestamp_ms = optional_time(event, "timestamp")
    catalog = optional_str(event, "catalog_name")
    return [
        TableCommitHint(
            namespace, name, POLARIS, timestamp_ms=timestamp_ms, event_id=event_id, catalog=catalog
        )
        for namespace, name in tables
    ]


def _identifiers(
    event: Mapping[str, object], identifier_key: str, name_key: str
) -> list[tuple[tuple[str, ...], str]]:
    """Every object an event names: one identifier, a list of them, a rename's two ends, or
    `namespace` + name."""
    found: list[tuple[str, object]] = []
    for field in (identifier_key, "source", "destination"):
        if event.get(field) is not None:
            found.append((field, event[field]))
    listed = event.get(identifier_key + "s")
    if listed is not None:
        if not isinstance(listed, list):
            raise BadEventError("bad-field", f"{identifier_key}s must be a list")
        found.extend((f"{identifier_key}s[]", item) for item in listed)
    identifiers = [_identifier_list(field, value) for field, value in found]
    if not identifiers and event.get(name_key) is not None:
        name = table_name(event[name_key], name_key)
        identifiers.append((table_namespace(event.get("namespace"), "namespace"), name))
    return identifiers


def _identifier_list(field: str, value: object) -> tuple[tuple[str, ...], str]:
    """`["ns", ..., "name"]` (Polaris' JSON), or older producers' dotted string."""
    parts = table_namespace(value, field)
    if len(parts) < 2:
        raise BadEventError("missing-namespace", f"{field} has no namespace")
    return parts[:-1], parts[-1]
