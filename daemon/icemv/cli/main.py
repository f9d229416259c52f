"""`icemv` command line. Each command opens only what it needs: no Spark for read-only ones."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from icemv.config import Config, load_config, masked_dump
from icemv.errors import ConfigError, IcemvError
from icemv.lakehouse import Lakehouse
from icemv.logs import configure_logging


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors whose message is the whole story for a user: printed as one line, exit 2."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    return (IcemvError, NoSuchTableError, NoSuchNamespaceError)


def _runtime_message(exc: BaseException) -> str:
    """One line for a failure of something icemv depends on (catalog database, broker).

    Such messages come from drivers and may be long or quote connection strings: the
    first meaningful line is kept and any URL password masked.
    """
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    if isinstance(exc, DBAPIError) and exc.orig is not None:
        return f"catalog database unavailable: {_one_line(str(exc.orig))}"
    if isinstance(exc, SQLAlchemyError):
        return f"catalog database unavailable: {_one_line(str(exc))}"
    import kafka.errors

    # kafka-python 2.x says "no brokers" with NoBrokersAvailable, 3.x with a bootstrap timeout.
    no_brokers = getattr(kafka.errors, "NoBrokersAvailable", kafka.errors.KafkaTimeoutError)
    if isinstance(exc, no_brokers) and (
        not isinstance(exc, kafka.errors.KafkaTimeoutError) or "bootstrap" in str(exc)
    ):
        return "Kafka broker unreachable (kafka.bootstrap_servers): no broker answered"
    if isinstance(exc, kafka.errors.KafkaError):
        return f"Kafka: {_one_line(str(exc))}"
    return f"{type(exc).__name__}: {_one_line(str(exc))}"


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    kept = [line for line in lines if not line.startswith("(Background on")]
    joined = "".join(line + (" " if line.endswith(":") else "; ") for line in kept[:-1]) + (
        kept[-1] if kept else ""
    )
    return _URL_PASSWORD.sub(r"\1******@", joined) or "(no message)"


_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^@\s/]+@")


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
    mv = create_mv(
        lakehouse,
        lakehouse.identifier(args.name),
        args.sql,
        _properties(args.property),
        args.partition_by,
    )
    print(f"created materialized view {mv.identifier} (storage table {mv.storage})")
    from icemv.mv.explain import explain, render_explain

    print(render_explain(explain(lakehouse, mv)))
    return 0


def cmd_mv_explain(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.explain import explain, render_explain
    from icemv.mv.model import load_materialized_view

    lakehouse = Lakehouse(config)
    report = explain(lakehouse, load_materialized_view(lakehouse, lakehouse.identifier(args.name)))
    print(json.dumps(report, indent=2) if args.format == "json" else render_explain(report))
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

    for mv in list_materialized_views(Lakehouse(config)):
        print(f"{mv.identifier}\t{mv.storage}\tv{mv.version.version_id}")
    return 0


def cmd_mv_show(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.model import load_materialized_view
    from icemv.mv.report import mv_report, render_report

    lakehouse = Lakehouse(config)
    report = mv_report(
        lakehouse, load_materialized_view(lakehouse, lakehouse.identifier(args.name))
    )
    print(json.dumps(report, indent=2) if args.format == "json" else render_report(report))
    return 0


def cmd_status(config: Config, args: argparse.Namespace) -> int:
    from icemv.mv.model import list_materialized_views
    from icemv.mv.report import status_rows

    lakehouse = Lakehouse(config)
    rows = status_rows(lakehouse, list_materialized_views(lakehouse))
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'materialized view':40} {'state':8} {'staleness_s':>12} {'pending':>8}  reason")
    for row in rows:
        print(
            f"{row['name']:40} {row['state']:8} {row['staleness-seconds']:>12.1f} "
            f"{row['pending-snapshots']:>8}  {row['reason'] or ''}"
        )
    return 0


def cmd_refresh(config: Config, args: argparse.Namespace) -> int:
    from icemv.refresh.policy import refresh_mv

    lakehouse = Lakehouse(config)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="icemv", description=__doc__)
    parser.add_argument(
        "--config", "-c", default=os.environ.get("ICEMV_CONFIG"), help="YAML config file"
    )
    parser.add_argument("--debug", action="store_true", help="print the full traceback of an error")
    commands = parser.add_subparsers(dest="command", required=True)
    # `icemv run --config F` and `icemv --config F run` both work.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", "-c", default=argparse.SUPPRESS, help="YAML config file")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)

    def add(
        group: Any, name: str, handler: Callable[[Config, argparse.Namespace], int], help: str
    ) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = group.add_parser(name, help=help, parents=[common])
        sub.set_defaults(handler=handler)
        return sub

    config_cmd = commands.add_parser("config", help="configuration").add_subparsers(
        dest="config_command", required=True
    )
    add(config_cmd, "show", cmd_config_show, "print the effective config, secrets masked")

    mv = commands.add_parser("mv", help="materialized views").add_subparsers(
        dest="mv_command", required=True
    )
    create = add(mv, "create", cmd_mv_create, "create a materialized view")
    create.add_argument("name")
    create.add_argument("--sql", required=True)
    create.add_argument("--property", action="append", default=[], metavar="KEY=VALUE")
    create.add_argument("--partition-by", action="append", default=[], metavar="EXPR")
    replace = add(mv, "replace", cmd_mv_replace, "replace the definition (new view version)")
    replace.add_argument("name")
    replace.add_argument("--sql", required=True)
    replace.add_argument("--property", action="append", default=[], metavar="KEY=VALUE")
    add(mv, "drop", cmd_mv_drop, "drop the view and its storage table").add_argument("name")
    add(mv, "list", cmd_mv_list, "list materialized views")
    show = add(mv, "show", cmd_mv_show, "definition, freshness, sources and refresh history")
    show.add_argument("name")
    show.add_argument("--format", choices=["text", "json"], default="text")

    explain = add(mv, "explain", cmd_mv_explain, "is it maintained incrementally, how, or why not")
    explain.add_argument("name")
    explain.add_argument("--format", choices=["text", "json"], default="text")
    add(
        mv, "compact", cmd_mv_compact, "compact the storage table, expire old snapshots"
    ).add_argument("name")

    refresh = add(commands, "refresh", cmd_refresh, "refresh one materialized view now")
    refresh.add_argument("name")
    refresh.add_argument("--full", action="store_true", help="recompute even if fresh")
    status = add(commands, "status", cmd_status, "state and staleness of every MV")
    status.add_argument("--format", choices=["text", "json"], default="text")
    apply = add(commands, "apply", cmd_apply, "create/replace the MVs declared in config")
    apply.add_argument(
        "--prune", action="store_true", help="drop config-managed MVs no longer declared"
    )
    add(commands, "run", cmd_run, "run the daemon: events and polls keep every MV fresh")
    emit = add(
        commands, "emit", cmd_emit, "publish icemv's commit event for a table's current snapshot"
    )
    emit.add_argument("table")
    emit.add_argument("--topic", help="default: the first of kafka.topics")
    emit.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for the broker's ack"
    )
    demo = add(
        commands, "demo", cmd_demo, "demo lakehouse: the daemon keeps an MV fresh as rows arrive"
    )
    demo.add_argument(
        "--seconds", type=float, default=30.0, help="how long to run (0: until Ctrl-C)"
    )
    demo.add_argument("--interval", type=float, default=5.0, help="seconds between commits")
    demo.add_argument(
        "--max-seconds",
        type=float,
        default=300.0,
        help="keep writing past --seconds until an incremental refresh shows, up to this",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 on success, 2 for a usage or definition error, 1 for a runtime failure.

    Every error is one line on stderr; `--debug` adds the traceback.
    """
    args = build_parser().parse_args(argv)
    args.debug = bool(getattr(args, "debug", False))
    try:
        config = load_config(args.config)
        configure_logging(config.logging)
        result: int = args.handler(config, args)
        return result
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 (the CLI's last word: one line, exit 1 or 2)
        user_error = isinstance(exc, _user_errors())
        if args.debug:
            traceback.print_exc()
        message = _one_line(str(exc)) if user_error else _runtime_message(exc)
        print(f"icemv: error: {message}", file=sys.stderr)
        return 2 if user_error else 1


if __name__ == "__main__":
    sys.exit(main())
