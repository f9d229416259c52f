"""One maintenance pass over an MV's storage table, pyiceberg only (fit for the daemon loop).

Order matters: leftover branches first (their heads pin snapshots), then expiry (which
deletes what only expired snapshots used), then the sweep of files nothing references.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyiceberg.exceptions import CommitFailedException, NoSuchTableError

from icemv.config import MaintenanceConfig
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.history import latest_refresh
from icemv.mv.maintenance.branches import remove_leftover_branches
from icemv.mv.maintenance.expiry import Retention, expire_storage
from icemv.mv.maintenance.orphans import remove_orphan_files
from icemv.mv.model import MaterializedView


@dataclass(frozen=True)
class UpkeepResult:
    branches_removed: tuple[str, ...]
    snapshots_before: int
    snapshots_after: int
    files_deleted: int


def needed_by_readers(
    lakehouse: Lakehouse, storage: Identifier, readers: Iterable[MaterializedView]
) -> set[int]:
    """Snapshots of `storage` that MVs reading it recorded: their next delta starts there."""
    needed = set()
    for reader in readers:
        try:
            record = latest_refresh(lakehouse.load_table(reader.storage))
        except NoSuchTableError:
            continue
        if record is None:
            continue
        needed |= {
            s.snapshot_id
            for s in record.state.tables()
            if s.snapshot_id is not None and Identifier(s.namespace, s.name) == storage
        }
    return needed


def maintain_storage(
    lakehouse: Lakehouse,
    mv: MaterializedView,
    config: MaintenanceConfig,
    readers: Iterable[MaterializedView] = (),
) -> UpkeepResult:
    table = lakehouse.load_table(mv.storage)
    before = len(table.metadata.snapshots)
    branches = remove_leftover_branches(table, config.branch_min_age_seconds)
    table = table.refresh()
    retention = Retention(config.keep_snapshots, config.keep_seconds)
    needed = needed_by_readers(lakehouse, mv.storage, readers)
    try:
        expiry = expire_storage(table, retention, needed)
    except CommitFailedException:
        expiry = None  # a refresh committed meanwhile: the next pass expires
    table = table.refresh()
    orphans = remove_orphan_files(table, config.orphan_file_age_seconds)
    return UpkeepResult(
        branches_removed=tuple(branches),
        snapshots_before=before,
        snapshots_after=len(table.metadata.snapshots),
        files_deleted=(expiry.deleted_files if expiry else 0) + orphans,
    )
