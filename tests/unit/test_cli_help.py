"""`icemv --help` opens with what the tool is, then lists its commands."""

from __future__ import annotations

import re

import pytest

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


def test_version_and_the_arguments_of_mv_create_are_described(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for args in (["--version"], ["mv", "create", "--help"]):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args(args)
        assert exited.value.code == 0
    version, text = capsys.readouterr().out.split("\n", 1)
    assert re.fullmatch(r"icemv \d+\.\d+\.\d+\S*", version), version
    described = " ".join(text.split())  # help texts wrap
    for argument, help_text in (
        ("name", "name the MV's name"),
        ("--sql", "--sql SQL the view's query, in Spark SQL"),
        ("--property", "--property KEY=VALUE a view property"),
        ("--partition-by", "--partition-by EXPR a partition field of the storage table"),
    ):
        assert help_text in described, argument
