"""`icemv` command line: parse, load the configuration, run one command, report in one line."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence

from icemv.cli.errors import one_line, runtime_message, user_errors
from icemv.cli.parser import build_parser
from icemv.config import load_config
from icemv.logs import configure_logging


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
        user_error = isinstance(exc, user_errors())
        if args.debug:
            traceback.print_exc()
        message = one_line(str(exc)) if user_error else runtime_message(exc)
        print(f"icemv: error: {message}", file=sys.stderr)
        return 2 if user_error else 1


if __name__ == "__main__":
    sys.exit(main())
