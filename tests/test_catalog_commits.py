"""Table commits on the JDBC catalog (catalog/jdbc.py `_SqlCatalog.commit_table`): tried
from the metadata the committer loaded, and pyiceberg's own commit when the row has moved
on; on real SQLite and PostgreSQL catalogs, no Spark."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField

from icemv.catalog.namespaces import ensure_namespace
from icemv.config import parse_config
from icemv.lakehouse import Lakehouse
from tests.conftest import create_database, drop_database

SCHEMA = Schema(NestedField(1, "n", LongType(), required=False))


@pytest.fixture(params=["sqlite", "postgres"])
def lakehouse(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lakehouse]:
    if request.param == "sqlite":
        uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    else:
        admin: str = request.getfixturevalue("pg_admin_url")
        uri = create_database(admin)
        request.addfinalizer(lambda: drop_database(admin, uri))
    config = parse_config(
        {"catalog": {"uri": uri}, "warehouse": {"location": str(tmp_path / "warehouse")}}
    )
    lakehouse = Lakehouse(config, spark=False)
    ensure_namespace(lakehouse.catalog, ("nyc",))
    yield lakehouse


def _rows(*values: int) -> pa.Table:
    return pa.table({"n": pa.array(values, pa.int64())})


def _values(table: Table) -> list[int]:
    return sorted(table.scan().to_arrow()["n"].to_pylist())


def test_a_commit_moves_the_row_and_keeps_what_the_file_holds(lakehouse: Lakehouse) -> None:
    catalog = lakehouse.catalog
    table = catalog.create_table(("nyc", "t"), SCHEMA)
    before = table.metadata_location
    table.append(_rows(1))
    assert table.metadata_location != before
    loaded = catalog.load_table(("nyc", "t"))
    assert loaded.metadata_location == table.metadata_location
    assert _values(loaded) == [1]
    # The commit kept its metadata parsed (the load did not read the file), and it is
    # what a parse of the file written gives.
    assert loaded.metadata is table.metadata
    written = FromInputFile.table_metadata(table.io.new_input(table.metadata_location))
    assert loaded.metadata == written


def test_a_row_moved_on_leaves_the_commit_to_pyiceberg(lakehouse: Lakehouse) -> None:
    catalog = lakehouse.catalog
    catalog.create_table(("nyc", "t"), SCHEMA)
    first = catalog.load_table(("nyc", "t"))
    stale = catalog.load_table(("nyc", "t"))
    first.append(_rows(1))
    # Setting a property requires nothing of main: pyiceberg applies it to the table as
    # the other writer left it, and so does the commit from a stale load.
    with stale.transaction() as transaction:
        transaction.set_properties({"owner": "icemv"})
    now = catalog.load_table(("nyc", "t"))
    assert now.properties["owner"] == "icemv"
    assert _values(now) == [1]
    assert now.metadata.metadata_log[-1].metadata_file == first.metadata_location


def test_a_stale_requirement_fails_as_in_pyiceberg(lakehouse: Lakehouse) -> None:
    catalog = lakehouse.catalog
    catalog.create_table(("nyc", "t"), SCHEMA)
    first = catalog.load_table(("nyc", "t"))
    stale = catalog.load_table(("nyc", "t"))
    with first.update_schema() as update:
        update.add_column("m", LongType())
    # The schema it adds to is not current.
    with pytest.raises(CommitFailedException), stale.update_schema() as update:
        update.add_column("x", LongType())
    now = catalog.load_table(("nyc", "t"))
    assert [f.name for f in now.schema().fields] == ["n", "m"]
