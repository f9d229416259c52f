"""icemv's own events: `table-commit` (what `icemv emit` and the publisher send) and
`view-commit`, where only `namespace` and `name` are required; and `mv-refresh`, one
replica's request to another (formats/refresh_request.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from icemv.errors import BadEventError
from icemv.events.fields import (
    optional_identifier,
    optional_int64,
    optional_str,
    optional_uuid,
    required_str,
    table_name,
    table_namespace,
)
from icemv.events.formats.refresh_request import REFRESH_REQUEST, parse_refresh_request
from icemv.events.hints import ICEMV, EventHint, TableCommitHint, ViewChangeHint

TABLE_COMMIT, VIEW_COMMIT = "table-commit", "view-commit"

_INT_FIELDS = ("snapshot-id", "parent-snapshot-id", "sequence-number", "timestamp-ms")
_STR_FIELDS = ("catalog", "operation", "metadata-location")


@dataclass(frozen=True)
class IcemvCommitEvent:
    """One table commit as icemv publishes it; None fields are left out of the JSON.

    A str namespace is dotted. `encode` refuses (with `BadEventError`, a ValueError) what
    `parse_event` would reject, so icemv never publishes what it cannot read back.
    """

    namespace: str | Sequence[str]
    name: str
    catalog: str | None = None
    table_uuid: str | None = None
    snapshot_id: int | None = None
    parent_snapshot_id: int | None = None
    sequence_number: int | None = None
    operation: str | None = None
    timestamp_ms: int | None = None
    metadata_location: str | None = None

    def encode(self) -> tuple[bytes, bytes]:
        """(key, value) of the Kafka record: key `namespace.name`, value JSON."""
        parts = table_namespace(self.namespace, "namespace")
        name = table_name(self.name, "name")
        fields: dict[str, object] = {
            "type": TABLE_COMMIT,
            "catalog": self.catalog,
            "namespace": list(parts),
            "name": name,
            "table-uuid": self.table_uuid,
            "snapshot-id": self.snapshot_id,
            "parent-snapshot-id": self.parent_snapshot_id,
            "sequence-number": self.sequence_number,
            "operation": self.operation,
            "timestamp-ms": self.timestamp_ms,
            "metadata-location": self.metadata_location,
        }
        payload = {field: value for field, value in fields.items() if value is not None}
        for field in _INT_FIELDS:
            optional_int64(payload, field)
        for field in _STR_FIELDS:
            optional_str(payload, field)
        if self.table_uuid is not None:
            payload["table-uuid"] = optional_uuid(payload, "table-uuid")
        value = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return ".".join((*parts, name)).encode("utf-8"), value.encode("utf-8")


def parse_icemv(event: Mapping[str, object]) -> list[EventHint]:
    kind = required_str(event, "type")
    if kind == VIEW_COMMIT:
        namespace, name = optional_identifier(event, "namespace", "name")
        return [ViewChangeHint(namespace, name, ICEMV)]
    if kind == REFRESH_REQUEST:
        return [parse_refresh_request(event)]
    if kind != TABLE_COMMIT:
        raise BadEventError(
            "unknown-type", "icemv type is not table-commit, view-commit or mv-refresh"
        )
    name = table_name(event.get("name"), "name")  # first: a missing name says the most
    return [
        TableCommitHint(
            namespace=table_namespace(event.get("namespace"), "namespace"),
            name=name,
            format=ICEMV,
            table_uuid=optional_uuid(event, "table-uuid"),
            snapshot_id=optional_int64(event, "snapshot-id"),
            timestamp_ms=optional_int64(event, "timestamp-ms"),
            catalog=optional_str(event, "catalog"),
        )
    ]
