import pytest
from sqlglot import exp

from icemv.errors import InvalidIdentifierError, PartitionSpecError, ViewSqlError
from icemv.format.partitioning import parse_partition_field
from icemv.identifiers import Identifier
from icemv.sql.parse import duplicate_names, parse_query, table_references, unnamed_output_columns


def test_table_references_skip_ctes_and_functions() -> None:
    query = parse_query(
        "WITH recent AS (SELECT * FROM nyc.taxis) "
        "SELECT r.vendor_id AS v FROM recent r "
        "JOIN lake.nyc.vendors v ON r.vendor_id = v.id, range(3)"
    )
    names = sorted(t.sql("spark") for t in table_references(query))
    assert names == ["lake.nyc.vendors AS v", "nyc.taxis"]


def test_each_parse_is_a_tree_of_its_own() -> None:
    """Parsed once per text, but a caller changing its tree never changes the next one's."""
    sql = "SELECT a FROM t WHERE a > 1"
    first = parse_query(sql)
    first.find(exp.Table).set("this", exp.to_identifier("changed"))  # type: ignore[union-attr]
    second = parse_query(sql)
    assert second is not first
    assert second.sql("spark") == sql


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELEC x FRM t", "does not parse"),
        ("SELECT 1; SELECT 2", "one query"),
        ("INSERT INTO t SELECT 1", "must be a query"),
        ("DROP TABLE t", "must be a query"),
    ],
)
def test_bad_sql_is_a_clear_error(sql: str, message: str) -> None:
    with pytest.raises(ViewSqlError, match=message):
        parse_query(sql)


def test_unnamed_and_duplicate_columns() -> None:
    query = parse_query("SELECT a, count(*), sum(b) AS s, t.* FROM t GROUP BY a")
    assert unnamed_output_columns(query) == ["COUNT(*)"]
    union = parse_query("SELECT a + 1 FROM t UNION ALL SELECT b AS x FROM u")
    assert unnamed_output_columns(union) == ["a + 1"]
    assert duplicate_names(["a", "B", "b", "c"]) == ["B", "b"]


def test_identifiers_parse_and_quote() -> None:
    assert Identifier.parse("taxis", "default") == Identifier(("default",), "taxis")
    assert Identifier.parse("lake.nyc.taxis", "default", "lake") == Identifier(("nyc",), "taxis")
    weird = Identifier(("ns",), "we`ird; DROP")
    assert weird.quoted("lake") == "`lake`.`ns`.`we``ird; DROP`"
    with pytest.raises(InvalidIdentifierError):
        Identifier.parse("nyc..taxis", "default")


def test_partition_expressions() -> None:
    assert str(parse_partition_field("days(pickup_ts)").transform) == "day"
    assert str(parse_partition_field("bucket(16, id)").transform) == "bucket[16]"
    assert str(parse_partition_field("truncate(4, s)").transform) == "truncate[4]"
    assert str(parse_partition_field("vendor").transform) == "identity"
    with pytest.raises(PartitionSpecError):
        parse_partition_field("explode(x)")
