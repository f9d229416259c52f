"""Create, replace, drop and reconcile materialized views.

Order matters for readers: the storage table exists before the view points at it, and a
replaced definition whose output schema changed gets a new storage table that the view
switches to in one compare-and-swap, so no reader ever sees a view without storage.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.model import (
    MaterializedView,
    list_materialized_views,
    load_materialized_view,
    validate_properties,
)
from icemv.spec.partitioning import PartitionField, check_source_type, parse_partition_field
from icemv.spec.view_metadata import new_view_metadata
from icemv.sql.parse import duplicate_names, parse_query, unnamed_output_columns
from icemv.sql.pinning import pin_sources

log = structlog.get_logger(__name__)

MANAGED_BY_PROPERTY = "icemv.managed-by"
STORAGE_TABLE_PROPERTIES = {
    "format-version": "2",
    # Refreshes MERGE deltas into storage; merge-on-read makes that much cheaper.
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


@dataclass(frozen=True)
class ValidatedQuery:
    sql: str
    arrow_schema: pa.Schema


def validate_query(lakehouse: Lakehouse, sql: str, namespace: tuple[str, ...]) -> ValidatedQuery:
    """Parse, resolve every source, and derive the output schema (Spark analysis, no execution)."""
    _check_query_start(sql)
    query = parse_query(sql)
    unnamed = unnamed_output_columns(query)
    if unnamed:
        raise ViewSqlError(
            "every output column needs a name; add AS <name> to: " + ", ".join(unnamed)
        )
    pinned = pin_sources(CatalogReads(lakehouse), sql, namespace)
    try:
        schema = lakehouse.spark.sql(pinned.sql).schema
    except Exception as exc:  # Spark's AnalysisException and friends
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ViewSqlError(f"Spark cannot analyse the query: {first_line}") from None
    duplicates = duplicate_names(schema.fieldNames())
    if duplicates:
        raise ViewSqlError(
            "output column names must be unique; duplicated: " + ", ".join(duplicates)
        )
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        arrow = to_arrow_schema(schema)
    except TypeError as exc:
        raise ViewSqlError(f"unsupported output column type: {exc}") from None
    # Storage columns are nullable: a later source change may make any of them null.
    arrow = pa.schema([field.with_nullable(True) for field in arrow])
    return ValidatedQuery(sql=sql, arrow_schema=arrow)


_QUERY_STARTS = {"SELECT", "WITH", "VALUES", "FROM", "L_PAREN", "TABLE"}


def _check_query_start(sql: str) -> None:
    """A typo in the first keyword (`SELEC x`) parses as some other expression; name it."""
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import TokenError

    try:
        tokens = Dialect.get_or_raise("spark").tokenize(sql)
    except TokenError:
        return  # the parser reports it with its position
    if tokens and tokens[0].token_type.name not in _QUERY_STARTS:
        raise ViewSqlError(
            f"a view must be a query starting with SELECT, WITH, VALUES or FROM; "
            f"this one starts with {tokens[0].text!r}"
        )


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
    _check_partitioning(validated.arrow_schema, partition_fields)
    new_namespace = not _namespace_exists(lakehouse, identifier.namespace)
    storage: Table | None = None
    try:
        ensure_namespace(lakehouse.catalog, identifier.namespace)
        storage = _create_storage_table(
            lakehouse, storage_id, validated.arrow_schema, partition_fields
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
    except Exception as exc:
        log.warning("mv_create_undo_failed", mv=str(identifier), error=type(exc).__name__)


def _check_partitioning(schema: pa.Schema, fields: Sequence[PartitionField]) -> None:
    """Each partition column is an output column of a type its transform supports."""
    from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids

    iceberg = _pyarrow_to_schema_without_ids(schema)
    types = {field.name: field.field_type for field in iceberg.fields}
    for field in fields:
        if field.source_column not in types:
            raise ViewSqlError(f"partition column {field.source_column!r} is not an output column")
        check_source_type(field, types[field.source_column])


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
    if not _same_columns(storage, validated.arrow_schema):
        version = mv.view.metadata.current_version_id + 1
        storage_id = Identifier(identifier.namespace, f"{identifier.name}__storage_v{version}")
        spec_fields = [_field_of(storage, f) for f in storage.spec().fields]
        fields = [parse_partition_field(text) for text in spec_fields if text]
        storage = _create_storage_table(lakehouse, storage_id, validated.arrow_schema, fields)
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
    schema: dict[str, Any] = json.loads(table.schema().model_dump_json(by_alias=True))
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
