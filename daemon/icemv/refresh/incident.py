"""A wrong delta found while refreshing is an incident, not a quiet recompute.

A refresh whose delta deletes rows the storage table does not hold (`storage-inconsistent`)
has shown its rule to be wrong for this MV (or the storage table to have been written by
someone else). The incident is logged at error level with the rule and the snapshots, the
rule is quarantined for the MV (format/quarantine.py: full refreshes until the definition
changes or `icemv mv clear`), and the result carries the rule so the daemon counts it
(`icemv_refresh_inconsistent_total`). The caller then repairs the MV with a full refresh.
"""

from __future__ import annotations

import time

import structlog
from pyiceberg.exceptions import CommitFailedException

from icemv.format.quarantine import QUARANTINE_PROPERTY, Quarantine, encode_quarantine
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.history import RefreshRecord
from icemv.refresh.plan import RefreshPlan

log = structlog.get_logger(__name__)

_ATTEMPTS = 3


def record_incident(
    plan: RefreshPlan, rule: str, detail: str, record: RefreshRecord | None
) -> Quarantine:
    """Log the wrong delta and quarantine its rule on the MV's storage table."""
    current = {s.dotted: s.snapshot_id for s in plan.pinned.sources if s.type == "table"}
    recorded = {s.dotted: s.snapshot_id for s in record.state.tables()} if record else {}
    quarantine = Quarantine(
        rule=rule,
        view_version_id=plan.mv.version.version_id,
        since_ms=int(time.time() * 1000),
        detail=detail,
        snapshots=current,
    )
    log.error(
        "refresh_inconsistent",
        mv=str(plan.mv.identifier),
        rule=rule,
        detail=detail,
        recorded_snapshots=recorded,
        current_snapshots=current,
        storage_snapshot=plan.planned_from.snapshot_id if plan.planned_from else None,
        action="rule quarantined for this MV; repairing with a full refresh",
    )
    set_quarantine(plan.reads.lakehouse, plan.mv.storage, encode_quarantine(quarantine))
    return quarantine


def set_quarantine(lakehouse: Lakehouse, storage: Identifier, value: str | None) -> None:
    """Write (or, with None, remove) the quarantine property, retrying lost races."""
    for attempt in range(1, _ATTEMPTS + 1):
        table = lakehouse.load_table(storage)
        try:
            with table.transaction() as transaction:
                if value is None:
                    if QUARANTINE_PROPERTY not in table.properties:
                        return
                    transaction.remove_properties(QUARANTINE_PROPERTY)
                else:
                    transaction.set_properties({QUARANTINE_PROPERTY: value})
            return
        except CommitFailedException:
            if attempt == _ATTEMPTS:
                raise
