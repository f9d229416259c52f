"""Log lines stay bounded whatever a value holds (issue 12: a 5 MB field made a 5 MB line)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import structlog

from icemv.config import LoggingConfig
from icemv.logs import (
    MAX_EXCEPTION_CHARS,
    MAX_FIELD_CHARS,
    MAX_LINE_CHARS,
    bound_fields,
    bounded,
    configure_logging,
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
    yield
    structlog.reset_defaults()


@pytest.mark.usefixtures("reset_structlog")
def test_configured_logging_bounds_every_call(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(LoggingConfig(format="json", level="INFO"))
    structlog.get_logger("t").warning("event_rejected", detail="q" * 5_000_000, offset=3)
    [line] = capsys.readouterr().err.splitlines()
    assert len(line) < MAX_LINE_CHARS
    assert json.loads(line)["offset"] == 3
