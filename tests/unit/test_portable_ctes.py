"""The portability gate (sql/portable/) over CTEs the delta trees build."""

from __future__ import annotations

from icemv.sql.spark_types import INT


def test_a_cte_named_by_sqlglots_builder_is_admitted() -> None:
    """The delta trees add CTEs with sqlglot's `with_` builder, which names them by an
    Identifier rather than a TableAlias (the gate refused them: 40 of 54 Spark refreshes
    in a generator run)."""
    from sqlglot import exp, parse_one

    from icemv.sql.portable import to_duckdb

    body = parse_one("SELECT r AS a FROM edge", read="spark")
    query = parse_one("SELECT k.a AS a FROM k", read="spark").with_(
        exp.to_identifier("k", quoted=True), as_=body
    )
    rendered = to_duckdb(query, {"edge": {"r": INT}}).sql
    assert rendered.startswith('WITH "k" AS (SELECT r AS "a" FROM edge)')
