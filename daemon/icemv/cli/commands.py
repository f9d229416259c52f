"""The commands behind `icemv ...`: each opens only what it needs (no Spark for read-only ones)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import yaml

from icemv.cli.output import announced, mv_list_document, print_document
from icemv.config import Config, masked_dump
from icemv.errors import ConfigError
from icemv.lakehouse import Lakehouse

if TYPE_CHECKING:
    from icemv.mv.model import MaterializedView


def _properties(pairs: Sequence[str]) -> dict[str, str]:
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--property expects key=value, got {pair!r}")
        result[key.strip()] = value.strip()
    return result


def cmd_config_show(config: Config, args: argparse.Namespace) -> int:
    print(yaml.safe_dump(masked_dump(config), sort_keys=False), end="")
    return 0


def cmd_mv_create(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.lifecycle import create_mv

    lakehouse = Lakehouse(config)
    with announced(f"creating {args.name} (Spark checks the SQL)"):
        mv = create_mv(
            lakehouse,
            lakehouse.identifier(args.name),
            args.sql,
            _properties(args.property),
            args.partition_by,
        )
    print(f"created materialized view {mv.identifier} (storage table {mv.storage})")
    from icemv.mv.explain import render_explain

    print(render_explain(_explained(lakehouse, mv)))
    return 0


def _explained(lakehouse: Lakehouse, mv: MaterializedView) -> dict[str, Any]:
    """`icemv mv explain`'s report, with how the embedded engine reads joined tables."""
    from icemv.lakehouse import CatalogReads
    from icemv.mv.explain import explain
    from icemv.refresh.embedded.restrict import explain_joined_reads

    report = explain(lakehouse, mv)
    if report["incremental"]:
        namespace = mv.version.default_namespace or mv.identifier.namespace
        joined = explain_joined_reads(CatalogReads(lakehouse), mv.sql, namespace)
        if joined:
            report["joined-reads"] = joined
    return report


def cmd_mv_explain(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.explain import render_explain
    from icemv.mv.model import load_materialized_view

    lakehouse = _existing_lakehouse(config)
    report = _explained(
        lakehouse, load_materialized_view(lakehouse, lakehouse.identifier(args.name))
    )
    if args.output == "json":
        print_document(report)
    else:
        print(render_explain(report))
    return 0


def cmd_mv_compact(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.maintenance import compact_storage
    from icemv.mv.model import load_materialized_view

    lakehouse = Lakehouse(config)
    mv = load_materialized_view(lakehouse, lakehouse.identifier(args.name))
    result = compact_storage(lakehouse, mv)
    print(
        f"{mv.storage}: rewrote {result.rewritten_files} files into {result.added_files}, "
        f"snapshots {result.snapshots_before} -> {result.snapshots_after}"
    )
    return 0


def cmd_mv_verify(config: Config, args: argparse.Namespace) -> int:
    """Exit 0 when the storage table equals the view's SQL, 1 when it differs."""
    from icemv.mv.verify import verify_mv, verify_report_json

    lakehouse = _existing_lakehouse(config)
    identifier = lakehouse.identifier(args.name)
    with announced(f"verifying {identifier} against its SQL"):
        report = verify_mv(lakehouse, identifier, slices=args.slices, sample=args.sample)
    if args.output == "json":
        print_document(verify_report_json(report))
    else:
        print(f"{identifier}: {report.summary()} ({report.seconds:.1f} s)")
        for side, rows in (("storage", report.samples_storage), ("view", report.samples_view)):
            for row in rows:
                print(f"  only in {side}: {row!r}")
    if report.clean:
        return 0
    if args.repair:
        from icemv.refresh.policy import refresh_mv

        result = refresh_mv(lakehouse, identifier, repair=report.summary())
        print(f"repaired by a full refresh: storage snapshot {result.storage_snapshot_id}")
    return 1


def cmd_mv_clear(config: Config, args: argparse.Namespace) -> int:
    from icemv.format.quarantine import quarantine_of
    from icemv.mv.model import load_materialized_view
    from icemv.refresh.incident import set_quarantine

    lakehouse = Lakehouse(config)
    mv = load_materialized_view(lakehouse, lakehouse.identifier(args.name))
    quarantine = quarantine_of(lakehouse.load_table(mv.storage).properties)
    if quarantine is None:
        print(f"{mv.identifier}: no rule is quarantined")
        return 0
    set_quarantine(lakehouse, mv.storage, None)
    print(f"{mv.identifier}: rule {quarantine.rule} cleared; incremental refreshes resume")
    return 0


def cmd_mv_replace(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.lifecycle import replace_mv

    lakehouse = Lakehouse(config)
    mv = replace_mv(
        lakehouse, lakehouse.identifier(args.name), args.sql, _properties(args.property)
    )
    print(
        f"replaced {mv.identifier}: view version {mv.version.version_id}, invalid until refreshed"
    )
    return 0


def cmd_mv_drop(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.lifecycle import drop_mv

    lakehouse = Lakehouse(config)
    drop_mv(lakehouse, lakehouse.identifier(args.name))
    print(f"dropped {args.name}")
    return 0


def cmd_mv_list(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.model import list_materialized_views

    mvs = list_materialized_views(_existing_lakehouse(config))
    if args.output == "json":
        print_document(mv_list_document(mvs))
        return 0
    from icemv.mv.report import columns

    rows = [[mv.identifier.dotted, mv.storage.dotted, str(mv.version.version_id)] for mv in mvs]
    for line in columns(["materialized view", "storage table", "version"], rows):
        print(line)
    return 0


def cmd_mv_show(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.model import load_materialized_view
    from icemv.mv.report import mv_report, render_report

    lakehouse = _existing_lakehouse(config)
    report = mv_report(
        lakehouse, load_materialized_view(lakehouse, lakehouse.identifier(args.name))
    )
    if args.output == "json":
        print_document(report)
    else:
        print(render_report(report, verbose=getattr(args, "verbose", False)))
    return 0


def cmd_status(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.model import list_materialized_views
    from icemv.mv.report import status_rows

    lakehouse = _existing_lakehouse(config)
    rows = status_rows(lakehouse, list_materialized_views(lakehouse))
    if args.output == "json":
        print_document(rows)
        return 0
    print(f"{'materialized view':40} {'state':8} {'staleness_s':>12} {'pending':>8}  reason")
    for row in rows:
        quarantined = row["quarantined-rule"]
        note = f"  [rule {quarantined} quarantined]" if quarantined else ""
        print(
            f"{row['name']:40} {row['state']:8} {row['staleness-seconds']:>12.1f} "
            f"{row['pending-snapshots']:>8}  {row['reason'] or ''}{note}"
        )
    return 0


def cmd_refresh(config: Config, args: argparse.Namespace) -> int:
    from icemv.refresh.policy import refresh_mv

    lakehouse = Lakehouse(config)
    with announced(f"refreshing {args.name}" + (" in full" if args.full else "")):
        result = refresh_mv(lakehouse, lakehouse.identifier(args.name), force_full=args.full)
    print(
        f"{result.mv}: {result.mode} ({result.reason}) in {result.duration_seconds:.2f} s, "
        f"+{result.rows_inserted} -{result.rows_deleted} rows, "
        f"storage snapshot {result.storage_snapshot_id}"
    )
    return 0


def cmd_apply(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.lifecycle import apply_declared

    actions = apply_declared(Lakehouse(config), config.materialized_views, prune=args.prune)
    for name, action in actions.items():
        print(f"{action:9} {name}")
    if not actions:
        print("no materialized views declared in the configuration")
    return 0


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    from icemv.service.daemon import run_daemon

    return run_daemon(config, args.config)


def cmd_emit(config: Config, args: argparse.Namespace) -> int:
    from icemv.events.formats.icemv import IcemvCommitEvent
    from icemv.events.publisher import publish_commit_event

    if not config.kafka.enabled:
        raise ConfigError("icemv emit needs kafka.bootstrap_servers")
    if not args.debug:  # each failed connection attempt would be a log line; the error says it
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    lakehouse = Lakehouse(config)
    identifier = lakehouse.identifier(args.table)
    table = lakehouse.load_table(identifier)
    snapshot = table.current_snapshot()
    topic = args.topic or config.kafka.topics[0]
    event = IcemvCommitEvent(
        list(identifier.namespace),
        identifier.name,
        catalog=config.catalog.name,
        table_uuid=str(table.metadata.table_uuid),
        snapshot_id=snapshot.snapshot_id if snapshot else None,
        parent_snapshot_id=snapshot.parent_snapshot_id if snapshot else None,
        sequence_number=snapshot.sequence_number if snapshot else None,
        operation=snapshot.summary.operation.value if snapshot and snapshot.summary else None,
        timestamp_ms=snapshot.timestamp_ms if snapshot else None,
        metadata_location=table.metadata_location,
    )
    publish_commit_event(config.kafka, topic, event, timeout_seconds=args.timeout)
    print(f"published a commit event for {identifier} to {topic}")
    return 0


def cmd_demo(config: Config, args: argparse.Namespace) -> int:
    from icemv.cli.demo import run_demo

    return run_demo(config, args.seconds, args.interval, args.max_seconds)


def _existing_lakehouse(config: Config) -> Lakehouse:
    """The lakehouse of a command that only reads it: on the embedded default, one must
    already be there (`Lakehouse` would make an empty one and answer for it)."""
    if config.catalog.embedded and not config.home_path.exists():
        raise ConfigError(
            f"no lakehouse at {config.home_path} (the embedded default, `home`): "
            "`icemv demo` makes one there, or pass --config FILE for yours"
        )
    return Lakehouse(config)
