"""What a parsed commit event tells the daemon: hints, not facts.

Events are lost, duplicated and reordered, and several formats carry no snapshot id, so a
hint only says "this table (or view) may have changed": the daemon reloads from the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass

# The `format` of a hint: which producer's wire format it came in (a metric label).
ICEMV = "icemv"
LAKEKEEPER = "lakekeeper"
POLARIS = "polaris"


@dataclass(frozen=True)
class TableCommitHint:
    """Table `namespace.name` may have changed (committed, created, dropped or renamed)."""

    namespace: tuple[str, ...]
    name: str
    format: str
    table_uuid: str | None = None
    snapshot_id: int | None = None
    # The snapshot's timestamp when the event has one, else the event's time.
    timestamp_ms: int | None = None
    event_id: str | None = None
    catalog: str | None = None
    # The warehouse id a Lakekeeper event names (its REST prefix).
    warehouse: str | None = None


@dataclass(frozen=True)
class ViewChangeHint:
    """A view changed, so an MV definition may have: re-read definitions (name may be unknown)."""

    namespace: tuple[str, ...] | None
    name: str | None
    format: str
    event_id: str | None = None


@dataclass(frozen=True)
class IgnoredEvent:
    """A valid event of a kind the daemon does not act on; `reason` is a fixed code."""

    format: str
    reason: str
    # The producer's own type name, for logs only (unbounded: never a metric label).
    event_type: str | None = None


@dataclass(frozen=True)
class RefreshRequestHint:
    """Another replica of the consumer group `group` asks for these MVs to be refreshed: the
    partition the request came in on is this replica's (service/ownership.py)."""

    mvs: tuple[tuple[tuple[str, ...], str], ...]  # (namespace, name) of each MV
    group: str
    reason: str
    format: str
    catalog: str | None = None


EventHint = TableCommitHint | ViewChangeHint | RefreshRequestHint | IgnoredEvent
