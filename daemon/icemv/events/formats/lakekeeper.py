"""Lakekeeper's CloudEvents 1.0, structured (JSON value) or binary (`ce_*` headers) mode.

`data` is the REST commit request: its `add-snapshot` update carries the snapshot id.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from icemv.errors import BadEventError
from icemv.events.fields import (
    MAX_STRING_LENGTH,
    optional_identifier,
    optional_int64,
    optional_str,
    optional_time,
    optional_uuid,
    required_str,
    table_name,
    table_namespace,
)
from icemv.events.hints import LAKEKEEPER, EventHint, IgnoredEvent, TableCommitHint, ViewChangeHint

_TABLE_TYPES = {"updateTable", "createTable", "registerTable", "dropTable", "renameTable"}
_VIEW_TYPES = {"createView", "updateView", "dropView", "renameView"}
_UNDROP = "undropTabulars"


def binary_cloudevent_attributes(
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
            raise BadEventError("bad-header", f"header {name[:64]} is not UTF-8") from None
    if "type" not in attributes and "specversion" not in attributes:
        return None
    return attributes


def parse_lakekeeper(
    attributes: Mapping[str, object], data: object, key: bytes | None
) -> list[EventHint]:
    kind = required_str(attributes, "type")
    event_id = optional_str(attributes, "id")
    if data is not None and not isinstance(data, dict):
        raise BadEventError("bad-field", "data must be a JSON object")
    if kind == _UNDROP:
        tabular_type = (optional_str(attributes, "tabular-type") or "").lower()
        kind = {"table": "createTable", "view": "createView"}.get(tabular_type, kind)
    if kind in _VIEW_TYPES:
        namespace, name = optional_identifier(attributes, "namespace", "name")
        return [ViewChangeHint(namespace, name, LAKEKEEPER, event_id)]
    if kind not in _TABLE_TYPES:
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
        timestamp_ms = optional_time(attributes, "time")
    table_uuid = optional_uuid(attributes, "tabular-id")
    name = table_name(source.get("name"), f"{where}name")
    return [
        TableCommitHint(
            namespace=table_namespace(source.get("namespace"), f"{where}namespace"),
            name=name,
            format=LAKEKEEPER,
            table_uuid=table_uuid if table_uuid is not None else _key_uuid(key),
            snapshot_id=snapshot_id,
            timestamp_ms=timestamp_ms,
            event_id=event_id,
            warehouse=optional_str(attributes, "warehouse-id"),
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
        snapshot_id = optional_int64(snapshot, "snapshot-id")
        timestamp_ms = optional_int64(snapshot, "timestamp-ms")
    return snapshot_id, timestamp_ms


def _key_uuid(key: bytes | None) -> str | None:
    """Lakekeeper keys records by tabular id: a fallback only, so a bad key is no error."""
    if not key or len(key) > MAX_STRING_LENGTH:
        return None
    try:
        return str(uuid.UUID(key.decode("utf-8")))
    except ValueError:
        return None
