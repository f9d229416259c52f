"""The feature lists (README's table, the docs index) checked against the reference,
docs/concepts/maintained.md: every construct the reference maintains is accounted for, by the
words both lists use for it or as deliberately left out of the headline, so that a row added
to the reference fails here until the lists say it (or say why not)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAINTAINED = ROOT / "docs" / "concepts" / "maintained.md"

# (start of the reference row's construct cell, words both feature lists use for it).
# No words: a detail of a construct the lists name, left to the reference.
ROWS: list[tuple[str, tuple[str, ...]]] = [
    ("filters, projections, inner and cross joins", ("filters", "projections", "self-join")),
    ("`UNION ALL`", ("UNION ALL",)),
    ("`GROUP BY` or a global aggregate", ("GROUP BY", "COUNT", "SUM", "AVG", "STDDEV/VARIANCE")),
    ("`MIN`/`MAX`", ("MIN", "MAX")),
    ("`COUNT`/`SUM`/`AVG(DISTINCT)`", ("DISTINCT", "HAVING")),
    ("`MEDIAN`", ("MEDIAN/PERCENTILE",)),
    ("`ANY_VALUE`", ()),
    ("`GROUPING SETS`", ("GROUPING SETS",)),
    ("`WITH` (CTEs)", ()),
    ("a filter or projection over an aggregate subquery", ()),
    ("`SELECT DISTINCT`", ("DISTINCT",)),
    ("`ORDER BY` without `LIMIT`", ()),
    ("`LATERAL VIEW [OUTER]", ()),
    ("`LEFT`/`RIGHT`/`FULL` equi-joins, window functions", ("outer joins", "windows")),
    ("tables the key class does not cover", ("LEFT JOIN chains on different keys",)),
    ("an outer join whose NULL-padded rows", ()),
    ("the padded side of an outer join", ()),
    ("subqueries over tables read whole", ("EXISTS",)),
    ("an aggregate whose output lacks a group key", ()),
    ("`UNION` (at the root", ("UNION",)),
    ("`INTERSECT`, `EXCEPT`", ("INTERSECT", "EXCEPT")),
    ("`a NOT IN (SELECT x ...)`", ("[NOT] IN",)),
    ("subqueries in the `WHERE` with no key class", ("scalar subqueries",)),
    ("`ORDER BY ... LIMIT n` (top-N)", ("top-N",)),
]
NOT_YET = "a `LATERAL` subquery, other aggregates"


def _constructs() -> list[str]:
    lines = [line for line in MAINTAINED.read_text().splitlines() if line.startswith("| ")]
    return [line.split(" | ")[0].removeprefix("| ") for line in lines[1:]]  # header dropped


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _readme_list() -> str:
    (row,) = [
        line
        for line in (ROOT / "README.md").read_text().splitlines()
        if line.startswith("| **Incremental refresh** |")
    ]
    return row


def _index_list() -> str:
    text = (ROOT / "docs" / "index.md").read_text()
    start = text.index("- **Incremental refresh**")
    end = text.index("\n- **", start + 1)
    return _flat(text[start:end])


def _unclaimed(constructs: list[str]) -> list[str]:
    """The maintained constructs (all rows but the last, "not yet") ROWS does not name."""
    return [c for c in constructs[:-1] if not any(c.startswith(s) for s, _ in ROWS)]


def test_every_reference_row_is_accounted_for() -> None:
    constructs = _constructs()
    assert constructs[-1].startswith(NOT_YET), constructs[-1]
    unclaimed = _unclaimed(constructs)
    assert not unclaimed, f"rows of maintained.md no feature list accounts for: {unclaimed}"
    gone = [s for s, _ in ROWS if not any(c.startswith(s) for c in constructs)]
    assert not gone, f"rows no longer in maintained.md: {gone}"


def test_both_feature_lists_name_what_the_reference_maintains() -> None:
    for name, listed in (("README.md", _readme_list()), ("docs/index.md", _index_list())):
        missing = [word for _, words in ROWS for word in words if word not in listed]
        assert not missing, f"{name}'s incremental-refresh list lacks {missing}"


def test_a_new_reference_row_is_caught() -> None:
    assert _unclaimed([*_constructs()[:-1], "`QUALIFY`", NOT_YET]) == ["`QUALIFY`"]
