"""`icemv` command line: parse, load the configuration, run one command, report in one line.

stdout carries only the command's result; log lines go to stderr (`icemv.logs` says at
which level and in which form for `icemv run` and for every other command).
"""

from __future__ import annotations

import sys
import traceback
import warnings
from collections.abc import Sequence

import structlog

from icemv.cli.commands import cmd_run
from icemv.cli.errors import one_line, runtime_message, user_errors
from icemv.cli.parser import build_parser
from icemv.config import load_config
from icemv.logs import command_logging, configure_logging


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 on success, 2 for a usage or definition error, 1 for a runtime failure.

    Every error is one line on stderr; `--debug` adds the traceback.
    """
    args = build_parser().parse_args(argv)
    args.debug = bool(getattr(args, "debug", False))
    args.verbose = bool(getattr(args, "verbose", False))
    # The daemon logging JSON says its last word as a log event too: every line is JSON.
    json_daemon = False
    try:
        with warnings.catch_warnings(record=True) as deprecated:
            warnings.simplefilter("always", FutureWarning)
            config = load_config(args.config)
        if args.handler is cmd_run:
            json_daemon = configure_logging(config.logging)
        else:
            configure_logging(
                command_logging(config.logging, verbose=args.verbose, debug=args.debug)
            )
        # A deprecated setting: one log line (JSON for a JSON daemon), not Python's warning
        # with the path of the library that raised it.
        for warning in deprecated:
            if issubclass(warning.category, FutureWarning):
                log = structlog.get_logger("icemv.config")
                log.warning("deprecated_setting", detail=str(warning.message))
            else:
                warnings.warn_explicit(
                    warning.message, warning.category, warning.filename, warning.lineno
                )
        result: int = args.handler(config, args)
        return result
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the CLI's last word: one line, exit 1 or 2
        user_error = isinstance(exc, user_errors())
        message = one_line(str(exc)) if user_error else runtime_message(exc)
        code = 2 if user_error else 1
        if json_daemon:
            log = structlog.get_logger("icemv.cli.main")
            log.error("daemon_failed", error=message, exit_code=code, exc_info=args.debug)
            return code
        if args.debug:
            traceback.print_exc()
        print(f"icemv: error: {message}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
