"""Catalog kinds from configuration: validation, masking, and the one property map."""

from __future__ import annotations

import pytest

from icemv.catalog.backends import open_backend
from icemv.catalog.event_scope import event_scope
from icemv.catalog.jdbc import JdbcBackend
from icemv.catalog.rest import RestBackend, rest_properties
from icemv.config import Config, masked_dump, parse_config
from icemv.engine.spark import spark_conf
from icemv.errors import ConfigError

REST = {
    "type": "rest",
    "uri": "https://polaris.example.com/api/catalog",
    "warehouse": "analytics",
    "credential": "client-id:client-s3cret",
    "scope": "PRINCIPAL_ROLE:ALL",
    "oauth2_server_uri": "https://polaris.example.com/api/catalog/v1/oauth/tokens",
    "headers": {"X-Api-Key": "h3ader-secret"},
}


def _rest_config(**catalog: object) -> Config:
    return parse_config({"catalog": {**REST, **catalog}})


def test_the_default_catalog_is_jdbc_and_embedded() -> None:
    config = parse_config({})
    assert config.catalog.type == "jdbc" and config.catalog.embedded
    assert isinstance(open_backend(config), JdbcBackend)


def test_a_rest_catalog_is_chosen_by_type() -> None:
    config = _rest_config()
    assert not config.catalog.embedded
    assert isinstance(open_backend(config), RestBackend)


@pytest.mark.parametrize(
    ("catalog", "message"),
    [
        ({"type": "rest", "uri": "postgresql://db/lake"}, "needs an http"),
        ({"type": "rest", "uri": "embedded"}, "needs an http"),
        ({"uri": "postgresql://db/lake", "credential": "a:b"}, "catalog.credential applies"),
        ({"uri": "http://rest:8181"}, "catalog.uri must be"),
        ({"type": "hive"}, "catalog.type"),
    ],
)
def test_bad_catalog_settings_name_the_key(catalog: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"catalog": catalog})


def test_rest_secrets_are_masked() -> None:
    config = _rest_config(token="t0ken-secret")
    text = repr(masked_dump(config)) + repr(config)
    for secret in ("client-s3cret", "t0ken-secret", "h3ader-secret"):
        assert secret not in text


def test_both_engines_get_one_property_map() -> None:
    config = _rest_config(prefix="wh-1")
    expected = {
        "uri": "https://polaris.example.com/api/catalog",
        "warehouse": "analytics",
        "prefix": "wh-1",
        "credential": "client-id:client-s3cret",
        "scope": "PRINCIPAL_ROLE:ALL",
        "oauth2-server-uri": "https://polaris.example.com/api/catalog/v1/oauth/tokens",
        "header.X-Api-Key": "h3ader-secret",
    }
    assert rest_properties(config) == expected
    conf = spark_conf(config, RestBackend(config))
    spark = {
        key.removeprefix("spark.sql.catalog.lake."): value
        for key, value in conf.items()
        if key.startswith("spark.sql.catalog.lake.")
    }
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert spark == {**expected, "type": "rest", "cache-enabled": "false"}
    # No JDBC driver jars on a REST catalog's class path.
    assert not any("postgresql" in jar for jar in conf.get("spark.jars", "").split(","))


def test_jdbc_spark_properties_are_unchanged() -> None:
    config = parse_config({"catalog": {"uri": "sqlite:////tmp/icemv-never-opened.db"}})
    conf = spark_conf(config, JdbcBackend(config))
    assert conf["spark.sql.catalog.lake.catalog-impl"] == "org.apache.iceberg.jdbc.JdbcCatalog"
    assert conf["spark.sql.catalog.lake.uri"] == "jdbc:sqlite:/tmp/icemv-never-opened.db"
    assert conf["spark.sql.catalog.lake.jdbc.schema-version"] == "V1"
    assert conf["spark.sql.catalog.lake.cache-enabled"] == "false"


def test_event_scope_of_a_jdbc_catalog_is_its_name() -> None:
    config = parse_config({})
    scope = event_scope(config, open_backend(config))
    assert scope("lake", None) is None and scope(None, None) is None
    assert scope("other", None) == "other-catalog"
    assert scope(None, "any-warehouse-id") is None  # JDBC catalogs have no warehouse ids


def test_event_scope_of_a_rest_catalog_knows_its_warehouse_without_connecting() -> None:
    config = _rest_config(prefix="a0b1c2d3")
    scope = event_scope(config, open_backend(config))
    assert scope("analytics", None) is None  # Polaris: catalog_name = the REST warehouse
    assert scope("lake", "a0b1c2d3") is None  # Lakekeeper: warehouse-id = the prefix
    assert scope("elsewhere", None) == "other-catalog"
