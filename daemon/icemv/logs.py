"""structlog setup: JSON lines for machines, readable console output for a terminal."""

from __future__ import annotations

import logging
import sys

import structlog

from icemv.config import LoggingConfig


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
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
