"""What happened to one source table between the recorded and the pinned snapshot.

Metadata only (pyiceberg): the history checks that decide whether a delta can be computed
at all, and the snapshot operations that decide how. `replace` snapshots (compaction) carry
no logical change; `append` only inserts; `overwrite` / `delete` may delete rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot, ancestors_of

from icemv.errors import FullRefreshRequiredError
from icemv.format.refresh_state import SourceState
from icemv.format.summary import (
    ADDED_EQUALITY_DELETES,
    ADDED_POSITION_DELETES,
    ADDED_RECORDS,
    DELETED_RECORDS,
    TOTAL_RECORDS,
    RefreshReason,
    summary_int,
)
from icemv.identifiers import Identifier

ChangeKind = Literal["unchanged", "no-logical-change", "append-only", "general"]


@dataclass(frozen=True)
class SourceChange:
    identifier: Identifier
    old_snapshot_id: int | None
    new_snapshot_id: int | None
    kind: ChangeKind
    # Oldest first: the snapshots after the recorded one, up to and including the pinned one.
    snapshots: tuple[Snapshot, ...]
    changed_records: int
    total_records: int

    @property
    def operations(self) -> tuple[str, ...]:
        return tuple(_operation(s) for s in self.snapshots)


def _operation(snapshot: Snapshot) -> str:
    return snapshot.summary.operation.value if snapshot.summary else "overwrite"


def classify_change(
    table: Table, recorded: SourceState, new_snapshot_id: int | None
) -> SourceChange:
    identifier = Identifier(recorded.namespace, recorded.name)
    if recorded.uuid is not None and str(table.metadata.table_uuid) != recorded.uuid:
        raise FullRefreshRequiredError(
            RefreshReason.SOURCE_REPLACED, f"{identifier} was dropped and recreated"
        )
    old_id = recorded.snapshot_id
    if old_id == new_snapshot_id:
        return SourceChange(identifier, old_id, new_snapshot_id, "unchanged", (), 0, 0)
    if new_snapshot_id is None:
        raise FullRefreshRequiredError(
            RefreshReason.SOURCE_ROLLED_BACK, f"{identifier} has no snapshot any more"
        )
    if old_id is not None and table.metadata.snapshot_by_id(old_id) is None:
        raise FullRefreshRequiredError(
            RefreshReason.SOURCE_HISTORY_LOST, f"snapshot {old_id} of {identifier} was expired"
        )
    new = table.metadata.snapshot_by_id(new_snapshot_id)
    between: list[Snapshot] = []
    found = old_id is None
    for snapshot in ancestors_of(new, table.metadata):
        if snapshot.snapshot_id == old_id:
            found = True
            break
        between.append(snapshot)
    if not found:
        raise FullRefreshRequiredError(
            RefreshReason.SOURCE_ROLLED_BACK,
            f"snapshot {old_id} of {identifier} is not an ancestor of {new_snapshot_id}",
        )
    between.reverse()
    operations = {_operation(s) for s in between}
    if operations <= {"replace"}:
        kind: ChangeKind = "no-logical-change"
    elif operations == {"append"}:
        # Not with a compaction in range: its output re-holds old rows, so diff instead.
        kind = "append-only"
    else:
        kind = "general"
    changed = sum(
        summary_int(s, ADDED_RECORDS)
        + summary_int(s, DELETED_RECORDS)
        + summary_int(s, ADDED_POSITION_DELETES)
        + summary_int(s, ADDED_EQUALITY_DELETES)
        for s in between
        if _operation(s) != "replace"
    )
    total = summary_int(between[-1], TOTAL_RECORDS) if between else 0
    return SourceChange(identifier, old_id, new_snapshot_id, kind, tuple(between), changed, total)
