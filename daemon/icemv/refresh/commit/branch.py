"""Publish a Spark write to the storage table through a private branch.

A Spark SQL write (MERGE, append) cannot assert where main is when it commits, so it
writes a branch forked at the planned snapshot; one catalog commit then moves main to the
branch head only if main is still at the planned snapshot.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog
from pyiceberg.exceptions import CommitFailedException

from icemv.errors import StorageCommitConflictError
from icemv.format.summary import PRIVATE_BRANCH_PREFIX
from icemv.identifiers import Identifier, quote_part

if TYPE_CHECKING:
    from icemv.lakehouse import Lakehouse

log = structlog.get_logger(__name__)


def commit_via_branch(
    lakehouse: Lakehouse,
    storage: Identifier,
    planned_from: int,
    write: Callable[[str], None],
) -> None:
    """Write on a private branch from `planned_from`, then move main to it if still there.

    The publish is one catalog commit (main := branch head, branch removed) that asserts
    main is still at `planned_from`: a refresh planned from an older storage state can
    never land, so a delta is applied exactly once even with several daemons. Branch
    bookkeeping goes through pyiceberg: a metadata commit there costs far less than a
    Spark SQL statement.
    """
    branch = f"{PRIVATE_BRANCH_PREFIX}{uuid.uuid4().hex[:16]}"
    with lakehouse.load_table(storage).manage_snapshots() as snapshots:
        snapshots.create_branch(planned_from, branch)
    published = False
    try:
        write(f"{lakehouse.quoted(storage)}.{quote_part('branch_' + branch)}")
        table = lakehouse.load_table(storage)
        main = table.metadata.refs.get("main")
        if main is None or main.snapshot_id != planned_from:
            raise StorageCommitConflictError(f"{storage} moved since {planned_from}")
        try:
            with table.manage_snapshots() as snapshots:
                snapshots.set_current_snapshot(ref_name=branch)
                snapshots.remove_branch(branch)
        except CommitFailedException as exc:
            raise StorageCommitConflictError(f"{storage} moved since {planned_from}") from exc
        published = True
    finally:
        if not published:
            drop_branch(lakehouse, storage, branch)


def drop_branch(lakehouse: Lakehouse, storage: Identifier, branch: str) -> None:
    """Remove a leftover private branch, best effort."""
    try:
        table = lakehouse.load_table(storage)
        if branch in table.metadata.refs:
            with table.manage_snapshots() as snapshots:
                snapshots.remove_branch(branch)
    # Best effort: a leftover private branch is harmless, and this runs in a
    # `finally` where raising would mask the error that made the publish fail.
    except Exception as exc:  # noqa: BLE001
        log.warning("branch_cleanup_failed", table=storage.dotted, branch=branch, error=str(exc))
