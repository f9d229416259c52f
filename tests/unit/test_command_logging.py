"""Output by audience (issue 27): `icemv run` logs as configured; every other command logs
at WARNING (INFO with --verbose, DEBUG with --debug), the Spark JVM's and libraries' lines
too, as text for a person at a terminal and JSON otherwise or when configured."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from icemv.config import LoggingConfig
from icemv.engine.jvm_output import pump
from icemv.logs import (
    SPARK_LOGGER,
    command_logging,
    configure_logging,
    console_style,
    json_lines_to,
)

ANSI = "\x1b["


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level, hook = list(root.handlers), root.level, threading.excepthook
    named = dict(logging.root.manager.loggerDict)
    levels = {n: lg.level for n, lg in named.items() if isinstance(lg, logging.Logger)}
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)
    threading.excepthook = hook
    logging.captureWarnings(False)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("format", "tty", "style"),
    [
        ("auto", True, "colour"),
        ("auto", False, "json"),
        ("json", True, "json"),
        ("json", False, "json"),
        ("console", True, "colour"),
        ("console", False, "console"),
    ],
)
def test_the_style_follows_the_format_and_the_terminal(format: str, tty: bool, style: str) -> None:
    assert console_style(LoggingConfig(format=format), tty) == style  # type: ignore[arg-type]


def test_a_command_logs_at_warning_unless_verbose_or_debug() -> None:
    configured = LoggingConfig(
        level="DEBUG",
        spark_level="INFO",
        levels={"sqlalchemy.engine": "INFO", "icemv.x": "ERROR"},
        format="json",
    )
    quiet = command_logging(configured, verbose=False, debug=False)
    assert (quiet.level, quiet.spark_level, quiet.format) == ("WARNING", "WARNING", "json")
    assert quiet.levels == {"sqlalchemy.engine": "WARNING", "icemv.x": "ERROR"}
    verbose = command_logging(configured, verbose=True, debug=False)
    assert (verbose.level, verbose.spark_level) == ("INFO", "INFO")
    assert verbose.levels == {"sqlalchemy.engine": "INFO", "icemv.x": "ERROR"}
    debug = command_logging(configured, verbose=True, debug=True)
    assert (debug.level, debug.spark_level) == ("DEBUG", "INFO")  # never below the config's
    # An untouched level stays unset (the demo quiets Spark unless the config names it).
    assert (
        "spark_level"
        not in command_logging(LoggingConfig(), verbose=True, debug=False).model_fields_set
    )


def _emit_one_of_each() -> None:
    structlog.get_logger("icemv.catalog.embedded.server").info("embedded_postgres.started")
    logging.getLogger("sqlalchemy.engine.Engine").info("select 1")
    pump(io.BytesIO(b'{"level": "INFO", "message": "Running Spark", "logger": "o.a.s"}\n'))
    structlog.get_logger("icemv.cli").warning("something_odd", n=1)
    pump(io.BytesIO(b'{"level": "WARN", "message": "slow", "logger": "o.a.s"}\n'))


def test_at_default_verbosity_only_warnings_reach_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configured = LoggingConfig(level="DEBUG", spark_level="INFO", levels={"sqlalchemy": "INFO"})
    configure_logging(command_logging(configured, verbose=False, debug=False))
    _emit_one_of_each()
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = [json.loads(line) for line in captured.err.splitlines()]  # not a terminal: JSON
    assert [(line["logger"], line["level"]) for line in lines] == [
        ("icemv.cli", "warning"),
        (SPARK_LOGGER, "warning"),
    ]


def test_verbose_adds_info_of_icemv_libraries_and_spark(capsys: pytest.CaptureFixture[str]) -> None:
    configured = LoggingConfig(spark_level="INFO", levels={"sqlalchemy": "INFO"})
    configure_logging(command_logging(configured, verbose=True, debug=False))
    _emit_one_of_each()
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [line["logger"] for line in lines] == [
        "icemv.catalog.embedded.server",
        "sqlalchemy.engine.Engine",
        SPARK_LOGGER,
        "icemv.cli",
        SPARK_LOGGER,
    ]


def test_a_terminal_gets_coloured_text_and_a_pipe_plain_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    configure_logging(command_logging(LoggingConfig(), verbose=False, debug=False))
    structlog.get_logger("icemv.cli").warning("something_odd", n=1)
    text = terminal.getvalue()
    assert "something_odd" in text and ANSI in text and not text.startswith("{")

    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    configure_logging(command_logging(LoggingConfig(format="console"), verbose=False, debug=False))
    structlog.get_logger("icemv.cli").warning("something_odd", n=1)
    assert "something_odd" in pipe.getvalue() and ANSI not in pipe.getvalue()

    json_terminal = Terminal()
    monkeypatch.setattr("sys.stderr", json_terminal)
    configure_logging(command_logging(LoggingConfig(format="json"), verbose=False, debug=False))
    structlog.get_logger("icemv.cli").warning("something_odd", n=1)
    assert json.loads(json_terminal.getvalue())["event"] == "something_odd"


def test_a_json_file_gets_the_daemon_lines_while_stderr_keeps_its_level(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`icemv demo`: its daemon's INFO lines to a file, only warnings on stderr."""
    daemon = LoggingConfig(spark_level="ERROR")
    configure_logging(command_logging(LoggingConfig(), verbose=False, debug=False))
    path = tmp_path / "demo.log"
    with json_lines_to(path, daemon):
        structlog.get_logger("icemv.service.daemon").info("refresh", mv="nyc.pickup_agg")
        structlog.get_logger("icemv.service.daemon").debug("below_info")
        logging.getLogger("pyiceberg.io").info("library chatter")
        structlog.get_logger("icemv.cli").warning("something_odd")
    structlog.get_logger("icemv.service.daemon").info("after_the_file")
    in_file = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["event"] for line in in_file] == ["refresh", "something_odd"]
    on_stderr = [json.loads(line)["event"] for line in capsys.readouterr().err.splitlines()]
    assert on_stderr == ["something_odd"]
