"""Log lines stay bounded whatever a value holds (issue 12: a 5 MB field made a 5 MB line);
every line is one JSON object, the standard library's and the JVM's too (issue 16)."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from icemv.cli.errors import one_line
from icemv.config import LoggingConfig, parse_config
from icemv.engine.jvm_output import jvm_event, log4j_level, pump
from icemv.errors import ConfigError
from icemv.logs import (
    DEFAULT_LIBRARY_LEVELS,
    MAX_EXCEPTION_CHARS,
    MAX_FIELD_CHARS,
    MAX_LINE_CHARS,
    SPARK_LOGGER,
    bound_fields,
    bounded,
    configure_logging,
    logger_levels,
)


def test_long_strings_are_cut_and_say_so() -> None:
    text = bounded("x" * 5_000_000)
    assert isinstance(text, str)
    assert len(text) < MAX_FIELD_CHARS + 50 and text.endswith("[4998000 chars truncated]")
    assert bounded("short") == "short"


def test_containers_bytes_ints_and_objects_are_bounded() -> None:
    nested = bounded({"a": ["y" * 10_000] * 1000, "b": {"c": {"d": {"e": {"f": 1}}}}})
    assert isinstance(nested, dict)
    assert len(nested["a"]) == 51 and len(nested["a"][0]) < MAX_FIELD_CHARS + 50
    assert nested["b"] == {"c": {"d": {"e": "<dict>"}}}
    assert len(str(bounded(b"\x00" * 100_000))) < MAX_FIELD_CHARS + 50
    assert bounded(10**5000) == "<int of 16610 bits>"
    assert bounded(2**63) == 2**63 and bounded(None) is None and bounded(1.5) == 1.5

    class Huge:
        def __str__(self) -> str:
            return "z" * 100_000

    assert len(str(bounded(Huge()))) < MAX_FIELD_CHARS + 50


def test_many_fields_share_the_line_budget() -> None:
    event = {f"f{i}": "v" * MAX_FIELD_CHARS for i in range(100)}
    out = bound_fields(None, "info", dict(event))
    assert sum(len(k) + len(repr(v)) for k, v in out.items()) < MAX_LINE_CHARS * 2
    assert len(out) == 100


def test_tracebacks_keep_their_tail() -> None:
    out = bound_fields(None, "error", {"event": "e", "exception": "a" * 50_000 + "THE END"})
    assert len(out["exception"]) < MAX_EXCEPTION_CHARS + 50
    assert out["exception"].endswith("THE END")


@pytest.fixture
def reset_structlog() -> Iterator[None]:
    """Undo `configure_logging`: structlog, the root handler, logger levels and hooks."""
    root = logging.getLogger()
    handlers, level, hook = list(root.handlers), root.level, threading.excepthook
    names = [*DEFAULT_LIBRARY_LEVELS, SPARK_LOGGER, "icemv", "kafka.conn"]
    levels = {name: logging.getLogger(name).level for name in names}
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)
    threading.excepthook = hook
    logging.captureWarnings(False)


def json_lines(err: str) -> list[dict[str, Any]]:
    """Every line parsed; a line that is not one JSON object fails, naming it."""
    parsed = []
    for line in err.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line!r}")
        assert isinstance(value, dict), line
        parsed.append(value)
    return parsed


@pytest.mark.usefixtures("reset_structlog")
def test_configured_logging_bounds_every_call(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(LoggingConfig(format="json", level="INFO"))
    structlog.get_logger("t").warning("event_rejected", detail="q" * 5_000_000, offset=3)
    [line] = capsys.readouterr().err.splitlines()
    assert len(line) < MAX_LINE_CHARS
    assert json.loads(line)["offset"] == 3


@pytest.mark.usefixtures("reset_structlog")
def test_library_records_are_json_lines_at_their_configured_levels(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(LoggingConfig(format="json", level="INFO", levels={"kafka.conn": "INFO"}))
    logging.getLogger("kafka.conn").info("connecting to %s", "node 1")
    logging.getLogger("kafka.client").info("chatty, below the kafka default")
    logging.getLogger("apscheduler.scheduler").warning('Job "%s" said "hi"\nand more', "poll")
    logging.getLogger("icemv.x").debug("below the root level")
    structlog.get_logger("icemv.y").info("own_event", n=1)
    try:
        raise ValueError("bad")
    except ValueError:
        logging.getLogger("pyiceberg.io").exception("library failure")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("deprecated thing", DeprecationWarning, stacklevel=1)
    lines = json_lines(capsys.readouterr().err)
    assert [(line["logger"], line["event"].splitlines()[0]) for line in lines] == [
        ("kafka.conn", "connecting to node 1"),
        ("apscheduler.scheduler", 'Job "poll" said "hi"'),
        ("icemv.y", "own_event"),
        ("pyiceberg.io", "library failure"),
        ("py.warnings", lines[-1]["event"].splitlines()[0]),
    ]
    assert "deprecated thing" in lines[-1]["event"] and lines[-1]["level"] == "warning"
    assert lines[3]["exception"].endswith("ValueError: bad")
    assert all(isinstance(line["timestamp"], str) for line in lines)


@pytest.mark.usefixtures("reset_structlog")
def test_a_record_that_cannot_be_formatted_is_still_one_json_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(LoggingConfig(format="json"))
    # Straight to icemv's handler: pytest's own capture handler re-raises such errors.
    [handler] = [h for h in logging.getLogger().handlers if type(h).__name__ == "_LineHandler"]
    record = logging.LogRecord(
        "somelib", logging.WARNING, __file__, 1, "%d items", ("not a number",), None
    )
    handler.handle(record)
    [line] = json_lines(capsys.readouterr().err)
    assert line["event"] == "log_record_unformattable"
    assert (line["logger"], line["msg"], line["record_level"]) == ("somelib", "%d items", "WARNING")


@pytest.mark.usefixtures("reset_structlog")
def test_a_thread_that_dies_leaves_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(LoggingConfig(format="json"))

    def die() -> None:
        raise RuntimeError("worker broke")

    # pytest swaps threading.excepthook per test; call the one icemv installed.
    hook = threading.excepthook
    try:
        die()
    except RuntimeError as exc:
        thread = threading.Thread(name="worker")
        hook(threading.ExceptHookArgs((RuntimeError, exc, exc.__traceback__, thread)))
    [line] = json_lines(capsys.readouterr().err)
    assert line["event"] == "thread_failed" and line["thread"] == "worker"
    assert line["exception"].endswith("RuntimeError: worker broke")


def test_library_defaults_never_undercut_the_root_level_and_yield_to_levels() -> None:
    levels = logger_levels(LoggingConfig(level="DEBUG"))
    assert levels["kafka"] == levels["apscheduler"] == logging.WARNING
    assert levels[SPARK_LOGGER] == logging.WARNING
    levels = logger_levels(LoggingConfig(level="ERROR", spark_level="INFO"))
    assert levels["kafka"] == logging.ERROR and levels[SPARK_LOGGER] == logging.INFO
    levels = logger_levels(LoggingConfig(level="ERROR", levels={"kafka": "DEBUG"}))
    assert levels["kafka"] == logging.DEBUG and levels["py4j"] == logging.ERROR


def test_level_names_are_checked_and_spelt_freely() -> None:
    config = parse_config(
        {"logging": {"level": "debug", "spark_level": "WARN", "levels": {"kafka": "Info"}}}
    )
    assert config.logging.level == "DEBUG"
    assert config.logging.spark_level == "WARNING"
    assert config.logging.levels == {"kafka": "INFO"}
    with pytest.raises(ConfigError) as failure:
        parse_config({"logging": {"levels": {"kafka": "LOUD"}}})
    assert one_line(str(failure.value)) == (
        "invalid configuration: logging.levels.kafka: "
        "Input should be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'"
    )
    with pytest.raises(ConfigError, match=r"logging\.spark_level"):
        parse_config({"logging": {"spark_level": "chatty"}})
    with pytest.raises(ConfigError, match=r"logging\.levels: .*empty"):
        parse_config({"logging": {"levels": {" ": "INFO"}}})


def test_jvm_lines_become_events() -> None:
    record = {
        "level": "ERROR",
        "logger": "org.apache.spark.executor.Executor",
        "thread": "Executor task launch worker",
        "message": 'Exception in task 0.0\n"quoted"',
        "exception": "java.lang.RuntimeException: boom\n\tat X.y(X.java:1)",
    }
    level, event, fields = jvm_event(json.dumps(record) + "\n") or (0, "", {})
    assert (level, event) == (logging.ERROR, "jvm_log")
    assert fields["java_logger"] == record["logger"]
    assert fields["message"] == record["message"]
    assert fields["exception"] == record["exception"]
    level, event, fields = jvm_event(json.dumps({**record, "exception": ""})) or (0, "", {})
    assert "exception" not in fields
    assert jvm_event('{"level":"FATAL","message":"m"}') == (
        logging.CRITICAL,
        "jvm_log",
        {"message": "m", "java_logger": None, "thread": None},
    )
    assert jvm_event("Setting default log level to WARN.\n") == (
        logging.WARNING,
        "jvm_output",
        {"message": "Setting default log level to WARN."},
    )
    assert jvm_event("{not json") == (logging.WARNING, "jvm_output", {"message": "{not json"})
    assert jvm_event("   \r\n") is None
    assert [log4j_level(name) for name in ("WARNING", "CRITICAL", "DEBUG")] == [
        "WARN",
        "FATAL",
        "DEBUG",
    ]


def test_the_jvm_pipe_is_drained_even_when_emitting_fails() -> None:
    emitted: list[tuple[int, str, dict[str, object]]] = []

    def emit(level: int, event: str, fields: dict[str, object]) -> None:
        if fields.get("message") == "poison":
            raise OSError("stderr closed")
        emitted.append((level, event, fields))

    stream = io.BytesIO(b"poison\n" + b"x" * 200_000 + b"\n\xff tail\n")
    pump(stream, emit)
    assert stream.read() == b""
    messages = [str(fields["message"]) for _, _, fields in emitted]
    assert "".join(messages[:-1]) == "x" * 200_000 and len(messages) > 2
    assert messages[-1] == "\ufffd tail"


@pytest.mark.usefixtures("reset_structlog")
def test_skipped_poll_lines_are_not_logged(capsys: pytest.CaptureFixture[str]) -> None:
    """APScheduler's per-interval "maximum number of running instances" warning is dropped
    from the reconciler's scheduler; its other records still come through."""
    from apscheduler.events import EVENT_JOB_MAX_INSTANCES
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.interval import IntervalTrigger

    from icemv.service import poller

    configure_logging(LoggingConfig(format="json", levels={"apscheduler": "INFO"}))
    jobs = BackgroundScheduler(daemon=True, logger=poller.JOBS_LOGGER)
    done = threading.Event()
    skipped: list[object] = []

    def slow() -> None:
        time.sleep(0.5)
        done.set()

    jobs.add_listener(skipped.append, EVENT_JOB_MAX_INSTANCES)
    jobs.add_job(slow, IntervalTrigger(seconds=0.05), id="poll", max_instances=1, coalesce=True)
    jobs.start()
    try:
        deadline = time.monotonic() + 10
        while (not done.is_set() or len(skipped) < 2) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        jobs.shutdown(wait=False)
    assert len(skipped) >= 2, "the job never overran"
    lines = json_lines(capsys.readouterr().err)
    assert any(line["event"].startswith("Added job") for line in lines)
    assert not any("maximum number of running instances" in line["event"] for line in lines)
