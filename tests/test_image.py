"""The built container image, run: `make image` builds it, these tests start it.

Without a container engine (tests/support/image.py): the image's root file system is mounted
from a buildah working container and each command runs chrooted into it, read-only, as the
image's user 10001, with the image's environment, and with the writable volumes and the
config file the Helm chart mounts. The config is the one the chart renders by default (the
embedded catalog, a file warehouse under /var/lib/icemv, a local Spark driver), or the one it
renders from deploy/values/rest-catalog.yaml, pointed at the REST test server on moto's S3.

`make test` builds the image first (`make image-test`: with the test S3 jars on Spark's
classpath) and sets ICEMV_REQUIRE_IMAGE=1, so a missing image fails there; elsewhere (no root,
no buildah, not built) these tests are skipped.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import helm_python as helm
import pyarrow as pa
import pytest
import yaml

from tests.conftest import create_database, drop_database
from tests.support.image import Mounted, PodLike, image_exists, image_name, mounted_image, pod_like
from tests.support.rest_catalog import RestCatalogServer, start_rest_catalog
from tests.support.s3 import REGION, S3Server, s3_test_jars, start_moto

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
MV = "nyc.pickup_agg"


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "running the image needs root (buildah mount, unshare, chroot)"
    if shutil.which("buildah") is None or shutil.which("unshare") is None:
        return "buildah or unshare not installed: run `make image`"
    if not image_exists(image_name()):
        return f"image {image_name()} not built: run `make image`"
    return None


@pytest.fixture(scope="module")
def image() -> Iterator[Mounted]:
    reason = _missing()
    if reason is not None:
        if os.environ.get("ICEMV_REQUIRE_IMAGE") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    with mounted_image(image_name()) as mounted:
        yield mounted


def chart_config(values: dict[str, Any] | None = None) -> str:
    """config.yaml as the chart renders it with `values` (default: its default values)."""
    with helm.Chart.load(ROOT / "helm" / "icemv") as chart:
        files = chart.render(values or {}, name="icemv", namespace="default")
    configmap = yaml.safe_load(files["icemv/templates/configmap.yaml"])
    text: str = configmap["data"]["config.yaml"]
    return text


@pytest.fixture(scope="module")
def pod(image: Mounted, tmp_path_factory: pytest.TempPathFactory) -> PodLike:
    config = yaml.safe_load(chart_config())
    # Two commands may run Spark at once in CI; keep the driver small.
    config["spark"]["driver_memory"] = "768m"
    return pod_like(image, tmp_path_factory.mktemp("pod"), yaml.safe_dump(config))


def test_image_runs_as_10001_on_a_read_only_root(pod: PodLike) -> None:
    config = pod.image.config
    assert config.user == "10001:10001"
    assert config.entrypoint == ["icemv"]
    assert config.cmd == ["run", "--config", "/etc/icemv/config.yaml"]
    probe = pod.run(
        [
            "/bin/sh",
            "-c",
            "id -u; id -g; touch /opt/icemv/x 2>&1 || echo root-ro;"
            " touch /tmp/x /var/lib/icemv/x && echo volumes-rw;"
            " touch /etc/icemv/x 2>&1 || echo config-ro;"
            " java -version 2>&1 | head -n 1; python3 --version;"
            " test -f /usr/share/java/postgresql.jar && echo jdbc",
        ],
        entrypoint=False,
    )
    assert probe.returncode == 0, probe.stderr
    lines = probe.stdout.splitlines()
    assert lines[:2] == ["10001", "10001"]
    assert "Read-only file system" in probe.stdout and "root-ro" in lines
    assert "volumes-rw" in lines and "config-ro" in lines
    assert any(re.match(r'openjdk version "17\.', line) for line in lines), lines
    assert "Python 3.11." in probe.stdout
    assert "jdbc" in lines
    # Nothing the image user writes outside the volumes: PYTHONDONTWRITEBYTECODE and co.
    assert config.env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_help(pod: PodLike) -> None:
    result = pod.run(["--help"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: icemv")
    for command in ("run", "refresh", "demo", "config"):
        assert re.search(rf"^\s+{command}\s", result.stdout, re.M), command


def test_config_show_reads_the_charts_config(pod: PodLike) -> None:
    # No --config: ICEMV_CONFIG from the image's environment points at the mounted file.
    result = pod.run(["config", "show"])
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["catalog"]["uri"] == "embedded"
    assert shown["home"] == "/var/lib/icemv"
    assert shown["spark"]["driver_memory"] == "768m"
    assert shown["metrics"]["host"] == "0.0.0.0"


def test_demo_then_full_refresh_on_the_embedded_default(pod: PodLike) -> None:
    # The quickstart inside the image: embedded PostgreSQL (pgserver wheel) under
    # /var/lib/icemv, nyc.taxis and the MV created, the daemon refreshing it as rows arrive.
    demo = pod.run(["demo", "--seconds", "20", "--interval", "5"], timeout=900)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "wrote 5000 rows to nyc.taxis" in demo.stdout
    assert f"created materialized view {MV}" in demo.stdout
    # First-run output: no Spark start-up WARN lines; a state that is not fresh says why.
    output = demo.stdout + demo.stderr
    assert not [line for line in output.splitlines() if " WARN " in line], output[-3000:]
    states = [line for line in demo.stdout.splitlines() if f"{MV} " in line and "staleness" in line]
    assert states, demo.stdout[-3000:]
    assert not [s for s in states if re.search(r"\b(stale|invalid)\b(?! \()", s)], states
    # The demo's MV (fares summed per `date(pickup_ts)` and vendor) refreshes
    # its appends on the embedded engine, and the demo says so.
    incremental = [line for line in demo.stdout.splitlines() if ": incremental (" in line]
    assert incremental, demo.stdout[-3000:]
    assert all(", engine duckdb," in line for line in incremental), incremental
    assert (pod.work / "warehouse").is_dir()
    # A second process: the embedded catalog's data survived on the volume; a forced full
    # refresh recomputes the MV with Spark in the image.
    refresh = pod.run(["refresh", "--full", MV], timeout=900)
    assert refresh.returncode == 0, refresh.stdout[-3000:] + refresh.stderr[-3000:]
    status = pod.run(["status"], timeout=300)
    assert status.returncode == 0, status.stderr[-3000:]
    assert MV in status.stdout
    # Everything written went to the volumes, owned by the image's user.
    owners = {p.stat().st_uid for p in pod.work.rglob("*")}
    assert owners == {10001}, owners


def test_executor_command_is_in_the_image_with_sparks_kubernetes_backend(pod: PodLike) -> None:
    # What Spark on Kubernetes starts in executor pods (the chart's pod template); outside
    # Spark it refuses to start, naming what is missing.
    result = pod.run(["/usr/local/bin/spark-executor", "executor"], entrypoint=False)
    assert result.returncode != 0
    assert "SPARK_DRIVER_URL" in result.stderr
    jars = pod.run(
        ["/bin/sh", "-c", 'ls "$SPARK_HOME"/jars/spark-kubernetes_2.12-*.jar && command -v java'],
        entrypoint=False,
    )
    assert jars.returncode == 0, jars.stderr
    assert (
        "/opt/icemv/lib/python3.11/site-packages/pyspark/jars/spark-kubernetes_2.12-" in jars.stdout
    )


# ---- the REST catalog example on S3 ------------------------------------------------------

REST_VALUES = ROOT / "deploy" / "values" / "rest-catalog.yaml"
ORDERS = pa.schema(
    [
        ("id", pa.int64()),
        ("country", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("ordered_at", pa.timestamp("us")),
    ]
)


def _orders(first_id: int, count: int) -> pa.Table:
    ids = range(first_id, first_id + count)
    return pa.table(
        {
            "id": list(ids),
            "country": [("DE", "FR", "PL")[i % 3] for i in ids],
            "amount": [Decimal(i * 37 % 1000) / 100 for i in ids],
            "ordered_at": [
                datetime.datetime(2026, 3, 1) + datetime.timedelta(hours=7 * i) for i in ids
            ],
        },
        schema=ORDERS,
    )


def _expected(orders: pa.Table) -> list[tuple[Any, ...]]:
    """The example MV (orders and revenue per day and country), computed here."""
    groups: dict[tuple[Any, ...], tuple[int, Decimal]] = {}
    for row in orders.to_pylist():
        key = (row["ordered_at"].date(), row["country"])
        count, revenue = groups.get(key, (0, Decimal("0.00")))
        groups[key] = (count + 1, revenue + row["amount"])
    return sorted((*key, *value) for key, value in groups.items())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def rest_on_s3(
    image: Mounted, pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RestCatalogServer, S3Server, str]]:
    """moto's S3 API and the REST test server with its warehouse in a bucket there (its
    S3FileIO on the test jars): what a Polaris or Lakekeeper deployment looks like."""
    s3, moto = start_moto()
    bucket = s3.create_bucket()
    url = create_database(pg_admin_url)
    parts = urlsplit(url)
    properties = {
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "http-client.type": "urlconnection",
        **s3.warehouse(bucket)["properties"],
    }
    server = start_rest_catalog(
        f"jdbc:postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}",
        parts.username,
        f"s3://{bucket}/warehouse",
        tmp_path_factory.mktemp("rest-s3-log") / "server.log",
        properties=properties,
        jars=s3_test_jars(),
    )
    try:
        yield server, s3, bucket
    finally:
        server.stop()
        drop_database(pg_admin_url, url)
        moto.stop()


def _image_has_s3_jars(pod: PodLike) -> bool:
    probe = pod.run(
        ["/bin/sh", "-c", 'ls /opt/icemv/jars/ | grep -E "^(iceberg-aws|hadoop-aws)-"'],
        entrypoint=False,
    )
    return len(probe.stdout.split()) == 2


def test_daemon_in_the_image_keeps_the_rest_example_fresh_on_s3(
    pod: PodLike,
    rest_on_s3: tuple[RestCatalogServer, S3Server, str],
    tmp_path: Path,
) -> None:
    # deploy/values/rest-catalog.yaml as shipped, but for where its servers are: the REST
    # test server and moto, and the S3 jars baked into the image (`make image-test`) instead
    # of spark.packages downloads, which nothing reaches here.
    if not _image_has_s3_jars(pod):
        message = "the image has no S3 jars: build it with `make image-test`"
        if os.environ.get("ICEMV_REQUIRE_IMAGE") == "1":
            pytest.fail(message)
        pytest.skip(message)
    server, s3, bucket = rest_on_s3
    values = yaml.safe_load(REST_VALUES.read_text())
    config = values["config"]
    config["catalog"].update(uri=server.uri, warehouse=server.prefix, scope="catalog")
    config["warehouse"]["location"] = f"s3://{bucket}/warehouse"
    config["warehouse"]["properties"] = {
        "s3.endpoint": s3.endpoint,
        "s3.path-style-access": "true",
        "client.region": REGION,
    }
    del config["spark"]["packages"]
    config["spark"]["extra_jars"] = ["/opt/icemv/jars/*.jar"]
    config["spark"]["driver_memory"] = "768m"
    config["polling"]["interval_seconds"] = 2
    rendered = yaml.safe_load(chart_config(values))
    rendered["metrics"]["port"] = _free_port()
    rest_pod = pod_like(pod.image, tmp_path / "pod", yaml.safe_dump(rendered))
    # The chart's Secret-backed environment: the OAuth2 client credential, the S3 keys.
    env = {
        "ICEMV_CATALOG__CREDENTIAL": server.credential,
        "AWS_ACCESS_KEY_ID": s3.access_key_id,
        "AWS_SECRET_ACCESS_KEY": s3.secret_access_key,
        "AWS_REGION": REGION,
    }
    from pyiceberg.catalog import load_catalog

    lake = load_catalog(
        "lake",
        type="rest",
        uri=server.uri,
        credential=server.credential,
        scope="catalog",
        warehouse=server.prefix,
        **s3.warehouse(bucket)["properties"],
    )
    lake.create_namespace("sales")
    source = lake.create_table("sales.orders", schema=ORDERS)
    orders = _orders(0, 200)
    source.append(orders)

    def storage_rows() -> list[tuple[Any, ...]] | None:
        names = [n for n in lake.list_tables("analytics") if n[-1].endswith("__storage")]
        if not names:
            return None
        storage = lake.load_table(names[0])
        columns = [f.name for f in storage.schema().fields if not f.name.startswith("_icemv_")]
        rows = storage.scan(selected_fields=tuple(columns)).to_arrow().to_pylist()
        return sorted(tuple(row.values()) for row in rows)

    def wait_for(expected: list[tuple[Any, ...]], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if lake.namespace_exists("analytics") and storage_rows() == expected:
                return
            assert daemon.process.poll() is None, daemon.log.read_text()[-3000:]
            time.sleep(1)
        pytest.fail(f"the MV did not become {expected}: {daemon.log.read_text()[-3000:]}")

    daemon = rest_pod.start(["run"], tmp_path / "run.log", env)
    try:
        # The daemon creates the configured MV and fills it (Spark in the image), then
        # refreshes an append it finds by polling.
        wait_for(_expected(orders), 600)
        more = _orders(200, 50)
        source.append(more)
        wait_for(_expected(pa.concat_tables([orders, more])), 300)
    finally:
        code = daemon.stop()
    log = daemon.log.read_text()
    assert code == 0, log[-3000:]
    # The example's append is refreshed on the embedded engine (its `date(ordered_at)` of a
    # TIMESTAMP_NTZ is admitted), reading the new rows from S3 with pyiceberg.
    incremental = [line for line in log.splitlines() if '"mode": "incremental"' in line]
    assert incremental, log[-3000:]
    assert all('"engine": "duckdb"' in line for line in incremental), incremental
    for secret in (server.credential, s3.secret_access_key):
        assert secret not in log
    # The storage table's data and metadata went to the bucket.
    keys = s3.object_keys(bucket)
    assert any(k.startswith("warehouse/analytics/") and k.endswith(".parquet") for k in keys), keys
