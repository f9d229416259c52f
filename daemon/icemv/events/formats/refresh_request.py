"""icemv's `mv-refresh` record: one replica asks the replica owning some MVs to refresh them.

A replica that reads a commit event for a table whose MVs another replica owns publishes
one of these to the partition owning them (service/ownership.py); it names the consumer
group, so a second icemv deployment reading the same topic leaves it alone.

```json
{"type": "mv-refresh", "group": "icemv", "catalog": "lake", "reason": "event",
 "mvs": [{"namespace": ["nyc"], "name": "pickup_agg"}]}
```
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from icemv.errors import BadEventError
from icemv.events.fields import optional_str, required_str, table_name, table_namespace
from icemv.events.hints import ICEMV, RefreshRequestHint

REFRESH_REQUEST = "mv-refresh"
# Why a replica forwards: a commit event, or an upstream MV it refreshed.
REASONS = ("event", "upstream-refreshed")
# A record names at most this many MVs (a few hundred bytes each stay far below 1 MiB).
MAX_MVS = 1000

MvName = tuple[tuple[str, ...], str]


def encode_refresh_request(
    mvs: Sequence[MvName], group: str, reason: str, catalog: str | None = None
) -> bytes:
    """The record's value; refuses (BadEventError) what `parse_refresh_request` would."""
    payload: dict[str, object] = {
        "type": REFRESH_REQUEST,
        "group": group,
        "reason": reason,
        "mvs": [{"namespace": list(namespace), "name": name} for namespace, name in mvs],
    }
    if catalog is not None:
        payload["catalog"] = catalog
    parse_refresh_request(payload)
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_refresh_request(event: Mapping[str, object]) -> RefreshRequestHint:
    mvs = event.get("mvs")
    if not isinstance(mvs, list) or not mvs or len(mvs) > MAX_MVS:
        raise BadEventError("bad-field", f"mvs must be a list of 1 to {MAX_MVS} names")
    names: list[MvName] = []
    for entry in mvs:
        if not isinstance(entry, dict):
            raise BadEventError("bad-field", "each of mvs must be an object")
        namespace = table_namespace(entry.get("namespace"), "namespace")
        names.append((namespace, table_name(entry.get("name"), "name")))
    reason = required_str(event, "reason")
    if reason not in REASONS:
        raise BadEventError("bad-field", f"reason must be one of {', '.join(REASONS)}")
    return RefreshRequestHint(
        mvs=tuple(names),
        group=required_str(event, "group"),
        reason=reason,
        format=ICEMV,
        catalog=optional_str(event, "catalog"),
    )
