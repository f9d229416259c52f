from pathlib import Path

import pytest

from icemv.config import load_config, masked_dump, parse_config
from icemv.errors import ConfigError


def test_defaults_are_the_embedded_lakehouse() -> None:
    config = parse_config({})
    assert config.catalog.embedded
    assert config.catalog.name == "lake"
    assert not config.kafka.enabled
    assert config.warehouse_uri.startswith("file:///")


def test_yaml_then_environment_overrides(tmp_path: Path) -> None:
    path = tmp_path / "icemv.yaml"
    path.write_text(
        "catalog:\n  uri: postgresql://db:5432/lake\n  user: icemv\n"
        "polling:\n  interval_seconds: 10\n"
        "materialized_views:\n  - name: nyc.agg\n    sql: SELECT 1 AS one\n"
    )
    env = {
        "ICEMV_POLLING__INTERVAL_SECONDS": "5",
        "ICEMV_KAFKA__BOOTSTRAP_SERVERS": "[b1:9092, b2:9092]",
        "ICEMV_SPARK__CONF__spark.executor.memory": "4g",
        "ICEMV_HOME": "/var/lib/icemv",
        "UNRELATED": "x",
    }
    config = load_config(path, env)
    assert config.catalog.uri == "postgresql://db:5432/lake"
    assert config.polling.interval_seconds == 5
    assert config.kafka.bootstrap_servers == ["b1:9092", "b2:9092"]
    assert config.kafka.enabled
    assert config.spark.conf == {"spark.executor.memory": "4g"}
    assert config.home == "/var/lib/icemv"
    assert config.materialized_views[0].name == "nyc.agg"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"polling": {"interval_seconds": "soon"}}, "polling.interval_seconds"),
        ({"catalog": {"uri": "mysql://x/y"}}, "catalog.uri"),
        ({"kafka": {"security_protocol": "TLS"}}, "kafka.security_protocol"),
        ({"metrics": {"prot": 1}}, "metrics.prot"),
        ({"materialized_views": [{"name": "a"}]}, "materialized_views.0.sql"),
    ],
)
def test_errors_name_the_bad_key(raw: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    assert key in str(error.value)


def test_unreadable_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml", {})
    bad = tmp_path / "bad.yaml"
    bad.write_text("catalog: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, {})
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(scalar, {})


def test_masked_dump_hides_every_secret() -> None:
    config = parse_config(
        {
            "catalog": {"uri": "postgresql://u:hunter2@db/lake", "password": "s3cret"},
            "kafka": {"sasl_password": "k4fka"},
            "warehouse": {"properties": {"s3.secret-access-key": "aws-secret"}},
        }
    )
    text = repr(masked_dump(config))
    for secret in ("s3cret", "k4fka", "hunter2"):
        assert secret not in text
    assert "******" in text


def test_map_entries_from_the_environment_stay_strings() -> None:
    env = {
        "ICEMV_SPARK__CONF__spark.sql.shuffle.partitions": "8",
        "ICEMV_CATALOG__PROPERTIES__pool_size": "5",
        "ICEMV_WAREHOUSE__PROPERTIES__s3.path-style-access": "true",
        "ICEMV_SPARK__SHUFFLE_PARTITIONS": "3",  # a typed field still parses
    }
    config = load_config(None, env)
    assert config.spark.conf == {"spark.sql.shuffle.partitions": "8"}
    assert config.catalog.properties == {"pool_size": "5"}
    assert str(config.warehouse.properties["s3.path-style-access"]) in ("true", "**********")
    assert config.spark.shuffle_partitions == 3


def test_non_utf8_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"home: caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path, {})


def test_auto_full_ratio_is_deprecated_for_the_cost_factor() -> None:
    assert parse_config({}).refresh.auto_cost_factor == 1.5
    with pytest.warns(FutureWarning, match="auto_full_ratio is deprecated"):
        config = parse_config({"refresh": {"auto_full_ratio": 0.5}})
    assert config.refresh.auto_full_ratio == 0.5  # still loads, but nothing reads it
    with pytest.raises(ConfigError, match="auto_cost_factor"):
        parse_config({"refresh": {"auto_cost_factor": 0}})
