"""Iceberg view metadata (view spec v1) with the MV's `storage-table` field, and its codec.

pyiceberg's view model drops `storage-table`, and other engines add fields we do not know:
every object keeps the JSON keys it does not model in `extra` and writes them back unchanged.

REST catalog servers built on Iceberg's handlers drop `storage-table` too, so writers also
put the pointer in the view property `icemv.storage-table` (the same JSON object as a
string), and the decoder falls back to that property for the current version.
"""

from __future__ import annotations

import gzip
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from icemv.errors import ViewMetadataError
from icemv.identifiers import Identifier

STORAGE_TABLE_PROPERTY = "icemv.storage-table"


@dataclass(frozen=True)
class SqlRepresentation:
    sql: str
    dialect: str
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ViewVersion:
    version_id: int
    timestamp_ms: int
    schema_id: int
    summary: Mapping[str, str]
    representations: tuple[SqlRepresentation, ...]
    default_namespace: tuple[str, ...]
    default_catalog: str | None = None
    storage_table: Identifier | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def sql_for(self, dialect: str = "spark") -> str | None:
        for representation in self.representations:
            if representation.dialect.lower() == dialect:
                return representation.sql
        return None


@dataclass(frozen=True)
class ViewMetadata:
    view_uuid: str
    location: str
    current_version_id: int
    versions: tuple[ViewVersion, ...]
    version_log: tuple[tuple[int, int], ...]  # (timestamp-ms, version-id)
    schemas: tuple[Mapping[str, Any], ...]  # Iceberg schema JSON, as written
    properties: Mapping[str, str] = field(default_factory=dict)
    format_version: int = 1
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def current_version(self) -> ViewVersion:
        for version in self.versions:
            if version.version_id == self.current_version_id:
                return version
        raise ViewMetadataError(f"current version {self.current_version_id} is missing")

    @property
    def is_materialized(self) -> bool:
        return self.current_version.storage_table is not None

    def schema(self, schema_id: int) -> Mapping[str, Any]:
        for schema in self.schemas:
            if schema.get("schema-id") == schema_id:
                return schema
        raise ViewMetadataError(f"schema {schema_id} is missing")

    def with_new_version(
        self,
        sql: str,
        schema: Mapping[str, Any],
        storage_table: Identifier | None,
        default_namespace: tuple[str, ...],
        default_catalog: str | None,
        properties: Mapping[str, str] | None = None,
        summary: Mapping[str, str] | None = None,
    ) -> ViewMetadata:
        """A copy whose current version is a new one (replace): ids grow, history is kept."""
        now = _now_ms()
        version_id = max(v.version_id for v in self.versions) + 1
        schema_id = max(int(s.get("schema-id", 0)) for s in self.schemas) + 1
        version = ViewVersion(
            version_id=version_id,
            timestamp_ms=now,
            schema_id=schema_id,
            summary=dict(summary or {"engine-name": "icemv"}),
            representations=(SqlRepresentation(sql=sql, dialect="spark"),),
            default_namespace=default_namespace,
            default_catalog=default_catalog,
            storage_table=storage_table,
        )
        return replace(
            self,
            current_version_id=version_id,
            versions=(*self.versions, version),
            version_log=(*self.version_log, (now, version_id)),
            schemas=(*self.schemas, {**schema, "schema-id": schema_id}),
            properties=with_storage_property(
                properties if properties is not None else self.properties, storage_table
            ),
        )


def new_view_metadata(
    location: str,
    sql: str,
    schema: Mapping[str, Any],
    storage_table: Identifier | None,
    default_namespace: tuple[str, ...],
    default_catalog: str | None,
    properties: Mapping[str, str],
) -> ViewMetadata:
    now = _now_ms()
    version = ViewVersion(
        version_id=1,
        timestamp_ms=now,
        schema_id=0,
        summary={"engine-name": "icemv"},
        representations=(SqlRepresentation(sql=sql, dialect="spark"),),
        default_namespace=default_namespace,
        default_catalog=default_catalog,
        storage_table=storage_table,
    )
    return ViewMetadata(
        view_uuid=str(uuid.uuid4()),
        location=location,
        current_version_id=1,
        versions=(version,),
        version_log=((now, 1),),
        schemas=({**schema, "schema-id": 0},),
        properties=with_storage_property(properties, storage_table),
    )


def with_storage_property(
    properties: Mapping[str, str], storage_table: Identifier | None
) -> dict[str, str]:
    """`properties` with `icemv.storage-table` set to `storage_table` (removed when None)."""
    updated = {k: v for k, v in properties.items() if k != STORAGE_TABLE_PROPERTY}
    if storage_table is not None:
        updated[STORAGE_TABLE_PROPERTY] = json.dumps(
            _storage_json(storage_table), separators=(",", ":")
        )
    return updated


def storage_from_property(properties: Mapping[str, str]) -> Identifier | None:
    """The pointer kept in the view property, or None when absent or unreadable."""
    text = properties.get(STORAGE_TABLE_PROPERTY)
    if text is None:
        return None
    try:
        raw = json.loads(text)
        namespace, name = raw["namespace"], raw["name"]
    except (json.JSONDecodeError, TypeError, KeyError):
        return None
    if not (isinstance(name, str) and isinstance(namespace, list)):
        return None
    if not all(isinstance(part, str) for part in namespace):
        return None
    return Identifier(tuple(namespace), name)


def _storage_json(storage_table: Identifier) -> dict[str, Any]:
    return {"namespace": list(storage_table.namespace), "name": storage_table.name}


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---- codec -------------------------------------------------------------------------------

_METADATA_KEYS = {
    "view-uuid",
    "format-version",
    "location",
    "current-version-id",
    "versions",
    "version-log",
    "schemas",
    "properties",
}
_VERSION_KEYS = {
    "version-id",
    "timestamp-ms",
    "schema-id",
    "summary",
    "representations",
    "default-namespace",
    "default-catalog",
    "storage-table",
}


def decode_view_metadata(data: bytes) -> ViewMetadata:
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        raw = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ViewMetadataError(f"unreadable view metadata: {exc!r}") from exc
    return view_metadata_from_json(raw)


def view_metadata_from_json(raw: Any) -> ViewMetadata:
    """Metadata from its parsed JSON (a REST response carries it inline)."""
    try:
        metadata = ViewMetadata(
            view_uuid=raw["view-uuid"],
            format_version=raw["format-version"],
            location=raw["location"],
            current_version_id=raw["current-version-id"],
            versions=tuple(_decode_version(v) for v in raw["versions"]),
            version_log=tuple((e["timestamp-ms"], e["version-id"]) for e in raw["version-log"]),
            schemas=tuple(raw["schemas"]),
            properties=raw.get("properties", {}),
            extra={k: v for k, v in raw.items() if k not in _METADATA_KEYS},
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ViewMetadataError(f"unreadable view metadata: {exc!r}") from exc
    return _storage_from_property_if_dropped(metadata)


def _storage_from_property_if_dropped(metadata: ViewMetadata) -> ViewMetadata:
    """Fill the current version's pointer from the property when a catalog dropped the field."""
    current = metadata.current_version
    if current.storage_table is not None:
        return metadata
    storage = storage_from_property(metadata.properties)
    if storage is None:
        return metadata
    versions = tuple(
        replace(v, storage_table=storage) if v.version_id == current.version_id else v
        for v in metadata.versions
    )
    return replace(metadata, versions=versions)


def _decode_version(raw: Mapping[str, Any]) -> ViewVersion:
    storage = raw.get("storage-table")
    return ViewVersion(
        version_id=raw["version-id"],
        timestamp_ms=raw["timestamp-ms"],
        schema_id=raw["schema-id"],
        summary=raw.get("summary", {}),
        representations=tuple(
            SqlRepresentation(
                sql=r["sql"],
                dialect=r["dialect"],
                extra={k: v for k, v in r.items() if k not in ("type", "sql", "dialect")},
            )
            for r in raw["representations"]
            if r.get("type") == "sql"
        ),
        default_namespace=tuple(raw.get("default-namespace", [])),
        default_catalog=raw.get("default-catalog"),
        storage_table=(
            Identifier(tuple(storage["namespace"]), storage["name"]) if storage else None
        ),
        extra={k: v for k, v in raw.items() if k not in _VERSION_KEYS},
    )


def encode_view_metadata(metadata: ViewMetadata) -> bytes:
    raw: dict[str, Any] = {
        "view-uuid": metadata.view_uuid,
        "format-version": metadata.format_version,
        "location": metadata.location,
        "properties": dict(metadata.properties),
        "schemas": [dict(s) for s in metadata.schemas],
        "current-version-id": metadata.current_version_id,
        "versions": [_encode_version(v) for v in metadata.versions],
        "version-log": [
            {"timestamp-ms": ts, "version-id": vid} for ts, vid in metadata.version_log
        ],
        **metadata.extra,
    }
    return json.dumps(raw, indent=2).encode()


def encode_view_version(version: ViewVersion) -> dict[str, Any]:
    """One version's JSON, as a REST create or add-view-version request carries it."""
    return _encode_version(version)


def _encode_version(version: ViewVersion) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "version-id": version.version_id,
        "timestamp-ms": version.timestamp_ms,
        "schema-id": version.schema_id,
        "summary": dict(version.summary),
        "default-namespace": list(version.default_namespace),
        "representations": [
            {"type": "sql", "sql": r.sql, "dialect": r.dialect, **r.extra}
            for r in version.representations
        ],
    }
    if version.default_catalog is not None:
        raw["default-catalog"] = version.default_catalog
    if version.storage_table is not None:
        raw["storage-table"] = _storage_json(version.storage_table)
    raw.update(version.extra)
    return raw
