"""The argument parser of `icemv`: every command, its options and its handler."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from icemv import __version__
from icemv.cli.commands import (
    cmd_apply,
    cmd_config_show,
    cmd_demo,
    cmd_emit,
    cmd_mv_clear,
    cmd_mv_compact,
    cmd_mv_create,
    cmd_mv_drop,
    cmd_mv_explain,
    cmd_mv_list,
    cmd_mv_replace,
    cmd_mv_show,
    cmd_mv_verify,
    cmd_refresh,
    cmd_run,
    cmd_status,
)
from icemv.cli.output import add_output_option
from icemv.config import Config

DESCRIPTION = "icemv keeps Apache Iceberg materialized views fresh, incrementally."
EPILOG = "Start with `icemv demo`; `icemv COMMAND --help` describes each command."
VERBOSE_HELP = "log at INFO on stderr (default WARNING; `icemv run` logs as configured)"
DEBUG_HELP = "log at DEBUG and print the full traceback of an error"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be within (0, 1]: {text!r}")
    return value


NAME_HELP = "the MV's name, `namespace.name` (the default namespace if unqualified)"
SQL_HELP = "the view's query, in Spark SQL (a SELECT over Iceberg tables of the catalog)"
PROPERTY_HELP = "a view property, e.g. icemv.refresh-policy=incremental; repeat for several"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="icemv",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument(
        "--config", "-c", default=os.environ.get("ICEMV_CONFIG"), help="YAML config file"
    )
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    parser.add_argument("--version", action="version", version=f"icemv {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, title="commands")
    # `icemv run --config F` and `icemv --config F run` both work.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", "-c", default=argparse.SUPPRESS, help="YAML config file")
    common.add_argument(
        "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
    )
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)

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
    create.add_argument("name", help=NAME_HELP)
    create.add_argument("--sql", required=True, help=SQL_HELP)
    create.add_argument(
        "--property", action="append", default=[], metavar="KEY=VALUE", help=PROPERTY_HELP
    )
    create.add_argument(
        "--partition-by",
        action="append",
        default=[],
        metavar="EXPR",
        help="a partition field of the storage table: an output column, years/months/days/"
        "hours(col), bucket(N, col) or truncate(N, col); repeat for several",
    )
    replace = add(mv, "replace", cmd_mv_replace, "replace the definition (new view version)")
    replace.add_argument("name", help=NAME_HELP)
    replace.add_argument("--sql", required=True, help=SQL_HELP)
    replace.add_argument(
        "--property", action="append", default=[], metavar="KEY=VALUE", help=PROPERTY_HELP
    )
    add(mv, "drop", cmd_mv_drop, "drop the view and its storage table").add_argument("name")
    add_output_option(add(mv, "list", cmd_mv_list, "list materialized views"))
    show = add(mv, "show", cmd_mv_show, "definition, freshness, sources and refresh history")
    show.add_argument("name")
    add_output_option(show)

    explain = add(mv, "explain", cmd_mv_explain, "is it maintained incrementally, how, or why not")
    explain.add_argument("name")
    add_output_option(explain)
    add(
        mv, "compact", cmd_mv_compact, "compact the storage table, expire old snapshots"
    ).add_argument("name")
    verify = add(
        mv,
        "verify",
        cmd_mv_verify,
        "compare the storage table with the view SQL (exit 1: differs)",
    )
    verify.add_argument("name")
    verify.add_argument(
        "--slices", type=_positive_int, default=64, help="hash slices to compare (default 64)"
    )
    verify.add_argument(
        "--sample", type=_share, default=1.0, help="share of the slices to check (0 < F <= 1)"
    )
    verify.add_argument(
        "--repair", action="store_true", help="on a difference, repair with a full refresh"
    )
    add_output_option(verify)
    add(mv, "clear", cmd_mv_clear, "resume a rule quarantined after a wrong delta").add_argument(
        "name"
    )

    refresh = add(commands, "refresh", cmd_refresh, "refresh one materialized view now")
    refresh.add_argument("name")
    refresh.add_argument("--full", action="store_true", help="recompute even if fresh")
    status = add(commands, "status", cmd_status, "state and staleness of every MV")
    add_output_option(status)
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
