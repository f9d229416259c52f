"""What the Spark driver JVM writes, re-emitted as log events of logger `spark`.

The JVM's stdout and stderr are one pipe, read by a thread here, so nothing the JVM
prints reaches the terminal or the container log as raw text. Its log4j events arrive as
one JSON object per line (`log4j2.properties` next to this module) and keep their level,
logger and exception; any other line (a JVM crash, a Python worker's output, Ivy's
download report) becomes a `jvm_output` event at WARNING.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import structlog

from icemv.logs import SPARK_LOGGER

LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
# Java's level names; TRACE and FATAL have no Python twin.
JVM_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}
# A longer line is read (and re-emitted) in pieces, so one line cannot fill the memory.
MAX_READ_BYTES = 64 * 1024

Emit = Callable[[int, str, dict[str, object]], None]


def log4j_level(python_level: str) -> str:
    """The log4j name of a configured level (WARNING is WARN, CRITICAL is FATAL)."""
    return {"WARNING": "WARN", "CRITICAL": "FATAL"}.get(python_level, python_level)


def jvm_event(line: str) -> tuple[int, str, dict[str, object]] | None:
    """Level, event name and fields of one line the JVM wrote; None for a blank line."""
    text = line.rstrip("\r\n")
    if not text.strip():
        return None
    if text.startswith("{"):
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if isinstance(record, dict) and {"level", "message"} <= record.keys():
            fields: dict[str, object] = {
                "message": record["message"],
                "java_logger": record.get("logger"),
                "thread": record.get("thread"),
            }
            if record.get("exception"):
                fields["exception"] = record["exception"]
            level = JVM_LEVELS.get(str(record["level"]), logging.WARNING)
            return level, "jvm_log", fields
    return logging.WARNING, "jvm_output", {"message": text}


def _emit(level: int, event: str, fields: dict[str, object]) -> None:
    structlog.get_logger(SPARK_LOGGER).log(level, event, **fields)


def pump(stream: IO[bytes], emit: Emit = _emit) -> None:
    """Re-emit every line of `stream` until it ends; the pipe is always drained, even
    when emitting fails, or the JVM would block writing to it."""
    for chunk in iter(lambda: stream.readline(MAX_READ_BYTES), b""):
        try:
            parsed = jvm_event(chunk.decode("utf-8", errors="replace"))
            if parsed is not None:
                emit(*parsed)
        except Exception:  # noqa: BLE001 (logging trouble must not stop the draining)
            continue


def start_pump(stream: IO[bytes]) -> threading.Thread:
    thread = threading.Thread(target=pump, args=(stream,), name="icemv-jvm-output", daemon=True)
    thread.start()
    return thread
