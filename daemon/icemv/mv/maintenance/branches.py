"""Leftover private refresh branches (`icemv_*`): find them, and remove them safely.

A refresh on the Spark write path writes on a private branch and publishes it in one
catalog commit that also removes the branch. A refresh killed in between leaves the
branch behind, and a branch head pins its snapshot, manifests and data files against
expiry, forever.

Removing a branch a live refresh (in another process) still uses never breaks
correctness: its publish asserts that main is still where it planned from, and a write
to a missing branch starts from main, so at worst that refresh fails and re-plans. Still,
only branches old enough to be leftovers are removed:

* a branch whose head is a snapshot of its own (written, not published) is a leftover
  once that snapshot is older than the minimum age: a live refresh publishes within
  moments of its write;
* a branch whose head is still a main snapshot (killed before or during its write) is a
  leftover if it already existed at `now - min_age`, which the table's metadata log
  tells: the metadata file current at that moment lists the branch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import ancestors_of

from icemv.format.summary import PRIVATE_BRANCH_PREFIX

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class LeftoverBranch:
    name: str
    head_snapshot_id: int
    written: bool  # the head is a snapshot of the branch's own, not one of main's


def private_branches(table: Table) -> list[LeftoverBranch]:
    """Every `icemv_*` branch of the table, old or new."""
    if not any(name.startswith(PRIVATE_BRANCH_PREFIX) for name in table.metadata.refs):
        return []  # the common case, without walking main's history
    main = {s.snapshot_id for s in ancestors_of(table.current_snapshot(), table.metadata)}
    return [
        LeftoverBranch(name, ref.snapshot_id, ref.snapshot_id not in main)
        for name, ref in sorted(table.metadata.refs.items())
        if name.startswith(PRIVATE_BRANCH_PREFIX)
        and ref.snapshot_ref_type == SnapshotRefType.BRANCH
    ]


def is_leftover(table: Table, branch: LeftoverBranch, min_age_seconds: float, now_ms: int) -> bool:
    cutoff_ms = now_ms - int(min_age_seconds * 1000)
    if min_age_seconds <= 0:
        return True
    if branch.written:
        head = table.metadata.snapshot_by_id(branch.head_snapshot_id)
        if head is not None and head.timestamp_ms <= cutoff_ms:
            return True
    # The metadata file that was current at the cutoff: did the branch exist already?
    if table.metadata.last_updated_ms <= cutoff_ms:
        return True  # the current metadata has it, and was written before the cutoff
    earlier = [e for e in table.metadata.metadata_log if e.timestamp_ms <= cutoff_ms]
    if not earlier:
        return False
    entry = max(earlier, key=lambda e: e.timestamp_ms)
    try:
        old = FromInputFile.table_metadata(table.io.new_input(entry.metadata_file))
    except Exception as exc:  # noqa: BLE001 (metadata gone: cannot prove the age, keep it)
        log.debug("branch_age_unknown", branch=branch.name, error=str(exc))
        return False
    return branch.name in old.refs


def remove_leftover_branches(
    table: Table, min_age_seconds: float, now_ms: int | None = None
) -> list[str]:
    """Remove the table's leftover `icemv_*` branches in one commit; their names.

    A concurrent commit makes this one fail: nothing is removed, and the next run
    (refresh, compaction, daemon pass) tries again.
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    leftovers = [
        b.name for b in private_branches(table) if is_leftover(table, b, min_age_seconds, now_ms)
    ]
    if not leftovers:
        return []
    try:
        with table.manage_snapshots() as snapshots:
            for name in leftovers:
                snapshots.remove_branch(name)
    except CommitFailedException as exc:
        log.info("leftover_branches_kept", table=str(table.name()), error=str(exc))
        return []
    log.info("leftover_branches_removed", table=".".join(table.name()), branches=leftovers)
    return leftovers
