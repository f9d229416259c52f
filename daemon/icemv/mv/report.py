"""What `icemv mv show` and `icemv status` print, as data first and text second."""

from __future__ import annotations

import datetime as dt
import textwrap
import time
from typing import Any

from sqlglot import exp

from icemv.format.quarantine import QUARANTINE_PROPERTY, quarantine_of
from icemv.format.summary import SummaryKey
from icemv.format.view_metadata import STORAGE_TABLE_PROPERTY
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.freshness import Freshness, assess_freshness
from icemv.mv.history import history_as_6420, refresh_history
from icemv.mv.layout import StorageLayout
from icemv.mv.model import MaterializedView


def mv_report(lakehouse: Lakehouse, mv: MaterializedView) -> dict[str, Any]:
    freshness = assess_freshness(lakehouse, mv)
    try:
        storage = lakehouse.load_table(mv.storage)
    except Exception:  # noqa: BLE001 (storage missing: freshness already says invalid)
        history, columns = [], []
    else:
        history = refresh_history(storage)
        columns = list(StorageLayout.of(storage).view_columns)
    return {
        "name": mv.identifier.dotted,
        "sql": mv.sql,
        "view-version-id": mv.version.version_id,
        "storage-table": mv.storage.dotted,
        # What other engines read: the view's columns of the storage table (docs/reading.md).
        "view-columns": columns,
        "read-sql": read_sql(lakehouse.catalog_name, mv.storage, columns),
        "properties": mv.properties,
        "state": freshness.state,
        "reason": freshness.reason,
        "staleness-seconds": round(freshness.staleness_seconds, 3),
        "sources": _sources(freshness),
        "history": [
            {
                "snapshot-id": record.snapshot_id,
                "timestamp-ms": record.timestamp_ms,
                "view-version-id": record.state.view_version_id,
                "mode": record.details.get(SummaryKey.MODE),
                "reason": record.details.get(SummaryKey.REASON),
                "engine": record.details.get(SummaryKey.ENGINE),
                "rows-inserted": _count(record.details.get(SummaryKey.ROWS_INSERTED)),
                "rows-deleted": _count(record.details.get(SummaryKey.ROWS_DELETED)),
                # From the refresh's start to its commit.
                "duration-seconds": round(
                    (record.timestamp_ms - record.state.refresh_start_timestamp_ms) / 1000, 3
                ),
                "sources": {
                    s.dotted: s.snapshot_id if s.type == "table" else f"v{s.version_id}"
                    for s in record.state.source_states
                },
            }
            for record in history
        ],
        **history_as_6420(history, lakehouse.catalog_name),
    }


def read_sql(catalog: str, storage: Identifier, columns: list[str]) -> str | None:
    """`SELECT <the view's columns> FROM <storage>`: the MV as other engines read it, without
    icemv's hidden state columns (Spark SQL, every name quoted)."""
    if not columns:
        return None
    table = exp.Table(
        this=exp.to_identifier(storage.name, quoted=True),
        db=exp.to_identifier(storage.namespace_str, quoted=True),
        catalog=exp.to_identifier(catalog, quoted=True),
    )
    return exp.select(*(exp.column(c, quoted=True) for c in columns)).from_(table).sql("spark")


def _count(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _sources(freshness: Freshness) -> list[dict[str, Any]]:
    return [
        {
            "type": s.recorded.type,
            "name": s.recorded.dotted,
            "recorded": s.recorded.snapshot_id
            if s.recorded.type == "table"
            else s.recorded.version_id,
            "current": s.current_snapshot_id
            if s.recorded.type == "table"
            else s.current_version_id,
            "pending": s.pending,
            "problem": s.problem,
        }
        for s in freshness.sources
    ]


def state_with_reason(state: str, reason: str | None) -> str:
    """`fresh`, or `stale (source-changed)`: why an MV is not fresh, as `icemv status` says."""
    return state + (f" ({reason})" if reason else "")


# Properties icemv writes for itself: shown by `mv show --verbose` only.
INTERNAL_PROPERTIES = frozenset({STORAGE_TABLE_PROPERTY, QUARANTINE_PROPERTY})
WIDTH = 100  # text output fits this many columns


def render_report(report: dict[str, Any], verbose: bool = False, now_ms: int | None = None) -> str:
    """`mv show` as text: at most WIDTH columns, times as local date, time and age."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    state = state_with_reason(report["state"], report["reason"])
    label = "  sql           : "
    sql = textwrap.wrap(" ".join(report["sql"].split()), WIDTH - len(label))
    lines = [
        f"materialized view {report['name']}  (view version {report['view-version-id']})",
        f"  storage table : {report['storage-table']}",
        f"  state         : {state}",
        f"  staleness     : {report['staleness-seconds']:.1f} s",
        label + f"\n{' ' * len(label)}".join(sql),
    ]
    if report.get("read-sql"):
        label = "  read with     : "
        read = textwrap.wrap(report["read-sql"], WIDTH - len(label), break_on_hyphens=False)
        lines.append(label + f"\n{' ' * len(label)}".join(read))
    shown = {
        k: v
        for k, v in sorted(report["properties"].items())
        if verbose or k not in INTERNAL_PROPERTIES
    }
    if shown:
        label = "  properties    : "
        props = textwrap.wrap(", ".join(f"{k}={v}" for k, v in shown.items()), WIDTH - len(label))
        lines.append(label + f"\n{' ' * len(label)}".join(props))
    lines.append("  sources (recorded -> current):")
    for source in report["sources"]:
        note = f", {source['pending']} pending" if source["pending"] else ""
        note += f", {source['problem']}" if source["problem"] else ""
        moved = f"{source['recorded']} -> {source['current']}"
        lines.append(f"    {source['type']:5} {source['name']}: {moved}{note}"[:WIDTH])
    if not report["sources"]:
        lines.append("    (none recorded yet)")
    lines.append(f"  refresh history ({len(report['history'])}, newest first):")
    rows = [
        [
            when(entry["timestamp-ms"], now_ms),
            f"{entry['mode'] or '-'} ({entry['reason'] or '-'})",
            entry.get("engine") or "-",
            _rows(entry.get("rows-inserted"), entry.get("rows-deleted")),
            f"{entry['duration-seconds']:.1f} s" if "duration-seconds" in entry else "-",
            *([str(entry["snapshot-id"])] if verbose else []),
        ]
        for entry in report["history"]
    ]
    if rows:
        header = ["when", "mode (reason)", "engine", "rows", "took"]
        header += ["snapshot"] if verbose else []
        lines += ["    " + line for line in columns(header, rows)]
    return "\n".join(lines)


def _rows(inserted: int | None, deleted: int | None) -> str:
    if inserted is None and deleted is None:
        return "-"
    return f"+{inserted or 0} -{deleted or 0}"


def when(timestamp_ms: int, now_ms: int) -> str:
    """`2026-11-28 08:51:25 UTC, 3m ago`: the local date and time, and the age."""
    moment = dt.datetime.fromtimestamp(timestamp_ms / 1000, dt.UTC).astimezone()
    return f"{moment:%Y-%m-%d %H:%M:%S %Z}, {age(max(0, now_ms - timestamp_ms) / 1000)} ago"


def age(seconds: float) -> str:
    """`42s`, `3m`, `5h`, `2d`: an age in its largest whole unit."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def columns(header: list[str], rows: list[list[str]]) -> list[str]:
    """A header line and the rows, each column as wide as its widest cell."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def quarantined_rule(reads: CatalogReads, mv: MaterializedView) -> dict[str, Any] | None:
    """The delta rule quarantined for this MV's current definition (format/quarantine.py)."""
    try:
        properties = reads.load_table(mv.storage).properties
    except Exception:  # noqa: BLE001 (storage missing: freshness already says invalid)
        return None
    quarantine = quarantine_of(properties)
    if quarantine is None or quarantine.view_version_id != mv.version.version_id:
        return None
    return {
        "rule": quarantine.rule,
        "since-ms": quarantine.since_ms,
        "detail": quarantine.detail,
        "snapshots": dict(quarantine.snapshots),
    }


def status_rows(lakehouse: Lakehouse, mvs: list[MaterializedView]) -> list[dict[str, Any]]:
    rows = []
    reads = CatalogReads(lakehouse)  # each storage table loaded once
    for mv in mvs:
        freshness = assess_freshness(lakehouse, mv, reads=reads)
        quarantine = quarantined_rule(reads, mv)
        rows.append(
            {
                "name": mv.identifier.dotted,
                "state": freshness.state,
                "reason": freshness.reason,
                "staleness-seconds": round(freshness.staleness_seconds, 3),
                "pending-snapshots": freshness.pending_snapshots,
                "quarantined-rule": quarantine["rule"] if quarantine else None,
            }
        )
    return rows
