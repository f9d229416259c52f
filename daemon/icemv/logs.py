"""structlog setup: JSON lines for machines, readable console output for a terminal.

Every log call passes `bound_fields`, so no value can make a huge log line: values often
come from outside (event fields, names, error messages quoting them), and one 5 MB event
field once made a 5 MB line.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO, cast

import structlog

from icemv.config import LoggingConfig

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


def configure_logging(config: LoggingConfig) -> None:
    use_json = config.format == "json" or (config.format == "auto" and not sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    )
    level = logging.getLevelName(config.level)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(message)s")
    # Chatty libraries stay at warning unless asked for debug.
    for name in ("py4j", "kafka", "apscheduler", "pyiceberg"):
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            bound_fields,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _CurrentStderr())),
        cache_logger_on_first_use=False,
    )
