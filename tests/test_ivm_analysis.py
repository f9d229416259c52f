"""Which views are incrementally maintainable, and the reason codes for those that are not."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.types import DoubleType

from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.explain import explain_analysis, render_explain
from icemv.sql.analysis import AggregateAnalysis, NotMaintainable, analyse

SCHEMA = pa.schema([("id", pa.int64()), ("vendor", pa.string()), ("fare", pa.float64())])


@pytest.fixture
def lakehouse(sqlite_lakehouse: Lakehouse) -> Lakehouse:
    for name in ("trips", "zones"):
        sqlite_lakehouse.catalog.create_table(("nyc", name), schema=SCHEMA)
    return sqlite_lakehouse


@pytest.mark.parametrize(
    ("sql", "shape", "with_appends", "with_deletes"),
    [
        ("SELECT * FROM trips WHERE fare > 1", "rows", None, None),
        ("SELECT t.id, z.vendor FROM trips t JOIN zones z ON t.id = z.id", "rows", None, None),
        ("SELECT id FROM trips UNION ALL SELECT id FROM zones", "rows", None, None),
        (
            "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor",
            "aggregate", "merge-aggregates", "merge-aggregates",
        ),
        (
            "SELECT vendor, count(*) AS n, count(fare) AS c FROM trips GROUP BY vendor",
            "aggregate", "merge-aggregates", "merge-aggregates",
        ),
        (
            "SELECT vendor, min(fare) AS lo, max(fare) AS hi FROM trips GROUP BY vendor",
            "aggregate", "merge-aggregates", "recompute-groups",
        ),
        (
            "SELECT vendor, avg(fare) AS a FROM trips GROUP BY vendor HAVING count(*) > 2",
            "aggregate", "recompute-groups", "recompute-groups",
        ),
        (
            "SELECT vendor, count(DISTINCT id) AS ids FROM trips GROUP BY vendor",
            "aggregate", "recompute-groups", "recompute-groups",
        ),
        (
            "SELECT id, c FROM trips LATERAL VIEW OUTER explode(array(vendor, 'x')) e AS c",
            "rows", None, None,
        ),
        (
            "SELECT c, count(*) AS n FROM trips LATERAL VIEW explode(array(vendor)) e AS c "
            "GROUP BY c",
            "aggregate", "merge-aggregates", "merge-aggregates",
        ),
        (
            "SELECT vendor, sum(DISTINCT fare) AS s, avg(DISTINCT fare) AS a, "
            "count_if(fare > 2) AS c, bool_and(fare > 1) AS b, bool_or(fare > 9) AS o "
            "FROM trips GROUP BY vendor",
            "aggregate", "recompute-groups", "recompute-groups",
        ),
        (
            "SELECT vendor, any_value(id) AS a, collect_set(fare) AS fs, collect_list(id) AS ids, "
            "min_by(id, fare) AS lo, max_by(id, fare) AS hi FROM trips GROUP BY vendor",
            "aggregate", "recompute-groups", "recompute-groups",
        ),
        (
            "SELECT vendor, any_value(id, true) AS a, size(collect_set(fare)) AS n "
            "FROM trips GROUP BY vendor",
            "aggregate", "recompute-groups", "recompute-groups",
        ),
        # Normalised first (sql/normalise.py): each becomes one of the shapes above.
        ("SELECT id FROM trips ORDER BY id", "rows", None, None),
        (
            "WITH cheap AS (SELECT * FROM trips WHERE fare < 5) "
            "SELECT c.id, z.vendor FROM cheap c JOIN zones z ON c.id = z.id",
            "rows", None, None,
        ),
        ("SELECT DISTINCT vendor FROM trips", "aggregate", "merge-aggregates", "recompute-groups"),
        (
            "WITH f AS (SELECT vendor, fare FROM trips WHERE fare > 0), "
            "g AS (SELECT vendor, sum(fare) AS s, count(*) AS n FROM f GROUP BY vendor) "
            "SELECT * FROM g WHERE n > 1 ORDER BY vendor",
            "aggregate", "recompute-groups", "recompute-groups",
        ),
        # Set operations (sql/setops.py), NOT IN (sql/not_in.py), subquery filters, top-N.
        (
            "SELECT id, vendor FROM trips UNION SELECT id, vendor FROM zones",
            "aggregate", "merge-aggregates", "recompute-groups",
        ),
        (
            "SELECT id FROM trips INTERSECT SELECT id FROM zones",
            "aggregate", "recompute-groups", "recompute-groups",
        ),
        (
            "SELECT id FROM trips EXCEPT (SELECT id FROM zones UNION ALL SELECT id FROM trips "
            "WHERE fare > 9)",
            "aggregate", "recompute-groups", "recompute-groups",
        ),
        ("SELECT id FROM trips WHERE id NOT IN (SELECT id FROM zones)", "rows", None, None),
        ("SELECT id FROM trips WHERE fare > (SELECT avg(fare) FROM zones)", "rows", None, None),
        (
            "SELECT vendor, count(*) AS n FROM trips t WHERE t.id NOT IN "
            "(SELECT z.id FROM zones z WHERE z.vendor = t.vendor) GROUP BY vendor",
            "aggregate", "merge-aggregates", "merge-aggregates",
        ),
        ("SELECT id, fare FROM trips ORDER BY fare DESC, id LIMIT 3", "rows", None, None),
    ],
)  # fmt: skip
def test_maintainable_shapes(
    lakehouse: Lakehouse, sql: str, shape: str, with_appends: str | None, with_deletes: str | None
) -> None:
    analysis = analyse(CatalogReads(lakehouse), sql, ("nyc",))
    assert not isinstance(analysis, NotMaintainable), analysis.details
    assert analysis.shape == shape
    if with_appends is not None:
        assert isinstance(analysis, AggregateAnalysis)
        assert analysis.aggregate_strategy(with_deletes=False) == with_appends
        assert analysis.aggregate_strategy(with_deletes=True) == with_deletes
    text = render_explain(explain_analysis(analysis, "auto"))
    assert text.startswith("the view: incremental")


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT id, row_number() OVER (ORDER BY id) AS r FROM trips", "window-function"),
        ("SELECT t.id, z.vendor FROM trips t FULL JOIN zones z ON t.fare > z.fare", "outer-join"),
        ("SELECT id, rand() AS r FROM trips", "non-deterministic-function"),
        ("SELECT id, current_timestamp() AS ts FROM trips", "non-deterministic-function"),
        ("SELECT id FROM trips LIMIT 10", "limit"),
        ("SELECT id FROM trips ORDER BY id LIMIT 3 OFFSET 1", "limit"),
        ("SELECT vendor, count(*) AS n FROM trips GROUP BY vendor ORDER BY n LIMIT 3", "limit"),
        (
            "SELECT z.id FROM (SELECT count(*) AS n FROM trips) v JOIN zones z ON v.n = z.id",
            "subquery",
        ),
        (
            "SELECT id FROM (SELECT id, row_number() OVER (ORDER BY fare) "
            "AS rn FROM trips) t WHERE rn = 1",
            "window-function",
        ),
        (
            "SELECT t.id FROM trips t JOIN zones z ON z.id = (SELECT max(id) FROM zones)",
            "subquery",
        ),
        (
            "SELECT vendor, stddev(DISTINCT fare) AS s FROM trips GROUP BY vendor",
            "distinct-aggregate-stddev",
        ),
        ("SELECT count(*) AS n FROM trips GROUP BY fare * 2", "group-key-not-in-output"),
        ("SELECT id FROM trips INTERSECT ALL SELECT id FROM zones", "set-operation-all"),
        ("SELECT id FROM trips EXCEPT ALL SELECT id FROM zones", "set-operation-all"),
        (
            "SELECT id FROM trips UNION ALL (SELECT id FROM trips INTERSECT SELECT id FROM zones)",
            "set-operation",
        ),
        (
            "SELECT vendor, percentile_approx(fare, 0.5) AS p FROM trips GROUP BY vendor",
            "unsupported-aggregate",
        ),
        (
            "SELECT vendor, collect_list(DISTINCT id) AS ids FROM trips GROUP BY vendor",
            "distinct-aggregate",
        ),
        ("SELECT id FROM no_such_table", "unknown-source"),
        (
            "SELECT t.id, x.v FROM trips t, LATERAL (SELECT z.vendor AS v FROM zones z "
            "WHERE z.id = t.id) x",
            "generator",
        ),
    ],
)
def test_reasons_for_full_refresh(lakehouse: Lakehouse, sql: str, reason: str) -> None:
    analysis = analyse(CatalogReads(lakehouse), sql, ("nyc",))
    assert isinstance(analysis, NotMaintainable)
    assert any(r.startswith(reason) for r in analysis.reasons), analysis.reasons
    text = render_explain(explain_analysis(analysis, "auto"))
    assert "full refresh only" in text and reason in text


def test_explain_names_what_normalisation_rewrote(lakehouse: Lakehouse) -> None:
    sql = (
        "WITH cheap AS (SELECT DISTINCT vendor FROM trips WHERE fare < 5) "
        "SELECT vendor FROM cheap ORDER BY vendor"
    )
    analysis = analyse(CatalogReads(lakehouse), sql, ("nyc",))
    assert isinstance(analysis, AggregateAnalysis)
    text = render_explain(explain_analysis(analysis, "auto"))
    assert (
        "normalised first: ORDER BY without LIMIT dropped; CTE cheap inlined; "
        "DISTINCT as GROUP BY with a row count; aggregate subquery lifted"
    ) in " ".join(text.split()), text  # wrapped at 100 columns
    assert all(len(line) <= 100 for line in text.splitlines()), text


def test_explain_names_the_affected_keys(lakehouse: Lakehouse) -> None:
    sql = "SELECT t.id, z.vendor AS zone FROM trips t LEFT JOIN zones z ON t.id = z.id"
    analysis = analyse(CatalogReads(lakehouse), sql, ("nyc",))
    text = render_explain(explain_analysis(analysis, "auto"))
    assert text.startswith("the view: incremental (rows)"), text
    assert "affected keys (t.id = z.id): the view's rows for the key values" in text, text


def test_recomputed_aggregates_name_their_function_and_argument(lakehouse: Lakehouse) -> None:
    sql = (
        "SELECT vendor, any_value(id) AS a, collect_set(fare) AS fs, collect_list(id) AS ids, "
        "min_by(id, fare) AS lo, max_by(fare, id) AS hi FROM trips GROUP BY vendor"
    )
    analysis = analyse(CatalogReads(lakehouse), sql, ("nyc",))
    assert isinstance(analysis, AggregateAnalysis), analysis
    found = [(a.func, a.argument.name if a.argument else None) for a in analysis.aggregates]
    assert found == [
        ("any_value", "id"),
        ("collect_set", "fare"),
        ("collect_list", "id"),
        ("min_by", "id"),
        ("max_by", "fare"),
    ]
    text = render_explain(explain_analysis(analysis, "auto"))
    assert "recompute" in text, text


def test_explain_names_the_union_of_groupings(lakehouse: Lakehouse) -> None:
    sql = "SELECT vendor, id, sum(fare) AS s FROM trips GROUP BY ROLLUP(vendor, id)"
    analysis = analyse(CatalogReads(lakehouse), sql, ("nyc",))
    assert isinstance(analysis, AggregateAnalysis) and analysis.grouping_sets, analysis
    text = render_explain(explain_analysis(analysis, "auto"))
    assert "a union of groupings: the touched groups of every grouping set recomputed" in text
    assert "deltas with deletes: recompute-groups" in text, text


@pytest.mark.parametrize(
    ("sql", "rule"),
    [
        ("SELECT id FROM trips UNION SELECT id FROM zones", "union: multiplicity"),
        ("SELECT id FROM trips UNION ALL SELECT id FROM zones", "union all: the delta of each"),
        ("SELECT id FROM trips INTERSECT SELECT id FROM zones", "intersect: touched rows"),
        ("SELECT id FROM trips EXCEPT SELECT id FROM zones", "except: touched rows"),
        (
            "SELECT id FROM trips WHERE id NOT IN (SELECT id FROM zones)",
            "not-in: NOT EXISTS conjuncts",
        ),
        (
            "SELECT id FROM trips WHERE id NOT IN (SELECT id FROM zones)",
            "a change to nyc.zones recomputes the view (subquery-source-changed)",
        ),
        ("SELECT id FROM trips ORDER BY id LIMIT 5", "top-n (ORDER BY `id` LIMIT 5)"),
    ],
)
def test_explain_names_the_rule(lakehouse: Lakehouse, sql: str, rule: str) -> None:
    analysis = analyse(CatalogReads(lakehouse), sql, ("nyc",))
    assert not isinstance(analysis, NotMaintainable), analysis.details
    text = render_explain(explain_analysis(analysis, "auto"))
    assert rule in text, text


def test_an_analysis_is_kept_per_schema_and_every_caller_gets_its_own(
    lakehouse: Lakehouse,
) -> None:
    """A repeated analysis is a copy of the kept one: changing it changes no later one,
    and a column added to a source analyses the view again (its `*` grew)."""
    sql = "SELECT * FROM trips WHERE fare > 1"
    first = analyse(CatalogReads(lakehouse), sql, ("nyc",))
    assert not isinstance(first, NotMaintainable)
    first.query.set("where", None)
    again = analyse(CatalogReads(lakehouse), sql, ("nyc",))
    assert not isinstance(again, NotMaintainable)
    assert again.query.args.get("where") is not None
    assert again.query is not first.query
    assert again.output_columns == ("id", "vendor", "fare")
    with lakehouse.catalog.load_table(("nyc", "trips")).update_schema() as schema:
        schema.add_column("tip", DoubleType())
    grown = analyse(CatalogReads(lakehouse), sql, ("nyc",))
    assert not isinstance(grown, NotMaintainable)
    assert grown.output_columns == ("id", "vendor", "fare", "tip")
