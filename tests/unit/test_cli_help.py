"""`icemv --help` opens with what the tool is, then lists its commands."""

from __future__ import annotations

import re

from icemv.cli.parser import build_parser


def test_help_opens_with_a_one_line_description_and_lists_every_command() -> None:
    text = build_parser().format_help()
    paragraphs = text.split("\n\n")
    assert paragraphs[0].startswith("usage: icemv")
    assert (
        paragraphs[1]
        == ("icemv keeps Apache Iceberg materialized views fresh, incrementally.\n").strip()
    )
    assert "argument parser" not in text  # not the module's docstring
    for command in ("config", "mv", "refresh", "status", "apply", "run", "emit", "demo"):
        assert re.search(rf"^\s+{command}\s+\S", text, re.M), command
    assert "icemv demo" in text
