"""What `icemv mv show` and `icemv status` print, as data first and text second."""

from __future__ import annotations

from typing import Any

from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.freshness import Freshness, assess_freshness
from icemv.mv.history import history_as_6420, refresh_history
from icemv.mv.model import MaterializedView
from icemv.spec.quarantine import quarantine_of


def mv_report(lakehouse: Lakehouse, mv: MaterializedView) -> dict[str, Any]:
    freshness = assess_freshness(lakehouse, mv)
    try:
        history = refresh_history(lakehouse.load_table(mv.storage))
    except Exception:  # noqa: BLE001 (storage missing: freshness already says invalid)
        history = []
    return {
        "name": mv.identifier.dotted,
        "sql": mv.sql,
        "view-version-id": mv.version.version_id,
        "storage-table": mv.storage.dotted,
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
                "mode": record.details.get("icemv.mode"),
                "reason": record.details.get("icemv.reason"),
                "sources": {
                    s.dotted: s.snapshot_id if s.type == "table" else f"v{s.version_id}"
                    for s in record.state.source_states
                },
            }
            for record in history
        ],
        **history_as_6420(history, lakehouse.catalog_name),
    }


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


def render_report(report: dict[str, Any]) -> str:
    state = state_with_reason(report["state"], report["reason"])
    lines = [
        f"materialized view {report['name']}  (view version {report['view-version-id']})",
        f"  storage table : {report['storage-table']}",
        f"  state         : {state}",
        f"  staleness     : {report['staleness-seconds']:.1f} s",
        "  sql           : " + " ".join(report["sql"].split()),
    ]
    if report["properties"]:
        props = ", ".join(f"{k}={v}" for k, v in sorted(report["properties"].items()))
        lines.append(f"  properties    : {props}")
    lines.append("  sources (recorded -> current):")
    for source in report["sources"]:
        note = f", {source['pending']} pending" if source["pending"] else ""
        note += f", {source['problem']}" if source["problem"] else ""
        moved = f"{source['recorded']} -> {source['current']}"
        lines.append(f"    {source['type']:5} {source['name']}: {moved}{note}")
    if not report["sources"]:
        lines.append("    (none recorded yet)")
    lines.append(f"  refresh history ({len(report['history'])}):")
    for entry in report["history"]:
        sources = ", ".join(f"{k}@{v}" for k, v in entry["sources"].items())
        how = f"{entry['mode'] or '-'} ({entry['reason'] or '-'})"
        lines.append(
            f"    snapshot {entry['snapshot-id']}  ts={entry['timestamp-ms']}  "
            f"v{entry['view-version-id']}  {how}  {sources}"
        )
    return "\n".join(lines)


def quarantined_rule(reads: CatalogReads, mv: MaterializedView) -> dict[str, Any] | None:
    """The delta rule quarantined for this MV's current definition (spec/quarantine.py)."""
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
