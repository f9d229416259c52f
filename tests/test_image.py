"""The built container image, run: `make image` builds it, these tests start it.

Without a container engine (tests/support/image.py): the image's root file system is mounted
from a buildah working container and each command runs chrooted into it, read-only, as the
image's user 10001, with the image's environment, and with the writable volumes and the
config file the Helm chart mounts. The config is the one the chart renders by default: the
embedded catalog, a file warehouse under /var/lib/icemv, a local Spark driver.

`make test` builds the image first and sets ICEMV_REQUIRE_IMAGE=1, so a missing image fails
there; elsewhere (no root, no buildah, not built) these tests are skipped.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from tests.support.image import Mounted, PodLike, image_exists, image_name, mounted_image, pod_like

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


def chart_config() -> str:
    """config.yaml as the chart renders it with its default values."""
    with helm.Chart.load(ROOT / "helm" / "icemv") as chart:
        files = chart.render({}, name="icemv", namespace="default")
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
