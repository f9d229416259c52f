"""Which joined tables a delta term reads restricted to the keys it can meet, and by what
(refresh/embedded/restrict.py): equalities in the WHERE, inner joins' ON and a LEFT
JOIN's own ON count; a preserved side, an equality under OR, a subquery's occurrence, a
function of the key or another type family do not."""

from __future__ import annotations

import sqlglot
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType

from icemv.identifiers import Identifier
from icemv.refresh.embedded.restrict import (
    Partner,
    Restriction,
    joined_reads,
    term_restrictions,
)


def _id(name: str) -> Identifier:
    return Identifier(("db",), name)


def _schema(*fields: tuple[str, object]) -> Schema:
    return Schema(
        *(NestedField(i + 1, n, t, required=False) for i, (n, t) in enumerate(fields))  # type: ignore[arg-type]
    )


SCHEMAS = {
    _id("f"): _schema(("k", IntegerType()), ("p", StringType()), ("x", DoubleType())),
    _id("d"): _schema(("k", LongType()), ("region", StringType()), ("x", DoubleType())),
    _id("p"): _schema(("p", StringType()), ("category", StringType())),
    _id("r"): _schema(("region", StringType()), ("manager", StringType())),
}


def _restrictions(sql: str, moved: str = "f") -> dict[str, Restriction]:
    query = sqlglot.parse_one(sql, read="spark")
    assert isinstance(query, sqlglot.exp.Query)
    unchanged = [i for i in SCHEMAS if i != _id(moved)]
    found = term_restrictions(query, _id(moved), unchanged, SCHEMAS)
    return {i.name: r for i, r in found.items()}


def test_inner_join_and_where_equalities_restrict_across_types_of_one_family() -> None:
    found = _restrictions("SELECT a.x FROM db.f a JOIN db.d b ON a.k = b.k")
    assert found == {"d": Restriction("k", (Partner(_id("f"), "k"),))}
    found = _restrictions("SELECT a.x FROM db.f a, db.d b WHERE b.k = a.k AND b.x > 1")
    assert found == {"d": Restriction("k", (Partner(_id("f"), "k"),))}


def test_a_chain_restricts_each_hop_from_the_changed_table() -> None:
    sql = "SELECT r.manager FROM db.f a JOIN db.d b ON a.k = b.k JOIN db.r r ON r.region = b.region"
    assert _restrictions(sql) == {
        "d": Restriction("k", (Partner(_id("f"), "k"),)),
        "r": Restriction("region", (Partner(_id("d"), "region"),)),
    }
    # A dimension changed: the fact meets it directly, the other dimension through it.
    assert _restrictions(sql, moved="r") == {
        "d": Restriction("region", (Partner(_id("r"), "region"),)),
        "f": Restriction("k", (Partner(_id("d"), "k"),)),
    }


def test_left_join_restricts_its_own_right_side_only() -> None:
    sql = "SELECT a.x FROM db.f a LEFT JOIN db.d b ON a.k = b.k"
    assert _restrictions(sql) == {"d": Restriction("k", (Partner(_id("f"), "k"),))}
    # The preserved side keeps rows the ON matches with nothing: not restricted.
    assert _restrictions(sql, moved="d") == {}
    assert _restrictions("SELECT a.x FROM db.d b RIGHT JOIN db.f a ON a.k = b.k") == {}
    assert _restrictions("SELECT a.x FROM db.f a FULL JOIN db.d b ON a.k = b.k") == {}


def test_what_does_not_restrict() -> None:
    for sql in (
        "SELECT a.x FROM db.f a JOIN db.d b ON a.k = b.k OR b.x > 0",  # not a conjunct
        "SELECT a.x FROM db.f a JOIN db.d b ON a.k + 1 = b.k",  # a function of the key
        "SELECT a.x FROM db.f a JOIN db.d b ON a.x = b.x",  # floating point
        "SELECT a.x FROM db.f a JOIN db.d b ON CAST(a.k AS STRING) = b.region",
        # d also read by a subquery: that occurrence has no partner
        "SELECT a.x FROM db.f a JOIN db.d b ON a.k = b.k WHERE a.x > (SELECT max(c.x) FROM db.d c)",
        # in a derived table: its rows are not the SELECT's FROM list
        "SELECT a.x FROM db.f a JOIN (SELECT k FROM db.d) b ON a.k = b.k",
    ):
        assert "d" not in _restrictions(sql), sql


def test_two_dimensions_restrict_each_by_the_fact_and_a_cycle_by_the_changed_table() -> None:
    sql = (
        "SELECT b.region, c.category FROM db.f a JOIN db.d b ON a.k = b.k JOIN db.p c ON c.p = a.p"
    )
    found = _restrictions(sql)
    assert found["d"] == Restriction("k", (Partner(_id("f"), "k"),))
    assert found["p"] == Restriction("p", (Partner(_id("f"), "p"),))
    # p changed: f links to d and to p; only the link to p is settled first.
    found = _restrictions(sql, moved="p")
    assert found["f"] == Restriction("p", (Partner(_id("p"), "p"),))
    assert found["d"] == Restriction("k", (Partner(_id("f"), "k"),))


def test_explain_names_each_restricted_read_by_the_changed_table() -> None:
    query = sqlglot.parse_one(
        "SELECT r.manager FROM db.f a JOIN db.d b ON a.k = b.k JOIN db.r r ON r.region = b.region",
        read="spark",
    )
    assert isinstance(query, sqlglot.exp.Query)
    schemas = {i: SCHEMAS[i] for i in (_id("f"), _id("d"), _id("r"))}
    lines = joined_reads(query, lambda moved: False, schemas)
    assert lines == [
        "a change to db.f alone: db.d where k is among db.f.k; "
        "db.r where region is among db.d.region",
        "a change to db.d alone: db.f where k is among db.d.k; "
        "db.r where region is among db.d.region",
        "a change to db.r alone: db.d where region is among db.r.region; "
        "db.f where k is among db.d.k",
    ]
