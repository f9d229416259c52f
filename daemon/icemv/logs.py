"""structlog setup: JSON lines for machines, readable console output for a terminal.

Who reads stderr decides what goes there. `icemv run` (a service: its lines go to a log
collector) logs as `logging` configures it. Every other command is run by a person or a
script that wants its result on stdout: it logs at WARNING, INFO with `--verbose`, DEBUG
with `--debug` (`command_logging`), and no logger, a library's or the Spark JVM's
(`spark`), says anything below that. Either way lines are JSON with format `json`, or
with `auto` when stderr is not a terminal, else rendered for people (`console_style`),
in colour only on a terminal.

One handler on the root logger writes every line: icemv's own structlog events and the
standard library's records of every library (APScheduler, kafka-python, py4j, pyiceberg,
urllib3, Python warnings) go through the same structlog processors, so with format `json`
every line on stderr is one JSON object. Each line is one write under the handler's lock,
so lines of different threads never interleave. (The Spark JVM's output joins them through
`icemv.engine.jvm_output`.)

Every log call passes `bound_fields`, so no value can make a huge log line: values often
come from outside (event fields, names, error messages quoting them), and one 5 MB event
field once made a 5 MB line.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TextIO, cast

import structlog

from icemv.config import LoggingConfig

# Libraries that talk a lot at INFO: at least WARNING (or `logging.level` if higher) unless
# `logging.levels` names them.
DEFAULT_LIBRARY_LEVELS: dict[str, int] = {
    "apscheduler": logging.WARNING,
    "botocore": logging.WARNING,
    "kafka": logging.WARNING,
    "pgserver": logging.WARNING,
    "py4j": logging.WARNING,
    "pyiceberg": logging.WARNING,
    "urllib3": logging.WARNING,
}
# The logger the Spark JVM's lines are re-emitted by; its level follows `spark_level`.
SPARK_LOGGER = "spark"

# One field's text; a whole line's (the sum of its fields); a traceback keeps its tail.
MAX_FIELD_CHARS = 2_000
MAX_LINE_CHARS = 16_000
MAX_EXCEPTION_CHARS = 8_000
# Items kept of a list or mapping, and how deep nested ones are followed.
MAX_ITEMS = 50
MAX_DEPTH = 4
# Fields that get a share of the line budget no smaller than this, however many there are.
MIN_FIELD_CHARS = 64


def truncated(text: str, limit: int, *, keep_tail: bool = False) -> str:
    """`text` cut to about `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    if keep_tail:
        return f"[{cut} chars truncated]...{text[-limit:]}"
    return f"{text[:limit]}...[{cut} chars truncated]"


def bounded(value: object, limit: int = MAX_FIELD_CHARS, depth: int = 0) -> object:
    """`value` with every string cut to `limit`, containers to `MAX_ITEMS` items, nesting to
    `MAX_DEPTH`, and anything unusual rendered as bounded text."""
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        # A huge int's str() costs quadratic time (and Python refuses > 4300 digits).
        return value if value.bit_length() <= 256 else f"<int of {value.bit_length()} bits>"
    if isinstance(value, str):
        return truncated(value, limit)
    if isinstance(value, bytes | bytearray):
        return truncated(repr(bytes(value[: limit + 1])), limit)
    if depth >= MAX_DEPTH:
        return truncated(f"<{type(value).__name__}>", limit)
    if isinstance(value, Mapping):
        items = list(value.items())
        out: dict[str, object] = {
            truncated(str(k), MIN_FIELD_CHARS * 2): bounded(v, limit, depth + 1)
            for k, v in items[:MAX_ITEMS]
        }
        if len(items) > MAX_ITEMS:
            out["..."] = f"{len(items) - MAX_ITEMS} more"
        return out
    if isinstance(value, list | tuple | set | frozenset):
        members = list(value)
        kept = [bounded(v, limit, depth + 1) for v in members[:MAX_ITEMS]]
        if len(members) > MAX_ITEMS:
            kept.append(f"... {len(members) - MAX_ITEMS} more")
        return kept
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 (a broken __str__ must not lose the log line)
        text = f"<unprintable {type(value).__name__}>"
    return truncated(text, limit)


def bound_fields(
    logger: object, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: bound each field, then share the line budget if still too long."""
    exception = event_dict.pop("exception", None)
    fields = {str(k): bounded(v) for k, v in event_dict.items()}
    if sum(len(k) + len(repr(v)) for k, v in fields.items()) > MAX_LINE_CHARS:
        share = max(MIN_FIELD_CHARS, MAX_LINE_CHARS // max(1, len(fields)))
        fields = {k: bounded(v, share) for k, v in fields.items()}
    if exception is not None:
        fields["exception"] = truncated(str(exception), MAX_EXCEPTION_CHARS, keep_tail=True)
    event_dict.clear()
    event_dict.update(fields)
    return event_dict


class _CurrentStderr:
    """Whatever `sys.stderr` is when a line is written, not when logging was configured.

    A caller that redirects or closes stderr later (an embedding application, a test
    harness capturing output) must not leave icemv writing to a stale, closed stream.
    """

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class _LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The one handler icemv installs on the root logger (found again on reconfiguration).

    A record that cannot be formatted (a library's broken %-arguments) becomes one
    `log_record_unformattable` line, not logging's multi-line "--- Logging error ---".
    """

    def handleError(self, record: logging.LogRecord) -> None:
        line = {
            "event": "log_record_unformattable",
            "level": "error",
            "logger": record.name,
            "record_level": record.levelname,
            "msg": bounded(record.msg),
        }
        try:
            self.stream.write(json.dumps(line, default=str) + self.terminator)
            self.flush()
        except Exception:  # noqa: BLE001 (nowhere left to report it)
            pass


def level_number(name: str) -> int:
    number = logging.getLevelName(name)
    if not isinstance(number, int):
        raise ValueError(f"unknown log level {name!r}")
    return number


def logger_levels(config: LoggingConfig) -> dict[str, int]:
    """The level of each named logger: library defaults (never below `level`), then
    `spark` at `spark_level`, then `levels` as given."""
    root = level_number(config.level)
    levels = {name: max(root, default) for name, default in DEFAULT_LIBRARY_LEVELS.items()}
    levels[SPARK_LOGGER] = level_number(config.spark_level)
    levels.update({name: level_number(value) for name, value in config.levels.items()})
    return levels


Style = Literal["json", "console", "colour"]


def console_style(config: LoggingConfig, tty: bool) -> Style:
    """How lines on stderr look: JSON for `json` (and `auto` off a terminal), else text for
    people, coloured only when stderr is a terminal (`tty`)."""
    if config.format == "json" or (config.format == "auto" and not tty):
        return "json"
    return "colour" if tty else "console"


def command_logging(config: LoggingConfig, *, verbose: bool, debug: bool) -> LoggingConfig:
    """The logging of a command other than `icemv run`: WARNING, INFO when `verbose`, DEBUG
    when `debug`; the Spark JVM's lines and every logger named in `levels` no lower than
    that. The format stays the configured one."""
    level = "DEBUG" if debug else "INFO" if verbose else "WARNING"
    floor = level_number(level)

    def at_least(name: str) -> str:
        return name if level_number(name) >= floor else level

    update: dict[str, Any] = {"level": level}
    if at_least(config.spark_level) != config.spark_level:
        update["spark_level"] = level
    levels = {name: at_least(value) for name, value in config.levels.items()}
    if levels != config.levels:
        update["levels"] = levels
    return config.model_copy(update=update)


_SHARED: list[structlog.typing.Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def _formatter(style: Style) -> logging.Formatter:
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if style == "json"
        else structlog.dev.ConsoleRenderer(colors=style == "colour")
    )
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_SHARED,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            bound_fields,
            renderer,
        ],
    )


def configure_logging(config: LoggingConfig) -> bool:
    """Set up logging for the process; whether its lines are JSON."""
    style = console_style(config, sys.stderr.isatty())
    handler = _LineHandler(cast(TextIO, _CurrentStderr()))
    handler.setFormatter(_formatter(style))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _LineHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_number(config.level))
    for name, level in logger_levels(config).items():
        logging.getLogger(name).setLevel(level)
    logging.captureWarnings(True)
    threading.excepthook = _log_thread_exception
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_SHARED,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    return style == "json"


@contextmanager
def json_lines_to(path: Path, config: LoggingConfig) -> Iterator[None]:
    """Also write JSON lines to `path` (truncated), at `config`'s levels, while inside.

    Needs `configure_logging` first. stderr keeps its root level (as its handler's level)
    and each logger gets the lower of its two levels, so a logger the two set differently
    (the file's `spark` at ERROR, stderr's at WARNING) writes down to the lower level on
    both sides.
    """
    root = logging.getLogger()
    console = [h for h in root.handlers if isinstance(h, _LineHandler)]
    file_levels = {"": level_number(config.level), **logger_levels(config)}
    saved = {name: logging.getLogger(name or None).level for name in file_levels}
    saved_handlers = {h: h.level for h in console}
    for h in console:
        h.setLevel(max(h.level, root.level))
    handler = _LineHandler(path.open("w", encoding="utf-8"))
    handler.setFormatter(_formatter("json"))
    handler.setLevel(file_levels[""])
    for name, level in file_levels.items():
        logger = logging.getLogger(name or None)
        logger.setLevel(min(logger.getEffectiveLevel(), level))
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
        for name, level in saved.items():
            logging.getLogger(name or None).setLevel(level)
        for h, level in saved_handlers.items():
            h.setLevel(level)


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    """A thread's uncaught exception as one log line, not a bare traceback on stderr."""
    if args.exc_type is SystemExit:
        return
    thread = args.thread.name if args.thread is not None else None
    structlog.get_logger("icemv.threads").error(
        "thread_failed",
        thread=thread,
        exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback),
    )
