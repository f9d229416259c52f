"""Storage and Spark settings as pure logic: S3 FileIO, extra jars, secrets, catalog URLs."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from icemv.catalog.backends import open_backend
from icemv.catalog.jdbc import resolve_endpoint
from icemv.config import parse_config
from icemv.engine.jvm_output import LOG4J2_CONFIG
from icemv.engine.spark import JAVA_OPTIONS_KEY, S3_FILE_IO, launch_settings, spark_conf
from icemv.errors import ConfigError, SparkSetupError

PASSWORD = "p@ss:w/rd%?#"


def test_a_password_with_url_characters_survives_the_catalog_url() -> None:
    config = parse_config(
        {"catalog": {"uri": "postgresql://db:6543/lake", "user": "ice", "password": PASSWORD}}
    )
    endpoint = resolve_endpoint(config)
    url = make_url(endpoint.sqlalchemy_url)
    assert (url.username, url.password, url.host, url.port, url.database) == (
        "ice",
        PASSWORD,
        "db",
        6543,
        "lake",
    )
    assert endpoint.jdbc_url == "jdbc:postgresql://db:6543/lake"
    assert PASSWORD not in endpoint.jdbc_url


def test_a_percent_encoded_password_in_the_uri_is_decoded_once() -> None:
    config = parse_config({"catalog": {"uri": "postgresql://ice:p%40ss%3Aw%2Frd@db/lake?x=1"}})
    endpoint = resolve_endpoint(config)
    assert endpoint.password == "p@ss:w/rd"
    url = make_url(endpoint.sqlalchemy_url)
    assert (url.password, url.query) == ("p@ss:w/rd", {"x": "1"})


def test_spark_connect_is_refused_with_one_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"spark\.remote.*not supported.*spark://"):
        parse_config({"spark": {"remote": "sc://spark:15002"}})
    assert parse_config({"spark": {"remote": None}}).spark.master == "local[2]"


def s3_config(**spark: object) -> dict[str, object]:
    return {
        "catalog": {"uri": "postgresql://db/lake", "user": "ice", "password": PASSWORD},
        "warehouse": {
            "location": "s3://bucket/wh",
            "properties": {
                "s3.endpoint": "http://127.0.0.1:9000",
                "s3.path-style-access": "true",
                "client.region": "eu-west-1",
                "s3.access-key-id": "AKIDEXAMPLE",
                "s3.secret-access-key": "s3-secret",
            },
        },
        "spark": {"jdbc_driver_jars": [], "iceberg_jar": "/jars/iceberg.jar", **spark},
    }


def test_an_s3_warehouse_configures_both_file_systems_from_one_set_of_properties() -> None:
    config = parse_config(s3_config(extra_jars=["/jars/aws-bundle.jar"]))
    conf = spark_conf(config, open_backend(config))
    assert conf["spark.sql.catalog.lake.io-impl"] == S3_FILE_IO
    assert conf["spark.sql.catalog.lake.warehouse"] == "s3://bucket/wh"
    assert conf["spark.sql.catalog.lake.s3.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.sql.catalog.lake.client.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "s3-secret"
    # extra_jars add to icemv's jars instead of replacing them.
    assert conf["spark.jars"] == "/jars/iceberg.jar,/jars/aws-bundle.jar"


def test_a_local_warehouse_gets_no_s3_settings() -> None:
    config = parse_config({"catalog": {"uri": "postgresql://db/lake"}})
    conf = spark_conf(config, open_backend(config))
    assert not any("s3" in key for key in conf)


def test_only_launch_settings_reach_the_command_line() -> None:
    config = parse_config(s3_config(packages=["org.apache.iceberg:iceberg-aws-bundle:1.10.2"]))
    conf = spark_conf(config, open_backend(config))
    launch = launch_settings(conf)
    secrets = {
        "spark.sql.catalog.lake.jdbc.password",
        "spark.sql.catalog.lake.s3.access-key-id",
        "spark.sql.catalog.lake.s3.secret-access-key",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.s3a.secret.key",
    }
    assert secrets <= set(conf) and not secrets & set(launch)
    assert not any(value in (PASSWORD, "s3-secret") for value in launch.values())
    assert launch["spark.jars.packages"] == "org.apache.iceberg:iceberg-aws-bundle:1.10.2"
    assert "spark.sql.catalog.lake.jdbc.user" not in launch


def test_a_secret_looking_launch_setting_is_refused() -> None:
    config = parse_config(s3_config(conf={"spark.driver.keystore.password": "x"}))
    with pytest.raises(SparkSetupError, match=r"spark\.driver\.keystore\.password looks secret"):
        launch_settings(spark_conf(config, open_backend(config)))


def test_the_aws_bundle_as_a_package_keeps_the_iceberg_runtime() -> None:
    bundle = "org.apache.iceberg:iceberg-aws-bundle:1.10.2"
    config = parse_config(s3_config(iceberg_jar=None, packages=[bundle]))
    conf = spark_conf(config, open_backend(config))
    assert conf["spark.jars.packages"] == bundle
    assert "iceberg-spark-runtime-3.5_2.12-" in conf["spark.jars"]
    runtime = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
    config = parse_config(s3_config(iceberg_jar=None, packages=[runtime, bundle]))
    assert "spark.jars" not in spark_conf(config, open_backend(config))


def test_the_driver_jvm_logs_json_at_the_configured_level_unless_told_otherwise() -> None:
    config = parse_config({"catalog": {"uri": "postgresql://db/lake"}})
    options = launch_settings(spark_conf(config, open_backend(config)))[JAVA_OPTIONS_KEY]
    assert options.split() == [
        f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}",
        "-Dicemv.spark.log.level=WARN",
    ]
    assert LOG4J2_CONFIG.is_file()
    assert spark_conf(config, open_backend(config))["spark.ui.showConsoleProgress"] == "false"
    own = "-Dlog4j2.configurationFile=file:///etc/mine.xml -Xss4m"
    config = parse_config(
        {
            "catalog": {"uri": "postgresql://db/lake"},
            "logging": {"spark_level": "error"},
            "spark": {"conf": {JAVA_OPTIONS_KEY: own}},
        }
    )
    options = spark_conf(config, open_backend(config))[JAVA_OPTIONS_KEY]
    # Later options win on the java command line: the user's own file replaces icemv's.
    assert options.endswith(f" {own}") and "-Dicemv.spark.log.level=ERROR" in options


def test_spark_schedules_fair_unless_the_config_says_otherwise() -> None:
    config = parse_config({"catalog": {"uri": "postgresql://db/lake"}})
    conf = spark_conf(config, open_backend(config))
    assert conf["spark.scheduler.mode"] == "FAIR"
    assert "spark.scheduler.mode" not in launch_settings(conf)  # set over the gateway
    config = parse_config(
        {
            "catalog": {"uri": "postgresql://db/lake"},
            "spark": {"conf": {"spark.scheduler.mode": "FIFO"}},
        }
    )
    assert spark_conf(config, open_backend(config))["spark.scheduler.mode"] == "FIFO"
