"""View metadata for tests that put views straight into a catalog (no Spark needed)."""

from __future__ import annotations

from typing import Any

from icemv.format.view_metadata import new_view_metadata
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse

ONE_LONG = {"type": "struct", "fields": [{"id": 1, "name": "v", "type": "long", "required": False}]}


def long_view_metadata(
    lakehouse: Lakehouse, name: str, sql: str, storage: Identifier | None
) -> Any:
    """A view of one BIGINT column `v` in namespace `nyc`, an MV when `storage` is given."""
    return new_view_metadata(
        location=f"{lakehouse.config.warehouse_uri}/nyc/{name}",
        sql=sql,
        schema=ONE_LONG,
        storage_table=storage,
        default_namespace=("nyc",),
        default_catalog="lake",
        properties={},
    )
