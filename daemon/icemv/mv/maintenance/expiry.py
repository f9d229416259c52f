"""Storage snapshot expiry with pyiceberg (no Spark), and the files only expired ones used.

Every refresh commits one storage snapshot; without expiry the table metadata, and with
it pyiceberg's commit time, grows without bound. What must survive:

* the latest refresh record and every snapshot after it (freshness reads the record;
  compaction adds `replace` snapshots after it);
* the newest `keep_snapshots` refresh records (`icemv mv show` lists them as history),
  and anything younger than `keep_seconds`;
* every storage snapshot a reading MV (an MV over this MV) recorded, and the main-branch
  snapshots after it: its next incremental refresh reads the changes since then;
* branch and tag heads (pyiceberg never expires those).

pyiceberg 0.12's `expire_snapshots()` only edits metadata, so the files reachable from
expired snapshots and from no kept one are deleted here, after the commit succeeded.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass

import structlog
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot, ancestors_of

from icemv.format.refresh_state import REFRESH_STATE_KEY, TRINO_DEPENDS_KEY

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Retention:
    keep_snapshots: int = 10
    keep_seconds: float = 0.0


@dataclass(frozen=True)
class ExpiryResult:
    expired_snapshots: int
    deleted_files: int


def _is_record(snapshot: Snapshot) -> bool:
    summary = snapshot.summary.additional_properties if snapshot.summary else {}
    return REFRESH_STATE_KEY in summary or TRINO_DEPENDS_KEY in summary


def snapshots_to_keep(
    metadata: TableMetadata, retention: Retention, now_ms: int, needed: Collection[int] = ()
) -> set[int]:
    """The snapshot ids the retention rules keep (see the module docstring)."""
    keep = {ref.snapshot_id for ref in metadata.refs.values()}
    young_from = now_ms - int(retention.keep_seconds * 1000)
    keep |= {s.snapshot_id for s in metadata.snapshots if s.timestamp_ms >= young_from}
    main = list(ancestors_of(metadata.current_snapshot(), metadata))
    oldest_needed = max((i for i, s in enumerate(main) if s.snapshot_id in needed), default=-1)
    records = 0
    for position, snapshot in enumerate(main):
        if records < retention.keep_snapshots or position <= oldest_needed:
            keep.add(snapshot.snapshot_id)
        if _is_record(snapshot):
            records += 1
    return keep


def expire_storage(
    table: Table,
    retention: Retention,
    needed: Collection[int] = (),
    now_ms: int | None = None,
) -> ExpiryResult:
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    metadata = table.metadata
    keep = snapshots_to_keep(metadata, retention, now_ms, needed)
    expired = [s for s in metadata.snapshots if s.snapshot_id not in keep]
    if not expired:
        return ExpiryResult(0, 0)
    kept = [s for s in metadata.snapshots if s.snapshot_id in keep]
    table.maintenance.expire_snapshots().by_ids([s.snapshot_id for s in expired]).commit()
    # Only after the commit: until then a reader may still open the expired snapshots.
    garbage = _files(table.io, expired, live_only=False) - _files(table.io, kept, live_only=True)
    deleted = _delete(table.io, garbage)
    log.info(
        "storage_snapshots_expired",
        table=".".join(table.name()),
        expired=len(expired),
        kept=len(kept),
        deleted_files=deleted,
    )
    return ExpiryResult(len(expired), deleted)


def reachable_files(table: Table) -> set[str]:
    """Every file a snapshot still in the metadata needs, plus the metadata files."""
    files = _files(table.io, table.metadata.snapshots, live_only=True)
    files.add(table.metadata_location)
    files |= {entry.metadata_file for entry in table.metadata.metadata_log}
    files |= {stats.statistics_path for stats in table.metadata.statistics}
    files |= {stats.statistics_path for stats in table.metadata.partition_statistics}
    return files


def _files(io: FileIO, snapshots: Iterable[Snapshot], live_only: bool) -> set[str]:
    files: set[str] = set()
    seen_manifests: set[str] = set()
    for snapshot in snapshots:
        files.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            if manifest.manifest_path in seen_manifests:
                continue
            seen_manifests.add(manifest.manifest_path)
            files.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                if live_only and entry.status == ManifestEntryStatus.DELETED:
                    continue
                files.add(entry.data_file.file_path)
    return files


def _delete(io: FileIO, paths: Iterable[str]) -> int:
    deleted = 0
    for path in sorted(paths):
        try:
            io.delete(path)
            deleted += 1
        except FileNotFoundError:
            continue
        except Exception as exc:  # noqa: BLE001 (an undeletable file is garbage, not an error)
            log.warning("file_delete_failed", path=path, error=f"{type(exc).__name__}: {exc}")
    return deleted
