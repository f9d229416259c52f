"""Create, replace, drop and reconcile materialized views.

Order matters for readers: the storage table exists before the view points at it, and a
replaced definition whose output schema changed gets a new storage table that the view
switches to in one compare-and-swap, so no reader ever sees a view without storage.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa
import structlog
from pyiceberg.exceptions import NamespaceNotEmptyError, NoSuchNamespaceError, NoSuchTableError
from pyiceberg.table import Table

from icemv.catalog.namespaces import ensure_namespace
from icemv.config import MaterializedViewSpec
from icemv.errors import (
    InvalidIdentifierError,
    MaterializedViewExistsError,
    ViewAlreadyExistsError,
    ViewSqlError,
)
from icemv.format.partitioning import parse_partition_field
from icemv.format.view_metadata import new_view_metadata
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.layout import StorageLayout
from icemv.mv.model import (
    MaterializedView,
    list_materialized_views,
    load_materialized_view,
    validate_properties,
)
from icemv.mv.validation import check_partitioning, validate_query

log = structlog.get_logger(__name__)

MANAGED_BY_PROPERTY = "icemv.managed-by"
STORAGE_TABLE_PROPERTIES = {
    "format-version": "2",
    # Refreshes MERGE deltas into storage; merge-on-read makes that much cheaper.
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


def create_mv(
    lakehouse: Lakehouse,
    identifier: Identifier,
    sql: str,
    properties: Mapping[str, str] | None = None,
    partition_by: Sequence[str] = (),
) -> MaterializedView:
    """Validates everything first, then writes; a failure after the first write undoes it.

    So a refused or failed create leaves no namespace, storage table or view behind.
    """
    if len(identifier.namespace) != 1:
        raise InvalidIdentifierError(
            f"{identifier}: nested namespaces are not supported; "
            "name a materialized view namespace.name"
        )
    validate_properties(properties or {})
    partition_fields = [parse_partition_field(text) for text in partition_by]
    if lakehouse.views.exists(identifier) or lakehouse.table_exists(identifier):
        raise MaterializedViewExistsError(f"{identifier} already exists")
    storage_id = identifier.storage_default()
    if lakehouse.table_exists(storage_id) or lakehouse.views.exists(storage_id):
        raise MaterializedViewExistsError(f"storage table name {storage_id} is taken")
    validated = validate_query(lakehouse, sql, identifier.namespace)
    check_partitioning(validated.arrow_schema, partition_fields)
    new_namespace = not _namespace_exists(lakehouse, identifier.namespace)
    storage: Table | None = None
    try:
        ensure_namespace(lakehouse.catalog, identifier.namespace)
        storage = _create_storage_table(
            lakehouse, storage_id, validated.storage_schema, partition_fields
        )
        metadata = new_view_metadata(
            location=f"{lakehouse.config.warehouse_uri}/{identifier.namespace_str}/{identifier.name}",
            sql=sql,
            schema=_schema_json(storage),
            storage_table=storage_id,
            default_namespace=identifier.namespace,
            default_catalog=lakehouse.catalog_name,
            properties=dict(properties or {}),
        )
        try:
            view = lakehouse.views.create(identifier, metadata)
        except ViewAlreadyExistsError:
            raise MaterializedViewExistsError(f"{identifier} already exists") from None
    except BaseException:
        _undo_create(
            lakehouse, storage_id if storage is not None else None, identifier, new_namespace
        )
        raise
    log.info("mv_created", mv=str(identifier), storage=str(storage_id))
    return MaterializedView(view)


def _namespace_exists(lakehouse: Lakehouse, namespace: tuple[str, ...]) -> bool:
    try:
        lakehouse.catalog.load_namespace_properties(namespace)
    except NoSuchNamespaceError:
        return False
    return True


def _undo_create(
    lakehouse: Lakehouse,
    storage_id: Identifier | None,
    identifier: Identifier,
    drop_namespace: bool,
) -> None:
    """Best effort: the original error is what the caller must see."""
    try:
        if storage_id is not None:
            with contextlib.suppress(NoSuchTableError):
                lakehouse.catalog.purge_table(storage_id.as_tuple())
        if drop_namespace:
            with contextlib.suppress(NoSuchNamespaceError, NamespaceNotEmptyError):
                lakehouse.catalog.drop_namespace(identifier.namespace)
    except Exception as exc:  # noqa: BLE001 (best effort: the original error wins)
        log.warning("mv_create_undo_failed", mv=str(identifier), error=type(exc).__name__)


def replace_mv(
    lakehouse: Lakehouse,
    identifier: Identifier,
    sql: str,
    properties: Mapping[str, str] | None = None,
) -> MaterializedView:
    """A new view version; the MV is invalid until refreshed."""
    validate_properties(properties or {})
    mv = load_materialized_view(lakehouse, identifier)
    validated = validate_query(lakehouse, sql, identifier.namespace)
    storage = lakehouse.load_table(mv.storage)
    storage_id = mv.storage
    old_storage: Identifier | None = None
    if not _same_columns(storage, validated.storage_schema):
        version = mv.view.metadata.current_version_id + 1
        storage_id = Identifier(identifier.namespace, f"{identifier.name}__storage_v{version}")
        spec_fields = [_field_of(storage, f) for f in storage.spec().fields]
        fields = [parse_partition_field(text) for text in spec_fields if text]
        storage = _create_storage_table(lakehouse, storage_id, validated.storage_schema, fields)
        old_storage = mv.storage
    metadata = mv.view.metadata.with_new_version(
        sql=sql,
        schema=_schema_json(storage),
        storage_table=storage_id,
        default_namespace=identifier.namespace,
        default_catalog=lakehouse.catalog_name,
        properties={**mv.properties, **(properties or {})},
    )
    try:
        view = lakehouse.views.replace(mv.view, metadata)
    except Exception:
        if old_storage is not None:
            lakehouse.catalog.purge_table(storage_id.as_tuple())
        raise
    if old_storage is not None:
        lakehouse.catalog.purge_table(old_storage.as_tuple())
    log.info("mv_replaced", mv=str(identifier), version=metadata.current_version_id)
    return MaterializedView(view)


def drop_mv(lakehouse: Lakehouse, identifier: Identifier) -> None:
    mv = load_materialized_view(lakehouse, identifier)
    lakehouse.views.drop(identifier)
    with contextlib.suppress(NoSuchTableError):
        lakehouse.catalog.purge_table(mv.storage.as_tuple())
    log.info("mv_dropped", mv=str(identifier))


ApplyAction = Literal["created", "replaced", "unchanged", "dropped"]


def apply_declared(
    lakehouse: Lakehouse, specs: Sequence[MaterializedViewSpec], prune: bool = False
) -> dict[str, ApplyAction]:
    """Make the catalog match the declared MVs; prune only MVs that config created."""
    actions: dict[str, ApplyAction] = {}
    declared = set()
    for spec in specs:
        identifier = lakehouse.identifier(spec.name)
        declared.add(identifier)
        properties = {**spec.properties, MANAGED_BY_PROPERTY: "config"}
        if not lakehouse.views.exists(identifier):
            create_mv(lakehouse, identifier, spec.sql, properties, spec.partition_by)
            actions[identifier.dotted] = "created"
            continue
        mv = load_materialized_view(lakehouse, identifier)
        if _normalized(mv.sql) != _normalized(spec.sql) or mv.properties != {
            **mv.properties,
            **properties,
        }:
            replace_mv(lakehouse, identifier, spec.sql, properties)
            actions[identifier.dotted] = "replaced"
        else:
            actions[identifier.dotted] = "unchanged"
    if prune:
        for mv in list_materialized_views(lakehouse):
            if mv.identifier not in declared and mv.properties.get(MANAGED_BY_PROPERTY) == "config":
                drop_mv(lakehouse, mv.identifier)
                actions[mv.identifier.dotted] = "dropped"
    return actions


def _normalized(sql: str) -> str:
    return " ".join(sql.split())


def _create_storage_table(
    lakehouse: Lakehouse, storage_id: Identifier, schema: pa.Schema, fields: Sequence[Any]
) -> Table:
    names = set(schema.names)
    for field in fields:
        if field.source_column not in names:
            raise ViewSqlError(f"partition column {field.source_column!r} is not an output column")
    transaction = lakehouse.catalog.create_table_transaction(
        storage_id.as_tuple(), schema=schema, properties=STORAGE_TABLE_PROPERTIES
    )
    if fields:
        with transaction.update_spec() as spec:
            for field in fields:
                spec.add_field(field.source_column, field.transform, field.name)
    transaction.commit_transaction()
    return lakehouse.load_table(storage_id)


def _schema_json(table: Table) -> dict[str, Any]:
    """The view's schema: the storage table's view columns (its state columns aside)."""
    view_columns = StorageLayout.of(table).view_columns
    view_schema = table.schema().select(*view_columns, case_sensitive=True)
    schema: dict[str, Any] = json.loads(view_schema.model_dump_json(by_alias=True))
    return schema


def _same_columns(table: Table, schema: pa.Schema) -> bool:
    """Same names and Iceberg types, in order (arrow-level details such as large_string aside)."""
    from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids

    wanted = _pyarrow_to_schema_without_ids(schema)
    have = table.schema()
    return [(f.name, str(f.field_type)) for f in have.fields] == [
        (f.name, str(f.field_type)) for f in wanted.fields
    ]


def _field_of(table: Table, partition_field: Any) -> str | None:
    column = table.schema().find_column_name(partition_field.source_id)
    transform = str(partition_field.transform)
    if transform == "identity":
        return column
    if transform in ("year", "month", "day", "hour"):
        return f"{transform}s({column})"
    if transform.startswith(("bucket[", "truncate[")):
        name, width = transform.rstrip("]").split("[")
        return f"{name}({width}, {column})"
    return None
