"""`icemv mv compact`: compact the storage table's data files, then a full upkeep pass.

Freshness is read from the latest snapshot that carries a refresh record; compaction adds
a `replace` snapshot after it, which expiry keeps along with that record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlglot import exp

from icemv.config import MaintenanceConfig
from icemv.lakehouse import Lakehouse
from icemv.mv.maintenance.upkeep import maintain_storage
from icemv.mv.model import MaterializedView, list_materialized_views


@dataclass(frozen=True)
class CompactionResult:
    rewritten_files: int
    added_files: int
    snapshots_before: int
    snapshots_after: int
    branches_removed: tuple[str, ...] = ()
    files_deleted: int = 0


def rewrite_call(catalog: str, table: str) -> str:
    """`CALL <catalog>.system.rewrite_data_files(...)` with the names as quoted literals."""
    options = exp.Anonymous(
        this="map",
        expressions=[
            exp.Literal.string("min-input-files"),
            exp.Literal.string("2"),
            exp.Literal.string("remove-dangling-deletes"),
            exp.Literal.string("true"),
        ],
    )
    call = exp.Anonymous(
        this="rewrite_data_files",
        expressions=[
            exp.Kwarg(this=exp.var("table"), expression=exp.Literal.string(table)),
            exp.Kwarg(this=exp.var("options"), expression=options),
        ],
    )
    procedure = exp.Dot(
        this=exp.Dot(this=exp.to_identifier(catalog, quoted=True), expression=exp.var("system")),
        expression=call,
    )
    return "CALL " + procedure.sql(dialect="spark")


def compact_storage(
    lakehouse: Lakehouse,
    mv: MaterializedView,
    config: MaintenanceConfig | None = None,
    readers: Iterable[MaterializedView] | None = None,
) -> CompactionResult:
    """`readers`: MVs that may read this one (default: every MV in the catalog)."""
    config = config or lakehouse.config.maintenance
    if readers is None:
        readers = [m for m in list_materialized_views(lakehouse) if m.identifier != mv.identifier]
    before = len(lakehouse.load_table(mv.storage).snapshots())
    rewrite = lakehouse.spark.sql(rewrite_call(lakehouse.catalog_name, mv.storage.quoted())).first()
    upkeep = maintain_storage(lakehouse, mv, config, readers)
    return CompactionResult(
        rewritten_files=int(rewrite[0]) if rewrite else 0,
        added_files=int(rewrite[1]) if rewrite else 0,
        snapshots_before=before,
        snapshots_after=upkeep.snapshots_after,
        branches_removed=upkeep.branches_removed,
        files_deleted=upkeep.files_deleted,
    )
