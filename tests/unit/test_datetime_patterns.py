"""Spark's date-time patterns as DuckDB's strftime formats (sql/datetime_patterns.py):
the letters both print alike, quoted text, and refusals for the rest."""

from __future__ import annotations

import pytest

from icemv.sql.datetime_patterns import strftime_of
from icemv.sql.regex import Untranslatable


@pytest.mark.parametrize(
    ("pattern", "text", "year"),
    [
        ("yyyy-MM-dd", "%Y-%m-%d", True),
        ("yyyy-MM-dd'T'HH:mm:ss.SSS", "%Y-%m-%dT%H:%M:%S.%g", True),
        ("MMM d, yy", "%b %-d, %y", True),
        ("h:mm a", "%-I:%M %p", False),
        ("EEEE DDD SSSSSS", "%A %j %f", False),
        ("'it''s' 100%", "it's 100%%", False),
        ("''", "'", False),
    ],
)
def test_admitted_letters_translate(pattern: str, text: str, year: bool) -> None:
    translated = strftime_of(pattern)
    assert (translated.text, translated.year) == (text, year)


@pytest.mark.parametrize(
    "pattern", ["YYYY", "ww", "u", "z", "XXX", "G", "Q", "yyy", "MMMMM", "SS", "[HH]", "'open", ""]
)
def test_other_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(Untranslatable):
        strftime_of(pattern)
