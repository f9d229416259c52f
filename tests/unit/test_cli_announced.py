"""Long commands (`mv create`, `refresh`, `mv verify`) say when they start and end, with the
time taken, on a terminal's stderr only."""

from __future__ import annotations

import io
import re

import pytest

from icemv.cli.output import announced


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_start_and_an_end_line(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with announced("refreshing sales.daily"):
        pass
    lines = terminal.getvalue().splitlines()
    assert lines[0] == "icemv: refreshing sales.daily ..."
    assert re.fullmatch(r"icemv: refreshing sales\.daily: done in \d+\.\d s", lines[1]), lines


def test_a_pipe_gets_nothing_and_a_failure_no_end_line(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    with announced("verifying x.y"):
        pass
    assert pipe.getvalue() == ""
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with pytest.raises(RuntimeError), announced("verifying x.y"):
        raise RuntimeError("boom")
    assert terminal.getvalue() == "icemv: verifying x.y ...\n"
