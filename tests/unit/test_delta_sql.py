"""Delta SQL builders as input/expected pairs (the sqlglot fixture style); no JVM.

Each case: the view SQL, the tables that changed, and the exact Spark SQL of the delta.
`old` snapshots are 1, `new` are 2; the changed table's delta rows are in `__d_<table>`.
"""

from __future__ import annotations

import dataclasses

import pytest
from sqlglot import exp

from icemv.sql.analysis import AggregateAnalysis, NotMaintainable, RowsAnalysis, analyse
from icemv.sql.delta import (
    DeltaInputs,
    KeyBounds,
    TouchedKeys,
    pre_aggregation_delta,
    query_at,
    rows_delta,
)
from tests.unit.sources import Sources, ident

SOURCES = Sources(
    tables={
        "nyc.trips": ("id", "vendor", "fare"),
        "nyc.zones": ("id", "zone"),
        "edge.Mixed Tbl": ("Id", "Vendor Name", "Fare"),
    }
)


def _inputs(*changed: str) -> DeltaInputs:
    tables = [ident(t) for t in SOURCES.tables]
    return DeltaInputs(
        catalog="lake",
        delta_views={ident(t): f"__d_{ident(t).name}" for t in changed},
        old={t: 1 for t in tables},
        new={t: 2 for t in tables},
    )


ROWS = [
    (
        "SELECT id, fare FROM trips WHERE fare > 1",
        ("nyc.trips",),
        "SELECT `trips`.`id` AS `id`, `trips`.`fare` AS `fare`, `trips`.`__icemv_w` AS `__icemv_w` "
        "FROM `__d_trips` AS `trips` WHERE `trips`.`fare` > 1",
    ),
    (
        "SELECT t.id, z.zone FROM trips t JOIN zones z ON t.id = z.id",
        ("nyc.zones",),
        "SELECT `t`.`id` AS `id`, `z`.`zone` AS `zone`, `z`.`__icemv_w` AS `__icemv_w` "
        "FROM `lake`.`nyc`.`trips` VERSION AS OF 2 AS `t` "
        "JOIN `__d_zones` AS `z` ON `t`.`id` = `z`.`id`",
    ),
    (  # a self-join: one term per occurrence, earlier occurrences at new, later at old
        "SELECT a.id AS a_id, b.id AS b_id FROM trips a JOIN trips b ON a.id < b.id",
        ("nyc.trips",),
        "SELECT `a`.`id` AS `a_id`, `b`.`id` AS `b_id`, `a`.`__icemv_w` AS `__icemv_w` "
        "FROM `__d_trips` AS `a` JOIN `lake`.`nyc`.`trips` VERSION AS OF 1 AS `b` "
        "ON `a`.`id` < `b`.`id` "
        "UNION ALL "
        "SELECT `a`.`id` AS `a_id`, `b`.`id` AS `b_id`, `b`.`__icemv_w` AS `__icemv_w` "
        "FROM `lake`.`nyc`.`trips` VERSION AS OF 2 AS `a` JOIN `__d_trips` AS `b` "
        "ON `a`.`id` < `b`.`id`",
    ),
    (  # exact case and spaces survive (issue 12 item 11)
        "SELECT Id, `Vendor Name` AS Who FROM edge.`Mixed Tbl` WHERE Fare > 1",
        ("edge.Mixed Tbl",),
        "SELECT `mixed tbl`.`Id` AS `Id`, `mixed tbl`.`Vendor Name` AS `Who`, "
        "`mixed tbl`.`__icemv_w` AS `__icemv_w` "
        "FROM `__d_Mixed Tbl` AS `mixed tbl` WHERE `mixed tbl`.`Fare` > 1",
    ),
]


@pytest.mark.parametrize(("sql", "changed", "expected"), ROWS)
def test_rows_delta(sql: str, changed: tuple[str, ...], expected: str) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert isinstance(analysis, RowsAnalysis), analysis
    delta = rows_delta(analysis, _inputs(*changed))
    assert delta is not None
    assert delta.sql(dialect="spark") == expected


def test_no_changed_source_has_no_delta() -> None:
    analysis = analyse(SOURCES, "SELECT id FROM trips", ("nyc",))
    assert isinstance(analysis, RowsAnalysis)
    assert rows_delta(analysis, _inputs("nyc.zones")) is None


AGGREGATES = [
    (
        "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor",
        "SELECT `trips`.`vendor` AS `__icemv_k0`, `trips`.`fare` AS `__icemv_a1`, "
        "`trips`.`__icemv_w` AS `__icemv_w` FROM `__d_trips` AS `trips`",
    ),
    (  # a global aggregate of COUNT(*) only: one constant column
        "SELECT count(*) AS n FROM trips",
        "SELECT TRUE AS `__icemv_any`, `trips`.`__icemv_w` AS `__icemv_w` "
        "FROM `__d_trips` AS `trips`",
    ),
]


@pytest.mark.parametrize(("sql", "expected"), AGGREGATES)
def test_pre_aggregation_delta(sql: str, expected: str) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert isinstance(analysis, AggregateAnalysis), analysis
    delta = pre_aggregation_delta(analysis, _inputs("nyc.trips"))
    assert delta is not None
    assert delta.sql(dialect="spark") == expected


def test_query_at_pins_every_occurrence() -> None:
    analysis = analyse(SOURCES, "SELECT t.id FROM trips t JOIN zones z ON t.id = z.id", ("nyc",))
    assert isinstance(analysis, RowsAnalysis)
    trips, zones = ident("nyc.trips"), ident("nyc.zones")
    sql = query_at(analysis, "lake", {trips: 7, zones: None}).sql(dialect="spark")
    assert sql == (
        "SELECT `t`.`id` AS `id` FROM `lake`.`nyc`.`trips` VERSION AS OF 7 AS `t` "
        "JOIN (SELECT * FROM `lake`.`nyc`.`zones` WHERE FALSE) AS `z` ON `t`.`id` = `z`.`id`"
    )


def test_tables_differing_only_in_case_are_not_guessed() -> None:
    sources = Sources(tables={"nyc.Trips": ("id",), "nyc.trips": ("id",)})
    analysis = analyse(sources, "SELECT a.id FROM Trips a JOIN trips b ON a.id = b.id", ("nyc",))
    assert isinstance(analysis, NotMaintainable)
    assert analysis.reasons == ("unresolvable",)


def _restricted(alias: str, table: str, snapshot: int) -> str:
    return (
        f"(SELECT `{alias}`.* FROM `lake`.`nyc`.`{table}` VERSION AS OF {snapshot} AS `{alias}` "
        f"LEFT SEMI JOIN `__icemv_keys` ON `{alias}`.`id` IS NOT DISTINCT FROM "
        f"`__icemv_keys`.`__icemv_key`) AS `{alias}`"
    )


def test_keyed_delta_reads_the_touched_keys_at_both_snapshots() -> None:
    """A change to an outer join's NULL-padded side (sql/keys.py): the join's rows for the
    keys in the change, new minus old."""
    analysis = analyse(
        SOURCES, "SELECT t.id, z.zone FROM trips t LEFT JOIN zones z ON t.id = z.id", ("nyc",)
    )
    assert isinstance(analysis, RowsAnalysis) and analysis.keyed is not None
    delta = rows_delta(analysis, _inputs("nyc.zones"))
    assert delta is not None

    def side(snapshot: int, weight: int) -> str:
        return (
            f"SELECT __icemv_q.*, {weight} AS `__icemv_w` FROM (SELECT `t`.`id` AS `id`, "
            f"`z`.`zone` AS `zone` FROM {_restricted('t', 'trips', snapshot)} LEFT JOIN "
            f"{_restricted('z', 'zones', snapshot)} ON `t`.`id` = `z`.`id`) AS __icemv_q"
        )

    assert delta.sql(dialect="spark") == (
        "WITH `__icemv_keys` AS (SELECT `id` AS `__icemv_key` FROM `__d_zones`) "
        f"SELECT * FROM ({side(2, 1)} UNION ALL {side(1, -1)}) AS `__icemv_keyed`"
    )
    # Every FROM is a relation or a subquery, as the embedded engine's gate reads them (a
    # bare identifier renders alike in Spark SQL, but the gate refused it).
    froms = [f.this for f in (*delta.find_all(exp.From), *delta.find_all(exp.Join))]
    assert froms and all(isinstance(f, exp.Table | exp.Subquery) for f in froms), froms


def test_a_change_to_the_preserved_side_of_an_outer_join_is_linear() -> None:
    analysis = analyse(
        SOURCES, "SELECT t.id, z.zone FROM trips t LEFT JOIN zones z ON t.id = z.id", ("nyc",)
    )
    assert isinstance(analysis, RowsAnalysis)
    delta = rows_delta(analysis, _inputs("nyc.trips"))
    assert delta is not None
    assert delta.sql(dialect="spark") == (
        "SELECT `t`.`id` AS `id`, `z`.`zone` AS `zone`, `t`.`__icemv_w` AS `__icemv_w` "
        "FROM `__d_trips` AS `t` LEFT JOIN `lake`.`nyc`.`zones` VERSION AS OF 1 AS `z` "
        "ON `t`.`id` = `z`.`id`"
    )


def test_an_evaluated_key_set_is_joined_and_its_bounds_prune_each_read() -> None:
    """K evaluated by the refresh (refresh/patch/touched_keys.py): a temp view in the semi
    joins, broadcast, and its literal bounds on the occurrences whose key type suits them."""
    analysis = analyse(
        SOURCES, "SELECT t.id, z.zone FROM trips t LEFT JOIN zones z ON t.id = z.id", ("nyc",)
    )
    assert isinstance(analysis, RowsAnalysis) and analysis.keyed is not None
    bounds = KeyBounds(
        exp.Literal.number(-3),
        exp.Literal.number(7),
        (exp.Literal.number(-3), exp.Literal.number(7)),
        has_null=True,
    )
    keys = TouchedKeys("__k", bounds, frozenset({(ident("nyc.zones"), "id")}), broadcast=True)
    delta = rows_delta(analysis, dataclasses.replace(_inputs("nyc.zones"), keys=keys))
    assert delta is not None

    def read(alias: str, table: str, snapshot: int, where: str) -> str:
        return (
            f"(SELECT /*+ BROADCAST(`__k`) */ `{alias}`.* FROM `lake`.`nyc`.`{table}` "
            f"VERSION AS OF {snapshot} AS `{alias}` LEFT SEMI JOIN `__k` ON `{alias}`.`id` "
            f"IS NOT DISTINCT FROM `__k`.`__icemv_key`{where}) AS `{alias}`"
        )

    def side(snapshot: int, weight: int) -> str:
        bounded = " WHERE `z`.`id` IS NULL OR (`z`.`id` BETWEEN -3 AND 7 AND `z`.`id` IN (-3, 7))"
        return (
            f"SELECT __icemv_q.*, {weight} AS `__icemv_w` FROM (SELECT `t`.`id` AS `id`, "
            f"`z`.`zone` AS `zone` FROM {read('t', 'trips', snapshot, '')} LEFT JOIN "
            f"{read('z', 'zones', snapshot, bounded)} ON `t`.`id` = `z`.`id`) AS __icemv_q"
        )

    assert delta.sql(dialect="spark") == (
        f"SELECT * FROM ({side(2, 1)} UNION ALL {side(1, -1)}) AS `__icemv_keyed`"
    )


@pytest.mark.parametrize(
    ("bounds", "admits"),
    [
        (KeyBounds(None, None, (), has_null=True), "`k` IS NULL"),
        (KeyBounds(None, None, (), has_null=False), "FALSE"),
        (
            KeyBounds(exp.Literal.string("a'b"), exp.Literal.string("z")),
            "`k` BETWEEN 'a\\'b' AND 'z'",
        ),
    ],
)
def test_key_bounds_admit_nulls_only_when_k_has_one(bounds: KeyBounds, admits: str) -> None:
    column = exp.column("k", quoted=True)
    assert bounds.admits(column).sql(dialect="spark") == admits
