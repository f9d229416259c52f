"""GROUPING SETS / ROLLUP / CUBE as a union of groupings: the analysis, the hidden grouping
id, and the touched groups of every grouping set (golden SQL). No JVM."""

from __future__ import annotations

import pytest
from sqlglot import exp

from icemv.refresh.patch.aggregates import touched_groupings
from icemv.sql.analysis import AggregateAnalysis, NotMaintainable, analyse
from icemv.sql.names import key_column
from icemv.sql.state import GROUPING, aggregate_state, state_query
from tests.unit.sources import Sources

SOURCES = Sources(tables={"nyc.trips": ("id", "vendor", "fare", "day")})


def _analysis(sql: str) -> AggregateAnalysis:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert isinstance(analysis, AggregateAnalysis), analysis
    return analysis


@pytest.mark.parametrize(
    ("group_by", "keys"),
    [
        ("ROLLUP(vendor, day)", ["vendor", "day"]),
        ("CUBE(vendor, day)", ["vendor", "day"]),
        ("GROUPING SETS ((vendor, day), (day), ())", ["vendor", "day"]),
        ("vendor, day WITH ROLLUP", ["vendor", "day"]),
        ("vendor, ROLLUP(day, id)", ["vendor", "day", "id"]),
    ],
)
def test_every_grouping_expression_is_a_key(group_by: str, keys: list[str]) -> None:
    columns = ", ".join(dict.fromkeys(["vendor", "day", *keys]))
    analysis = _analysis(f"SELECT {columns}, count(*) AS n FROM trips GROUP BY {group_by}")
    assert analysis.grouping_sets
    assert [analysis.output_columns[k.position] for k in analysis.keys] == keys
    assert analysis.aggregate_strategy(with_deletes=False, stateful=True) == "recompute-groups"


def test_the_grouping_id_is_hidden_state_first() -> None:
    analysis = _analysis(
        "SELECT vendor, day, sum(fare) AS s, grouping(day) AS gd FROM trips "
        "GROUP BY ROLLUP(vendor, day)"
    )
    assert [a.func for a in analysis.aggregates] == ["sum", "grouping"]
    state = aggregate_state(analysis)
    assert [(c.name, c.role) for c in state] == [
        (GROUPING, "grouping"),
        ("_icemv_rows", "rows"),
        ("_icemv_count_s", "count"),
    ]
    assert (
        state_query(analysis, state)
        .sql(dialect="spark")
        .endswith(
            "GROUPING_ID() AS `_icemv_grouping`, COUNT(*) AS `_icemv_rows`, "
            "COUNT(`trips`.`fare`) AS `_icemv_count_s` FROM `lake`.`nyc`.`trips` AS `trips` "
            "GROUP BY ROLLUP (`trips`.`vendor`, `trips`.`day`)"
        )
    )


def test_a_plain_group_by_has_no_grouping_id() -> None:
    analysis = _analysis("SELECT vendor, sum(fare) AS s FROM trips GROUP BY vendor")
    assert not analysis.grouping_sets
    assert GROUPING not in [c.name for c in aggregate_state(analysis)]


def test_touched_groups_are_the_views_grouping_sets_over_the_touched_keys() -> None:
    analysis = _analysis(
        "SELECT day, vendor, count(*) AS n FROM trips GROUP BY GROUPING SETS ((vendor, day), ())"
    )
    keys = exp.select(exp.column(key_column(0)), exp.column(key_column(1))).from_("delta")
    outputs = ["day", "vendor", "n", GROUPING, "_icemv_rows"]
    assert touched_groupings(analysis, keys, outputs).sql(dialect="spark") == (
        "SELECT `__icemv_k0`, `__icemv_k1`, GROUPING_ID() AS `_icemv_grouping` "
        "FROM (SELECT __icemv_k0, __icemv_k1 FROM delta) AS `d` "
        "GROUP BY GROUPING SETS ((`__icemv_k1`, `__icemv_k0`), ())"
    )


@pytest.mark.parametrize(
    "sql",
    [
        # Not the view's own GROUP BY: the union of groupings feeds another query.
        "SELECT id, vendor FROM trips WHERE id IN (SELECT count(*) FROM trips "
        "GROUP BY ROLLUP(vendor))",
        # A grouping key missing from the output: its groups cannot be told apart.
        "SELECT vendor, count(*) AS n FROM trips GROUP BY ROLLUP(vendor, day)",
    ],
)
def test_what_stays_full(sql: str) -> None:
    assert isinstance(analyse(SOURCES, sql, ("nyc",)), NotMaintainable)


@pytest.mark.parametrize(
    ("group_by", "repeated"),
    [
        ("GROUPING SETS ((vendor), (vendor), ())", "vendor"),
        ("vendor, ROLLUP(vendor)", "vendor"),
        ("CUBE(vendor, vendor)", "vendor"),
        ("ROLLUP(day), ROLLUP(day)", "day"),
        ("GROUPING SETS ((day), (vendor)), CUBE(vendor)", "vendor"),
        ("vendor, day GROUPING SETS ((vendor, day), (day, vendor))", "day, vendor"),
    ],
)
def test_a_grouping_set_made_twice_is_not_maintained(group_by: str, repeated: str) -> None:
    """Spark makes such a set's groups twice, with one grouping id: two identical storage
    rows a merge keyed by the groups cannot tell apart (the query generator found one
    refreshed into six copies)."""
    analysis = analyse(
        SOURCES, f"SELECT vendor, day, count(*) AS n FROM trips GROUP BY {group_by}", ("nyc",)
    )
    assert isinstance(analysis, NotMaintainable), analysis
    assert analysis.reasons == ("grouping-sets",)
    made = ", ".join(f"`trips`.`{c}`" for c in repeated.split(", "))
    assert f"a grouping set made twice: ({made})" in analysis.details[0]


@pytest.mark.parametrize(
    "group_by",
    [
        "CUBE(vendor, day, id)",
        "vendor, day, id WITH CUBE",
        "CUBE((vendor, day), id)",
        "ROLLUP(vendor, day), id",
    ],
)
def test_sets_made_once_are_maintained(group_by: str) -> None:
    sql = f"SELECT vendor, day, id, count(*) AS n FROM trips GROUP BY {group_by}"
    assert _analysis(sql).grouping_sets
