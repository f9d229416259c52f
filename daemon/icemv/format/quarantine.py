"""The storage-table property that quarantines an MV's delta rule, and its one codec.

When a refresh finds its delta wrong (it deletes rows the storage table does not hold:
`storage-inconsistent`), that rule stops being used for that MV: the storage table gets
the property `icemv.quarantine`, a JSON object

    {"rule": "affected-keys", "view-version-id": 3, "since-ms": 1764130000000,
     "detail": "the delta deletes rows the storage table does not hold",
     "snapshots": {"ns.orders": 5123}}

and later refreshes that would use the rule recompute fully (`rule-quarantined`) until the
view's definition changes (another version id) or an operator clears it (`icemv mv clear`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

QUARANTINE_PROPERTY = "icemv.quarantine"
# Bounded: a table property is metadata every reader loads.
MAX_DETAIL = 500


@dataclass(frozen=True)
class Quarantine:
    rule: str
    view_version_id: int
    since_ms: int
    detail: str = ""
    # The source snapshots the wrong delta was computed at (dotted name -> snapshot id).
    snapshots: Mapping[str, int | None] = field(default_factory=dict)

    def applies(self, view_version_id: int, rule: str) -> bool:
        """Whether a refresh of this definition by this rule stays full."""
        return self.view_version_id == view_version_id and self.rule == rule


def encode_quarantine(quarantine: Quarantine) -> str:
    return json.dumps(
        {
            "rule": quarantine.rule,
            "view-version-id": quarantine.view_version_id,
            "since-ms": quarantine.since_ms,
            "detail": quarantine.detail[:MAX_DETAIL],
            "snapshots": dict(quarantine.snapshots),
        },
        separators=(",", ":"),
        sort_keys=True,
    )


def decode_quarantine(text: str) -> Quarantine | None:
    """The quarantine a property holds; None for a value that is not one (ignored, so a
    hand-edited property never stops refreshes)."""
    try:
        data: Any = json.loads(text)
        snapshots = data.get("snapshots") or {}
        return Quarantine(
            rule=str(data["rule"]),
            view_version_id=int(data["view-version-id"]),
            since_ms=int(data["since-ms"]),
            detail=str(data.get("detail", "")),
            snapshots={str(k): (None if v is None else int(v)) for k, v in snapshots.items()},
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def quarantine_of(properties: Mapping[str, str]) -> Quarantine | None:
    text = properties.get(QUARANTINE_PROPERTY)
    return decode_quarantine(text) if text else None
