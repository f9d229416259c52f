"""Catalog commit events (icemv, Lakekeeper CloudEvents, Polaris) parsed into hints.

Events are lost, duplicated and reordered, and several formats carry no snapshot id, so an
event only says "this table may have changed": the daemon reloads the table from the catalog.
Parsing is pure and total: for any bytes it returns a list or raises `BadEventError` with a
machine-readable reason, so one bad message never stops the consumer. Names taken from an
event are data for catalog look-ups, never SQL text.
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from icemv.errors import BadEventError

ICEMV = "icemv"
LAKEKEEPER = "lakekeeper"
POLARIS = "polaris"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_ICEMV_TABLE, _ICEMV_VIEW = "table-commit", "view-commit"
_LAKEKEEPER_TABLE_TYPES = {
    "updateTable",
    "createTable",
    "registerTable",
    "dropTable",
    "renameTable",
}
_LAKEKEEPER_VIEW_TYPES = {"createView", "updateView", "dropView", "renameView"}
_LAKEKEEPER_UNDROP = "undropTabulars"
_POLARIS_TABLE_TYPES = {
    "AFTER_CREATE_TABLE",
    "AFTER_REGISTER_TABLE",
    "AFTER_UPDATE_TABLE",
    "AFTER_COMMIT_TABLE",  # older Polaris releases
    "AFTER_DROP_TABLE",
    "AFTER_RENAME_TABLE",
}
_POLARIS_TRANSACTION = "AFTER_COMMIT_TRANSACTION"
_POLARIS_VIEW_TYPES = {
    "AFTER_CREATE_VIEW",
    "AFTER_REPLACE_VIEW",
    "AFTER_COMMIT_VIEW",
    "AFTER_DROP_VIEW",
    "AFTER_RENAME_VIEW",
}


@dataclass(frozen=True)
class TableCommitHint:
    """Table `namespace.name` may have changed (committed, created, dropped or renamed)."""

    namespace: tuple[str, ...]
    name: str
    format: str
    table_uuid: str | None = None
    snapshot_id: int | None = None
    # The snapshot's timestamp when the event has one, else the event's time.
    timestamp_ms: int | None = None
    event_id: str | None = None
    catalog: str | None = None
    # The warehouse id a Lakekeeper event names (its REST prefix).
    warehouse: str | None = None


@dataclass(frozen=True)
class ViewChangeHint:
    """A view changed, so an MV definition may have: re-read definitions (name may be unknown)."""

    namespace: tuple[str, ...] | None
    name: str | None
    format: str
    event_id: str | None = None


@dataclass(frozen=True)
class IgnoredEvent:
    """A valid event of a kind the daemon does not act on; `reason` is a fixed code."""

    format: str
    reason: str
    # The producer's own type name, for logs only (unbounded: never a metric label).
    event_type: str | None = None


EventHint = TableCommitHint | ViewChangeHint | IgnoredEvent


def parse_event(
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
    key: bytes | None = None,
) -> list[EventHint]:
    """The hints in one Kafka record; raises only `BadEventError`."""
    attributes = _binary_cloudevent_attributes(headers)
    if attributes is not None:
        data = None if not value or not value.strip() else _load_json(value)
        return _lakekeeper(attributes, data, key)
    if not value or not value.strip():
        raise BadEventError("empty", "the record has no value")
    event = _load_json(value)
    if not isinstance(event, dict):
        raise BadEventError("not-an-object", "the value is not a JSON object")
    if "specversion" in event:
        return _lakekeeper(event, event.get("data"), key)
    if "event_type" in event:
        return _polaris(event, key)
    if "type" in event:
        return _icemv(event)
    raise BadEventError("unknown-format", "no type, event_type or specversion")


def _load_json(value: bytes) -> object:
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise BadEventError("not-json", "the value is not UTF-8 JSON") from None


def _binary_cloudevent_attributes(
    headers: Sequence[tuple[str, bytes | None]],
) -> dict[str, object] | None:
    """CloudEvents binary mode keeps the attributes in `ce_*` headers; None if not that mode."""
    attributes: dict[str, object] = {}
    for name, raw in headers:
        if not name.startswith("ce_") or raw is None:
            continue
        try:
            attributes[name[3:]] = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadEventError("bad-header", f"header {name} is not UTF-8") from None
    if "type" not in attributes and "specversion" not in attributes:
        return None
    return attributes


# --- icemv -----------------------------------------------------------------------------


def _icemv(event: Mapping[str, object]) -> list[EventHint]:
    kind = _required_str(event, "type")
    if kind == _ICEMV_VIEW:
        namespace, name = _optional_identifier(event, "namespace", "name")
        return [ViewChangeHint(namespace, name, ICEMV)]
    if kind != _ICEMV_TABLE:
        raise BadEventError("unknown-type", "icemv type is not table-commit or view-commit")
    name = _table_name(event.get("name"), "name")  # first: a missing name says the most
    return [
        TableCommitHint(
            namespace=_table_namespace(event.get("namespace"), "namespace"),
            name=name,
            format=ICEMV,
            table_uuid=_optional_uuid(event, "table-uuid"),
            snapshot_id=_optional_int64(event, "snapshot-id"),
            timestamp_ms=_optional_int64(event, "timestamp-ms"),
            catalog=_optional_str(event, "catalog"),
        )
    ]


def encode_icemv_event(
    namespace: str | Sequence[str],
    name: str,
    *,
    catalog: str | None = None,
    table_uuid: str | None = None,
    snapshot_id: int | None = None,
    parent_snapshot_id: int | None = None,
    sequence_number: int | None = None,
    operation: str | None = None,
    timestamp_ms: int | None = None,
    metadata_location: str | None = None,
) -> tuple[bytes, bytes]:
    """(key, value) of icemv's own table-commit event; None fields are left out.

    A str namespace is dotted. Raises `BadEventError` (a ValueError) for values that
    `parse_event` would reject, so icemv never publishes what it cannot read back.
    """
    parts = _table_namespace(namespace, "namespace")
    fields: dict[str, object] = {
        "type": _ICEMV_TABLE,
        "catalog": catalog,
        "namespace": list(parts),
        "name": _table_name(name, "name"),
        "table-uuid": table_uuid,
        "snapshot-id": snapshot_id,
        "parent-snapshot-id": parent_snapshot_id,
        "sequence-number": sequence_number,
        "operation": operation,
        "timestamp-ms": timestamp_ms,
        "metadata-location": metadata_location,
    }
    payload = {field: value for field, value in fields.items() if value is not None}
    for field in ("snapshot-id", "parent-snapshot-id", "sequence-number", "timestamp-ms"):
        _optional_int64(payload, field)
    for field in ("catalog", "operation", "metadata-location"):
        _optional_str(payload, field)
    if table_uuid is not None:
        payload["table-uuid"] = _optional_uuid(payload, "table-uuid")
    value = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return ".".join((*parts, name)).encode("utf-8"), value.encode("utf-8")


# --- Lakekeeper CloudEvents ----------------------------------------------------------------


def _lakekeeper(
    attributes: Mapping[str, object], data: object, key: bytes | None
) -> list[EventHint]:
    kind = _required_str(attributes, "type")
    event_id = _optional_str(attributes, "id")
    if data is not None and not isinstance(data, dict):
        raise BadEventError("bad-field", "data must be a JSON object")
    if kind == _LAKEKEEPER_UNDROP:
        tabular_type = (_optional_str(attributes, "tabular-type") or "").lower()
        kind = {"table": "createTable", "view": "createView"}.get(tabular_type, kind)
    if kind in _LAKEKEEPER_VIEW_TYPES:
        namespace, name = _optional_identifier(attributes, "namespace", "name")
        return [ViewChangeHint(namespace, name, LAKEKEEPER, event_id)]
    if kind not in _LAKEKEEPER_TABLE_TYPES:
        return [IgnoredEvent(LAKEKEEPER, "not-a-table-or-view-event", kind)]

    # The REST request's identifier has a structured namespace; the attributes always exist.
    identifier = data.get("identifier") if data is not None else None
    source: Mapping[str, object] = attributes
    where = ""
    if identifier is not None:
        if not isinstance(identifier, dict):
            raise BadEventError("bad-field", "data.identifier must be a JSON object")
        source, where = identifier, "data.identifier."
    snapshot_id, timestamp_ms = _added_snapshot(data)
    if timestamp_ms is None:
        timestamp_ms = _optional_time(attributes, "time")
    table_uuid = _optional_uuid(attributes, "tabular-id")
    name = _table_name(source.get("name"), f"{where}name")
    return [
        TableCommitHint(
            namespace=_table_namespace(source.get("namespace"), f"{where}namespace"),
            name=name,
            format=LAKEKEEPER,
            table_uuid=table_uuid if table_uuid is not None else _key_uuid(key),
            snapshot_id=snapshot_id,
            timestamp_ms=timestamp_ms,
            event_id=event_id,
            warehouse=_optional_str(attributes, "warehouse-id"),
        )
    ]


def _added_snapshot(data: Mapping[str, object] | None) -> tuple[int | None, int | None]:
    """(snapshot-id, timestamp-ms) of the last `add-snapshot` update, if the commit has one."""
    updates = None if data is None else data.get("updates")
    if updates is None:
        return None, None
    if not isinstance(updates, list):
        raise BadEventError("bad-field", "data.updates must be a list")
    snapshot_id = timestamp_ms = None
    for update in updates:
        if not isinstance(update, dict):
            raise BadEventError("bad-field", "data.updates holds a non-object")
        if update.get("action") != "add-snapshot":
            continue
        snapshot = update.get("snapshot", update)  # the REST spec nests it; tolerate flat
        if not isinstance(snapshot, dict):
            raise BadEventError("bad-field", "add-snapshot.snapshot must be a JSON object")
        snapshot_id = _optional_int64(snapshot, "snapshot-id")
        timestamp_ms = _optional_int64(snapshot, "timestamp-ms")
    return snapshot_id, timestamp_ms


def _key_uuid(key: bytes | None) -> str | None:
    """Lakekeeper keys records by tabular id: a fallback only, so a bad key is no error."""
    try:
        return str(uuid.UUID(key.decode("utf-8"))) if key else None
    except ValueError:
        return None


# --- Polaris ---------------------------------------------------------------------------


def _polaris(event: Mapping[str, object], key: bytes | None) -> list[EventHint]:
    kind = _required_str(event, "event_type")
    event_id = _optional_str(event, "event_id")
    if event_id is None and key:
        event_id = key.decode("utf-8", errors="replace")  # Polaris keys records by event id
    if kind in _POLARIS_VIEW_TYPES:
        views = _polaris_identifiers(event, "view_identifier", "view_name")
        if not views:
            return [ViewChangeHint(None, None, POLARIS, event_id)]
        return [ViewChangeHint(namespace, name, POLARIS, event_id) for namespace, name in views]
    if kind not in _POLARIS_TABLE_TYPES and kind != _POLARIS_TRANSACTION:
        return [IgnoredEvent(POLARIS, "not-a-table-or-view-event", kind)]
    tables = _polaris_identifiers(event, "table_identifier", "table_name")
    if not tables:
        if kind == _POLARIS_TRANSACTION:
            # Polaris follows a transaction with one AFTER_UPDATE_TABLE per table.
            return [IgnoredEvent(POLARIS, "no-tables-listed", kind)]
        raise BadEventError("missing-table-name", "no table_identifier or table_name")
    timestamp_ms = _optional_time(event, "timestamp")
    catalog = _optional_str(event, "catalog_name")
    return [
        TableCommitHint(
            namespace, name, POLARIS, timestamp_ms=timestamp_ms, event_id=event_id, catalog=catalog
        )
        for namespace, name in tables
    ]


def _polaris_identifiers(
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
        name = _table_name(event[name_key], name_key)
        identifiers.append((_table_namespace(event.get("namespace"), "namespace"), name))
    return identifiers


def _identifier_list(field: str, value: object) -> tuple[tuple[str, ...], str]:
    """`["ns", ..., "name"]` (Polaris' JSON), or older producers' dotted string."""
    parts = _table_namespace(value, field)
    if len(parts) < 2:
        raise BadEventError("missing-namespace", f"{field} has no namespace")
    return parts[:-1], parts[-1]


# --- field validation ------------------------------------------------------------------


def _table_namespace(value: object, field: str) -> tuple[str, ...]:
    """A list of non-empty strings, or one string split at U+001F (Lakekeeper) or dots."""
    if value is None:
        raise BadEventError("missing-namespace", f"{field} is missing")
    if isinstance(value, str):
        parts: list[object] = list(value.split("\x1f" if "\x1f" in value else "."))
    elif isinstance(value, list):
        parts = value
    elif isinstance(value, tuple):  # from encode_icemv_event's callers
        parts = list(value)
    else:
        raise BadEventError("bad-field", f"{field} must be a list of strings or a string")
    if not parts or not all(isinstance(part, str) and part for part in parts):
        raise BadEventError("bad-field", f"{field} must hold non-empty strings")
    return tuple(str(part) for part in parts)


def _table_name(value: object, field: str) -> str:
    if value is None:
        raise BadEventError("missing-table-name", f"{field} is missing")
    if not isinstance(value, str) or not value:
        raise BadEventError("bad-field", f"{field} must be a non-empty string")
    return value


def _optional_identifier(
    source: Mapping[str, object], namespace_key: str, name_key: str
) -> tuple[tuple[str, ...] | None, str | None]:
    namespace = source.get(namespace_key)
    name = source.get(name_key)
    return (
        None if namespace is None else _table_namespace(namespace, namespace_key),
        None if name is None else _table_name(name, name_key),
    )


def _required_str(source: Mapping[str, object], field: str) -> str:
    value = _optional_str(source, field)
    if value is None:
        raise BadEventError("bad-field", f"{field} is missing")
    return value


def _optional_str(source: Mapping[str, object], field: str) -> str | None:
    value = source.get(field)
    if value is not None and not isinstance(value, str):
        raise BadEventError("bad-field", f"{field} must be a string")
    return value


def _optional_int64(source: Mapping[str, object], field: str) -> int | None:
    value = source.get(field)
    if value is None:
        return None
    # bool is an int in Python but never a valid id or timestamp.
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not _INT64_MIN <= value <= _INT64_MAX
    ):
        raise BadEventError("bad-field", f"{field} must be a 64-bit integer")
    return value


def _optional_uuid(source: Mapping[str, object], field: str) -> str | None:
    """Canonical lower-case form, so the same table deduplicates across formats."""
    value = _optional_str(source, field)
    if value is None:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise BadEventError("bad-field", f"{field} must be a UUID") from None


def _optional_time(source: Mapping[str, object], field: str) -> int | None:
    """Milliseconds since the epoch of an ISO-8601 / RFC 3339 time (UTC if no offset)."""
    value = _optional_str(source, field)
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return (moment - _EPOCH) // timedelta(milliseconds=1)
    except (ValueError, OverflowError):
        raise BadEventError("bad-field", f"{field} must be an ISO-8601 time") from None


# --- deduplication ---------------------------------------------------------------------


class EventDeduplicator:
    """Recently seen events, by event id and by (table uuid, snapshot id).

    Catches redeliveries and the same commit announced in two formats. Bounded LRU, so
    memory stays flat; forgetting an old entry costs at most one redundant reload.
    Not thread-safe: use it from the consumer's thread.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be positive")
        self._max_entries = max_entries
        self._entries: OrderedDict[tuple[object, ...], None] = OrderedDict()

    def seen(self, hint: EventHint) -> bool:
        """Whether any identity of `hint` was seen before; records them all."""
        found = False
        for key in _dedup_keys(hint):
            if key in self._entries:
                found = True
                self._entries.move_to_end(key)
            else:
                self._entries[key] = None
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
        return found

    def __len__(self) -> int:
        return len(self._entries)


def _dedup_keys(hint: EventHint) -> list[tuple[object, ...]]:
    if isinstance(hint, IgnoredEvent):
        return []
    keys: list[tuple[object, ...]] = []
    if hint.event_id is not None:
        # One event can name several tables (a rename, a transaction): the id alone is not enough.
        kind = "table" if isinstance(hint, TableCommitHint) else "view"
        keys.append(("event", hint.format, hint.event_id, kind, hint.namespace, hint.name))
    if isinstance(hint, TableCommitHint) and hint.table_uuid and hint.snapshot_id is not None:
        keys.append(("snapshot", hint.table_uuid, hint.snapshot_id))
    return keys
