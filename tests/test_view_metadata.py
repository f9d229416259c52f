import gzip
import json

from icemv.format.view_metadata import (
    STORAGE_TABLE_PROPERTY,
    decode_view_metadata,
    encode_view_metadata,
    new_view_metadata,
)
from icemv.identifiers import Identifier

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "d", "type": "date", "required": False}]}


def _metadata():  # type: ignore[no-untyped-def]
    return new_view_metadata(
        location="file:///wh/nyc/agg",
        sql="SELECT d FROM t",
        schema=SCHEMA,
        storage_table=Identifier(("nyc",), "agg__storage"),
        default_namespace=("nyc",),
        default_catalog="lake",
        properties={"icemv.refresh-policy": "auto"},
    )


def test_storage_table_is_written_in_the_current_version() -> None:
    raw = json.loads(encode_view_metadata(_metadata()))
    version = raw["versions"][0]
    assert raw["format-version"] == 1
    assert version["storage-table"] == {"namespace": ["nyc"], "name": "agg__storage"}
    assert version["representations"] == [
        {"type": "sql", "sql": "SELECT d FROM t", "dialect": "spark"}
    ]
    assert version["default-catalog"] == "lake"
    assert raw["schemas"][0]["schema-id"] == version["schema-id"] == 0


def test_round_trip_keeps_unknown_fields_and_reads_gzip() -> None:
    raw = json.loads(encode_view_metadata(_metadata()))
    raw["some-future-field"] = {"x": 1}
    raw["versions"][0]["engine-extra"] = "kept"
    data = gzip.compress(json.dumps(raw).encode())
    decoded = decode_view_metadata(data)
    again = json.loads(encode_view_metadata(decoded))
    assert again["some-future-field"] == {"x": 1}
    assert again["versions"][0]["engine-extra"] == "kept"
    assert decoded.is_materialized


def test_new_version_grows_ids_and_keeps_history() -> None:
    first = _metadata()
    second = first.with_new_version(
        sql="SELECT d, 1 AS one FROM t",
        schema=SCHEMA,
        storage_table=Identifier(("nyc",), "agg__storage_v2"),
        default_namespace=("nyc",),
        default_catalog="lake",
    )
    assert second.current_version_id == 2
    assert [v.version_id for v in second.versions] == [1, 2]
    assert second.current_version.schema_id == 1
    assert second.current_version.storage_table == Identifier(("nyc",), "agg__storage_v2")
    assert len(second.version_log) == 2
    assert second.properties == {
        **first.properties,
        STORAGE_TABLE_PROPERTY: '{"namespace":["nyc"],"name":"agg__storage_v2"}',
    }


def test_plain_view_is_not_materialized() -> None:
    raw = json.loads(encode_view_metadata(_metadata()))
    del raw["versions"][0]["storage-table"]
    del raw["properties"][STORAGE_TABLE_PROPERTY]
    assert not decode_view_metadata(json.dumps(raw).encode()).is_materialized


def test_storage_table_is_also_a_view_property() -> None:
    raw = json.loads(encode_view_metadata(_metadata()))
    assert json.loads(raw["properties"][STORAGE_TABLE_PROPERTY]) == {
        "namespace": ["nyc"],
        "name": "agg__storage",
    }


def test_reader_falls_back_to_the_property_when_a_catalog_dropped_the_field() -> None:
    raw = json.loads(encode_view_metadata(_metadata()))
    del raw["versions"][0]["storage-table"]  # what a REST server on Iceberg 1.10 does
    metadata = decode_view_metadata(json.dumps(raw).encode())
    assert metadata.is_materialized
    assert metadata.current_version.storage_table == Identifier(("nyc",), "agg__storage")


def test_the_version_field_wins_over_the_property() -> None:
    raw = json.loads(encode_view_metadata(_metadata()))
    raw["properties"][STORAGE_TABLE_PROPERTY] = '{"namespace":["x"],"name":"other"}'
    metadata = decode_view_metadata(json.dumps(raw).encode())
    assert metadata.current_version.storage_table == Identifier(("nyc",), "agg__storage")


def test_an_unreadable_property_means_a_plain_view() -> None:
    raw = json.loads(encode_view_metadata(_metadata()))
    del raw["versions"][0]["storage-table"]
    raw["properties"][STORAGE_TABLE_PROPERTY] = '{"name": 3}'
    assert not decode_view_metadata(json.dumps(raw).encode()).is_materialized
