"""The `refresh-state` record of a storage-table snapshot, and its one codec.

Writes only the current spec shape; reads older producers too: `refresh-version-id`,
separate `source-table-states` / `source-view-states` lists, and Trino's
`dependsOnTables` / `trino-query-start-time` summary keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from icemv.errors import RefreshStateError

REFRESH_STATE_KEY = "refresh-state"
TRINO_DEPENDS_KEY = "dependsOnTables"
TRINO_START_KEY = "trino-query-start-time"


@dataclass(frozen=True)
class SourceState:
    type: Literal["table", "view"]
    namespace: tuple[str, ...]
    name: str
    uuid: str | None = None
    snapshot_id: int | None = None
    ref: str = "main"
    version_id: int | None = None
    catalog: str | None = None

    @property
    def dotted(self) -> str:
        return ".".join((*self.namespace, self.name))

    @property
    def key(self) -> tuple[str, str | None, tuple[str, ...], str]:
        return (self.type, self.catalog, self.namespace, self.name)


@dataclass(frozen=True)
class RefreshState:
    # None only for producers that do not record it (Trino).
    view_version_id: int | None
    refresh_start_timestamp_ms: int
    source_states: tuple[SourceState, ...] = field(default_factory=tuple)

    def tables(self) -> tuple[SourceState, ...]:
        return tuple(s for s in self.source_states if s.type == "table")

    def views(self) -> tuple[SourceState, ...]:
        return tuple(s for s in self.source_states if s.type == "view")


def encode_refresh_state(state: RefreshState) -> str:
    if state.view_version_id is None:
        raise RefreshStateError("icemv always records the view version id")
    return json.dumps(
        {
            "view-version-id": state.view_version_id,
            "refresh-start-timestamp-ms": state.refresh_start_timestamp_ms,
            "source-states": [_encode_source(source) for source in state.source_states],
        },
        separators=(",", ":"),
    )


def _encode_source(source: SourceState) -> dict[str, Any]:
    out: dict[str, Any] = {"type": source.type}
    if source.catalog is not None:
        out["catalog"] = source.catalog
    out["namespace"] = list(source.namespace)
    out["name"] = source.name
    out["uuid"] = source.uuid
    if source.type == "table":
        out["snapshot-id"] = source.snapshot_id
        out["ref"] = source.ref
    else:
        out["version-id"] = source.version_id
    return out


def decode_refresh_state(text: str) -> RefreshState:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RefreshStateError(f"refresh-state is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise RefreshStateError("refresh-state must be a JSON object")
    version = raw.get("view-version-id", raw.get("refresh-version-id"))
    start = raw.get("refresh-start-timestamp-ms")
    if not isinstance(version, int) or not isinstance(start, int):
        raise RefreshStateError("refresh-state lacks view-version-id or refresh-start-timestamp-ms")
    if "source-states" in raw:
        sources = [_decode_source(item, None) for item in _as_list(raw["source-states"])]
    else:
        sources = [_decode_source(i, "table") for i in _as_list(raw.get("source-table-states"))]
        sources += [_decode_source(i, "view") for i in _as_list(raw.get("source-view-states"))]
    return RefreshState(version, start, tuple(sources))


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RefreshStateError("refresh-state source lists must be arrays")
    return value


def _decode_source(raw: Any, implied_type: str | None) -> SourceState:
    if not isinstance(raw, dict):
        raise RefreshStateError("a source state must be an object")
    kind = raw.get("type", implied_type)
    if kind not in ("table", "view"):
        raise RefreshStateError(f"unknown source type {kind!r}")
    namespace = raw.get("namespace")
    name = raw.get("name")
    if isinstance(namespace, str):
        namespace = namespace.split(".")
    if not isinstance(namespace, list) or not isinstance(name, str):
        raise RefreshStateError("a source state needs namespace and name")
    snapshot_id = raw.get("snapshot-id")
    version_id = raw.get("version-id")
    if kind == "table" and not isinstance(snapshot_id, int | None):
        raise RefreshStateError("snapshot-id must be an integer")
    if kind == "view" and not isinstance(version_id, int):
        raise RefreshStateError("a view source needs an integer version-id")
    return SourceState(
        type=kind,
        namespace=tuple(str(part) for part in namespace),
        name=name,
        uuid=raw.get("uuid"),
        snapshot_id=snapshot_id if kind == "table" else None,
        ref=str(raw.get("ref", "main")),
        version_id=version_id if kind == "view" else None,
        catalog=raw.get("catalog"),
    )


def refresh_state_from_summary(summary: Mapping[str, str]) -> RefreshState | None:
    """The refresh record a storage snapshot carries, if any (maintenance snapshots carry none)."""
    if REFRESH_STATE_KEY in summary:
        return decode_refresh_state(summary[REFRESH_STATE_KEY])
    if TRINO_DEPENDS_KEY in summary:
        return _decode_trino(summary)
    return None


def _decode_trino(summary: Mapping[str, str]) -> RefreshState:
    sources = []
    for item in filter(None, (part.strip() for part in summary[TRINO_DEPENDS_KEY].split(","))):
        table, sep, snapshot = item.rpartition("=")
        schema, dot, name = table.rpartition(".")
        if not sep or not dot:
            raise RefreshStateError(f"unreadable Trino dependsOnTables entry {item!r}")
        try:
            snapshot_id = int(snapshot)
        except ValueError as exc:
            raise RefreshStateError(f"unreadable Trino snapshot id in {item!r}") from exc
        sources.append(SourceState("table", (schema,), name, snapshot_id=snapshot_id))
    start_ms = 0
    if TRINO_START_KEY in summary:
        start_ms = int(datetime.fromisoformat(summary[TRINO_START_KEY]).timestamp() * 1000)
    return RefreshState(None, start_ms, tuple(sources))
