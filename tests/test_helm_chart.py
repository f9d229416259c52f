"""The Helm chart (helm/icemv), the example values (deploy/values) and the dashboard.

Rendered and linted with Helm's own library (helm-python-sdk: no helm binary, no cluster),
for the defaults and each example values file; every manifest is validated against the
Kubernetes JSON schemas (kubernetes-validate, strict: unknown fields fail), the rendered
config against icemv's config model, and every PromQL expression (alerts and dashboard) is
parsed and checked against the metrics icemv exports.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import math
import re
import zipfile
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import promql_parser
import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

import icemv.refresh.policy
from icemv.cli.parser import build_parser
from icemv.config import Config, MaterializedViewSpec, load_config, parse_config
from icemv.format.summary import RefreshReason
from icemv.service.metrics import METRIC_NAMES, Metrics

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "helm" / "icemv"
EXAMPLES = sorted((ROOT / "deploy" / "values").glob("*.yaml"))
DASHBOARD = ROOT / "deploy" / "grafana" / "icemv-dashboard.json"
RELEASE, NAMESPACE = "icemv", "data"
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest schema.
KUBE_VERSIONS = ("1.25.0", kubernetes_validate.utils.latest_version())
WRITABLE = ("/tmp", "/var/lib/icemv")
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"namespace", "job", "pod", "instance", "service", "container", "endpoint"}
# Config fields the chart's schema deliberately leaves out.
NOT_OFFERED = {"spark": {"remote"}}
EXPECTED_FULL_REASONS = {"never-refreshed", "definition-changed", "requested", "policy-full"}

CASES = [pytest.param(None, id="defaults")] + [pytest.param(p, id=p.stem) for p in EXAMPLES]


def load_values(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    values: dict[str, Any] = yaml.safe_load(path.read_text())
    return values


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@pytest.fixture(scope="module")
def chart() -> Any:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


class Rendered:
    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.docs: list[dict[str, Any]] = []
        for name, text in files.items():
            if not name.endswith(".yaml"):
                continue
            self.docs += [doc for doc in yaml.safe_load_all(text) if doc]

    def kinds(self) -> list[str]:
        return sorted(doc["kind"] for doc in self.docs)

    def one(self, kind: str) -> dict[str, Any]:
        found = [doc for doc in self.docs if doc["kind"] == kind]
        assert len(found) == 1, f"{len(found)} {kind}s rendered"
        return found[0]

    def maybe(self, kind: str) -> dict[str, Any] | None:
        found = [doc for doc in self.docs if doc["kind"] == kind]
        return found[0] if found else None

    @property
    def deployment(self) -> dict[str, Any]:
        return self.one("Deployment")

    @property
    def pod(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.deployment["spec"]["template"]["spec"]
        return spec

    @property
    def container(self) -> dict[str, Any]:
        (container,) = self.pod["containers"]
        assert container["name"] == "icemv"
        return dict(container)

    @property
    def config_text(self) -> str:
        text: str = self.one("ConfigMap")["data"]["config.yaml"]
        return text

    @property
    def config(self) -> dict[str, Any]:
        raw: dict[str, Any] = yaml.safe_load(self.config_text)
        return raw

    @property
    def notes(self) -> str:
        return self.files[f"{CHART.name}/templates/NOTES.txt"]


def render(chart: Any, values: dict[str, Any] | None = None) -> Rendered:
    return Rendered(chart.render(values or {}, name=RELEASE, namespace=NAMESPACE))


def missing_s3_jars(config: Config) -> list[str]:
    """The S3 jars an s3:// warehouse needs that the config does not name (the image has
    neither Iceberg's S3 FileIO nor S3A)."""
    if not config.warehouse_uri.startswith(("s3://", "s3a://")):
        return []
    jars = " ".join([*config.spark.packages, *config.spark.extra_jars])
    return [jar for jar in ("iceberg-aws", "hadoop-aws") if jar not in jars]


@pytest.mark.parametrize("values_file", CASES)
def test_an_s3_warehouse_brings_the_s3_jars(chart: Any, values_file: Path | None) -> None:
    config = parse_config(render(chart, load_values(values_file)).config)
    assert missing_s3_jars(config) == [], values_file


def test_an_s3_warehouse_without_the_jars_is_caught(chart: Any) -> None:
    values = load_values(ROOT / "deploy/values/postgres-kafka.yaml")
    del values["config"]["spark"]["packages"]
    config = parse_config(render(chart, values).config)
    assert missing_s3_jars(config) == ["iceberg-aws", "hadoop-aws"]


def render_error(chart: Any, values: dict[str, Any]) -> str:
    with pytest.raises(helm.HelmError) as caught:
        chart.render(values, name=RELEASE, namespace=NAMESPACE)
    return str(caught.value)


# ---- quantities --------------------------------------------------------------------------

_K8S_UNITS = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3}
_K8S_UNITS |= {"M": 10**6, "G": 10**9, "T": 10**12}
_SPARK_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def k8s_bytes(quantity: str | int) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]i|[kMGT])?", str(quantity))
    assert match, f"not a memory quantity: {quantity!r}"
    return int(float(match.group(1)) * _K8S_UNITS[match.group(2) or ""])


def spark_bytes(memory: str) -> int:
    match = re.fullmatch(r"(\d+)([kmgtKMGT])?", memory)
    assert match, f"not a Spark memory size: {memory!r}"
    return int(match.group(1)) * _SPARK_UNITS[(match.group(2) or "m").lower()]


# ---- lint, schema, Kubernetes schemas ------------------------------------------------------


@pytest.mark.parametrize("values_file", CASES)
def test_chart_lints_clean(values_file: Path | None) -> None:
    values = load_values(values_file)
    report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE)
    assert report["total_charts_linted"] == 1
    assert report["errors"] == []
    # Severity 2 = warning, 3 = error; the only info is "icon is recommended".
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("values_file", CASES)
def test_values_pass_the_chart_schema_and_render(chart: Any, values_file: Path | None) -> None:
    values = load_values(values_file)
    chart.validate_schema(values)
    rendered = render(chart, values)
    kinds = rendered.kinds()
    for kind in ("ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"):
        assert kind in kinds
    assert len(kinds) == len({(d["kind"], d["metadata"]["name"]) for d in rendered.docs})
    for doc in rendered.docs:
        assert doc["metadata"]["namespace"] == NAMESPACE
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE


@pytest.mark.parametrize("values_file", CASES)
def test_manifests_are_valid_kubernetes_objects(chart: Any, values_file: Path | None) -> None:
    rendered = render(chart, load_values(values_file))
    checked = 0
    for doc in rendered.docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            validate_prometheus_operator_object(doc)
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{doc['kind']} invalid for Kubernetes {version}: {exc}")
        checked += 1
    assert checked >= 5


def test_kubernetes_schema_validation_catches_mistakes(chart: Any) -> None:
    deployment = render(chart).deployment
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"][
        "pathh"
    ] = "/readyz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSIONS[0], strict=True)


_DURATION = {"type": "string", "pattern": r"^(0|([0-9]+(ms|s|m|h|d|w|y))+)$"}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA = {
    "type": "object",
    "required": ["name", "namespace"],
    "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
}
# The parts of the Prometheus Operator CRDs (monitoring.coreos.com/v1) the chart uses.
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": _STRING_MAP},
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchNames": {"type": "array", "items": {"type": "string"}}},
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": _DURATION,
                            "scrapeTimeout": _DURATION,
                            "relabelings": {"type": "array"},
                            "metricRelabelings": {"type": "array"},
                        },
                    },
                },
            },
        },
    },
}
PROMETHEUS_RULE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": _DURATION,
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["expr"],
                                    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                                    "properties": {
                                        "alert": {"type": "string", "minLength": 1},
                                        "record": {"type": "string", "minLength": 1},
                                        "expr": {"type": ["string", "integer"]},
                                        "for": _DURATION,
                                        "keep_firing_for": _DURATION,
                                        "labels": _STRING_MAP,
                                        "annotations": _STRING_MAP,
                                    },
                                },
                            },
                        },
                    },
                }
            },
        },
    },
}


def validate_prometheus_operator_object(doc: dict[str, Any]) -> None:
    schema = {"ServiceMonitor": SERVICE_MONITOR_SCHEMA, "PrometheusRule": PROMETHEUS_RULE_SCHEMA}
    jsonschema.Draft7Validator(schema[doc["kind"]]).validate(doc)


# ---- the Deployment ----------------------------------------------------------------------


@pytest.mark.parametrize("values_file", CASES)
def test_probes_and_ports(chart: Any, values_file: Path | None) -> None:
    rendered = render(chart, load_values(values_file))
    container = rendered.container
    port, *spark_ports = container["ports"]
    # Spark on Kubernetes adds the driver's ports (test_spark_on_kubernetes_driver_settings).
    assert [p["name"] for p in spark_ports] in ([], ["spark-driver", "spark-blockmgr"])
    assert port == {
        "name": "http",
        "containerPort": rendered.config["metrics"]["port"],
        "protocol": "TCP",
    }
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert container[probe]["httpGet"] == {"path": path, "port": "http"}, probe
        assert container[probe]["timeoutSeconds"] < container[probe]["periodSeconds"]
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 120  # Spark + apply
    (service,) = (
        d for d in rendered.docs if d["kind"] == "Service" and d["metadata"]["name"] == RELEASE
    )
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 9108, "targetPort": "http", "protocol": "TCP"}
    ]
    pod_labels = rendered.deployment["spec"]["template"]["metadata"]["labels"]
    selector = rendered.deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert service["spec"]["selector"] == selector
    assert rendered.one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == selector


@pytest.mark.parametrize("values_file", CASES)
def test_security_context_and_writable_volumes(chart: Any, values_file: Path | None) -> None:
    rendered = render(chart, load_values(values_file))
    pod, container = rendered.pod, rendered.container
    dockerfile_user = re.search(r"^USER (\d+):(\d+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert dockerfile_user is not None
    uid, gid = int(dockerfile_user.group(1)), int(dockerfile_user.group(2))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == uid
    assert pod["securityContext"]["fsGroup"] == gid
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = container["securityContext"]
    assert context["runAsNonRoot"] is True and context["runAsUser"] == uid
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    # Only Spark on Kubernetes calls the API (to start executor pods).
    spark_on_kubernetes = deep_merge(chart.values, load_values(values_file))["sparkOnKubernetes"]
    assert pod["automountServiceAccountToken"] is spark_on_kubernetes["enabled"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(WRITABLE) <= set(mounts)
    assert "emptyDir" in volumes[mounts["/tmp"]]
    work = volumes[mounts["/var/lib/icemv"]]
    assert "emptyDir" in work or "persistentVolumeClaim" in work
    # Everything icemv writes lies on those volumes.
    config = parse_config(rendered.config)
    assert config.home_path.as_posix().startswith(WRITABLE)
    if "://" not in config.warehouse.location:
        assert config.warehouse.location.startswith(WRITABLE)


@pytest.mark.parametrize("values_file", CASES)
def test_resources_fit_the_spark_driver(chart: Any, values_file: Path | None) -> None:
    rendered = render(chart, load_values(values_file))
    resources = rendered.container["resources"]
    request, limit = (k8s_bytes(resources[k]["memory"]) for k in ("requests", "limits"))
    assert request <= limit
    assert "cpu" in resources["requests"]
    config = parse_config(rendered.config)
    heap = spark_bytes(config.spark.driver_memory)
    assert heap <= request, "the driver heap alone exceeds the memory request"
    # JVM off-heap (metaspace, threads, Netty) and the Python process need room too, and
    # each refresh worker process 300 MiB (250-300 MB measured, docs/benchmarks.md).
    workers = min(config.refresh.processes, config.refresh.max_concurrent)
    assert heap + 768 * 2**20 + workers * 300 * 2**20 <= limit, (
        "driver_memory and the refresh workers too close to the memory limit"
    )
    # Without a CPU limit both default to the node's cores: the chart sets them.
    refresh = rendered.config["refresh"]
    if "cpu" not in resources.get("limits", {}):
        assert {"max_concurrent", "processes"} <= set(refresh), refresh


@pytest.mark.parametrize("values_file", CASES)
def test_termination_grace_follows_the_shutdown_grace(chart: Any, values_file: Path | None) -> None:
    values = load_values(values_file)
    rendered = render(chart, values)
    grace = parse_config(rendered.config).refresh.shutdown_grace_seconds
    margin = deep_merge(chart.values, values)["terminationGracePeriodMarginSeconds"]
    assert margin >= 10
    assert rendered.pod["terminationGracePeriodSeconds"] == math.ceil(grace) + margin
    bumped = deep_merge(values, {"config": {"refresh": {"shutdown_grace_seconds": 600.5}}})
    assert render(chart, bumped).pod["terminationGracePeriodSeconds"] == 601 + margin
    tight = deep_merge(bumped, {"terminationGracePeriodMarginSeconds": 12})
    assert render(chart, tight).pod["terminationGracePeriodSeconds"] == 613


@pytest.mark.parametrize("values_file", CASES)
def test_rendered_config_is_what_icemv_accepts(
    chart: Any, values_file: Path | None, tmp_path: Path
) -> None:
    values = load_values(values_file)
    rendered = render(chart, values)
    config = parse_config(rendered.config)
    assert config.metrics.host in ("0.0.0.0", "::")
    assert config.metrics.port == rendered.container["ports"][0]["containerPort"]
    declared = deep_merge(chart.values, values)["config"].get("materialized_views", [])
    assert [mv.name for mv in config.materialized_views] == [mv["name"] for mv in declared]
    # icemv reads the mounted file, with the Deployment's environment on top.
    args = build_parser().parse_args(rendered.container["args"])
    assert args.command == "run"
    mount = next(m for m in rendered.container["volumeMounts"] if m["name"] == "config")
    assert mount["readOnly"] is True
    assert args.config == f"{mount['mountPath']}/config.yaml"
    (volume,) = (v for v in rendered.pod["volumes"] if v["name"] == "config")
    assert volume["configMap"]["name"] == rendered.one("ConfigMap")["metadata"]["name"]
    env = {e["name"]: e for e in rendered.container["env"]}
    assert env["ICEMV_CONFIG"]["value"] == args.config
    path = tmp_path / "config.yaml"
    path.write_text(rendered.config_text)
    environment = {
        name: entry.get("value", "from-a-secret")
        for name, entry in env.items()
        if name.startswith("ICEMV_") and "__" in name
    }
    per_pod = {  # fields of the pod itself (downward API), e.g. the Spark driver's pod name
        name: entry["valueFrom"]["fieldRef"]["fieldPath"]
        for name, entry in env.items()
        if "fieldRef" in entry.get("valueFrom", {})
    }
    loaded = load_config(path, environment)
    expected = config.model_dump(exclude={"catalog", "kafka"})
    for name in per_pod:
        section, field, key = name.removeprefix("ICEMV_").split("__")
        expected[section.lower()][field.lower()][key] = "from-a-secret"
    assert loaded.model_dump(exclude={"catalog", "kafka"}) == expected
    assert (loaded.catalog.password is not None) == ("ICEMV_CATALOG__PASSWORD" in env)
    assert (loaded.kafka.sasl_password is not None) == ("ICEMV_KAFKA__SASL_PASSWORD" in env)
    if config.kafka.security_protocol.startswith("SASL"):
        assert "ICEMV_KAFKA__SASL_PASSWORD" in env
    assert (loaded.catalog.credential is not None) == ("ICEMV_CATALOG__CREDENTIAL" in env)
    if config.catalog.type == "rest":  # its credentials, never in the ConfigMap
        assert {"ICEMV_CATALOG__CREDENTIAL", "ICEMV_CATALOG__TOKEN"} & env.keys()
        assert config.catalog.credential is None and config.catalog.token is None
    elif not config.catalog.embedded:
        assert "ICEMV_CATALOG__PASSWORD" in env
    assert not re.search(r"^\s*(sasl_)?password:", rendered.config_text, re.MULTILINE)


def test_config_values_merge_into_the_defaults(chart: Any) -> None:
    rendered = render(chart, {"config": {"polling": {"interval_seconds": 7}}})
    assert rendered.config["polling"] == {"interval_seconds": 7}
    defaults = render(chart).config
    assert {k: v for k, v in rendered.config.items() if k != "polling"} == {
        k: v for k, v in defaults.items() if k != "polling"
    }
    assert defaults["spark"]["driver_memory"] == "1500m"
    assert defaults["metrics"] == {"host": "0.0.0.0", "port": 9108}


def test_a_config_change_rolls_the_pods(chart: Any) -> None:
    def checksum(values: dict[str, Any]) -> str:
        annotations = render(chart, values).deployment["spec"]["template"]["metadata"]
        value: str = annotations["annotations"]["checksum/config"]
        return value

    base = checksum({})
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    assert checksum({}) == base
    mv = {"name": "a.b", "sql": "SELECT 1 AS one"}
    assert checksum({"config": {"materialized_views": [mv]}}) != base
    assert checksum({"config": {"logging": {"level": "DEBUG"}}}) != base
    assert checksum({"replicaCount": 1, "podLabels": {"team": "data"}}) == base


def test_strategy_and_volume_follow_the_catalog(chart: Any) -> None:
    embedded = render(chart, load_values(ROOT / "deploy/values/embedded-single-pod.yaml"))
    assert embedded.deployment["spec"]["strategy"] == {"type": "Recreate"}
    claim = embedded.one("PersistentVolumeClaim")
    work = next(v for v in embedded.pod["volumes"] if v["name"] == "work")
    assert work["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert "embedded PostgreSQL" in embedded.notes
    # The default values must not roll a second embedded PostgreSQL onto the same data either.
    assert render(chart).deployment["spec"]["strategy"] == {"type": "Recreate"}
    shared = render(chart, load_values(ROOT / "deploy/values/postgres-kafka.yaml"))
    assert shared.deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert shared.deployment["spec"]["replicas"] == 2
    assert shared.maybe("PersistentVolumeClaim") is None
    assert shared.one("PodDisruptionBudget")["spec"] == {
        "minAvailable": 1,
        "selector": shared.deployment["spec"]["selector"],
    }


def test_spark_connect_is_not_offered(chart: Any) -> None:
    # No Spark 3.5 Connect server can be tested here, and the incremental path needs the JVM.
    schema_error = render_error(chart, {"config": {"spark": {"remote": "sc://spark:15002"}}})
    assert "'remote' not allowed" in schema_error
    for path in [CHART / "values.yaml", *EXAMPLES, *(CHART / "templates").iterdir()]:
        assert not re.search(r"spark connect|\bsc://|spark\.remote", path.read_text(), re.I), path
    assert "executors in the pod too (local[2])" in render(chart).notes


# ---- Spark on Kubernetes -----------------------------------------------------------------

SPARK_K8S_VALUES = ROOT / "deploy" / "values" / "spark-on-kubernetes.yaml"
SPARK_JARS = Path(importlib.util.find_spec("pyspark").origin).parent / "jars"  # type: ignore[union-attr,arg-type]


def spark_kubernetes_keys() -> set[str]:
    """Every spark.kubernetes.* key Spark 3.5 knows: the string constants of its Config,
    and its prefixes joined with its suffixes (spark.kubernetes.authenticate.driver +
    .serviceAccountName)."""
    (jar,) = SPARK_JARS.glob("spark-kubernetes_2.12-*.jar")
    with zipfile.ZipFile(jar) as archive:
        data = archive.read("org/apache/spark/deploy/k8s/Config$.class")
    keys = {m.decode() for m in re.findall(rb"spark\.kubernetes\.[A-Za-z0-9.]+", data)}
    suffixes = {m.decode() for m in re.findall(rb"(?<![A-Za-z0-9.])\.[a-z][A-Za-z]+", data)}
    return keys | {key + suffix for key in keys for suffix in suffixes}


def executor_pod_template(rendered: Rendered) -> dict[str, Any]:
    config = parse_config(rendered.config)
    path = Path(config.spark.conf["spark.kubernetes.executor.podTemplateFile"])
    mount = next(m for m in rendered.container["volumeMounts"] if m["name"] == "config")
    assert path.parent.as_posix() == mount["mountPath"]  # the driver reads it from the ConfigMap
    template: dict[str, Any] = yaml.safe_load(rendered.one("ConfigMap")["data"][path.name])
    return template


def test_spark_on_kubernetes_is_off_by_default(chart: Any) -> None:
    rendered = render(chart)
    config = parse_config(rendered.config)
    assert config.spark.master.startswith("local[")
    assert not any(key.startswith("spark.kubernetes.") for key in config.spark.conf)
    assert rendered.maybe("Role") is None and rendered.maybe("RoleBinding") is None
    assert [doc["metadata"]["name"] for doc in rendered.docs if doc["kind"] == "Service"] == [
        "icemv"
    ]
    assert set(rendered.one("ConfigMap")["data"]) == {"config.yaml"}
    assert [p["name"] for p in rendered.container["ports"]] == ["http"]


def test_spark_on_kubernetes_driver_settings(chart: Any) -> None:
    values = load_values(SPARK_K8S_VALUES)
    rendered = render(chart, values)
    config = parse_config(rendered.config)
    conf = config.spark.conf
    assert config.spark.master == "k8s://https://kubernetes.default.svc"
    assert conf["spark.kubernetes.namespace"] == NAMESPACE
    assert conf["spark.kubernetes.container.image"] == rendered.container["image"]
    account = rendered.pod["serviceAccountName"]
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == account
    assert rendered.pod["automountServiceAccountToken"] is True
    # Executors reach the driver through the headless Service, on fixed ports of the pod.
    (driver_service,) = (
        d for d in rendered.docs if d["kind"] == "Service" and d["spec"].get("clusterIP") == "None"
    )
    name = driver_service["metadata"]["name"]
    assert conf["spark.driver.host"] == f"{name}.{NAMESPACE}.svc"
    assert conf["spark.driver.bindAddress"] == "0.0.0.0"
    assert driver_service["spec"]["publishNotReadyAddresses"] is True
    assert (
        driver_service["spec"]["selector"] == rendered.deployment["spec"]["selector"]["matchLabels"]
    )
    ports = {p["name"]: p["containerPort"] for p in rendered.container["ports"]}
    service_ports = {p["targetPort"]: p["port"] for p in driver_service["spec"]["ports"]}
    assert service_ports == {
        "spark-driver": ports["spark-driver"],
        "spark-blockmgr": ports["spark-blockmgr"],
    }
    assert conf["spark.driver.port"] == str(ports["spark-driver"])
    assert conf["spark.driver.blockManager.port"] == str(ports["spark-blockmgr"])
    assert conf["spark.blockManager.port"] == str(ports["spark-blockmgr"])
    # Executor sizing from the values; the example's own spark.conf entries are kept.
    executor = values["sparkOnKubernetes"]["executor"]
    assert conf["spark.executor.instances"] == str(executor["instances"])
    assert conf["spark.executor.cores"] == str(executor["cores"])
    assert conf["spark.executor.memory"] == executor["memory"]
    assert conf["spark.kubernetes.executor.request.cores"] == executor["requestCores"]
    assert conf["spark.kubernetes.executor.limit.cores"] == executor["limitCores"]
    assert values["config"]["spark"]["conf"].items() <= conf.items()
    assert conf["spark.authenticate"] == conf["spark.network.crypto.enabled"] == "true"
    # The driver's pod name is per pod: it makes the executors children of this pod.
    env = {e["name"]: e for e in rendered.container["env"]}
    pod_name_key = "ICEMV_SPARK__CONF__spark.kubernetes.driver.pod.name"
    pod_name = env[pod_name_key]
    assert pod_name["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    # One driver: no second pod during a rollout, and no replicas.
    assert rendered.deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert rendered.deployment["spec"]["replicas"] == 1
    # Every spark.kubernetes.* key the chart sets is one Spark 3.5 knows.
    known = spark_kubernetes_keys()
    assert "spark.kubernetes.executor.podTemplateFile" in known
    unknown = {k for k in conf if k.startswith("spark.kubernetes.")} - known
    assert not unknown, unknown
    assert pod_name_key.removeprefix("ICEMV_SPARK__CONF__") in known
    assert "spark.kubernetes.no.such.key" not in known


def test_spark_on_kubernetes_users_conf_wins(chart: Any) -> None:
    values = {
        "sparkOnKubernetes": {"enabled": True},
        "config": {"spark": {"conf": {"spark.executor.instances": "5", "spark.x": "y"}}},
    }
    conf = parse_config(render(chart, values).config).spark.conf
    assert conf["spark.executor.instances"] == "5"
    assert conf["spark.x"] == "y"
    assert conf["spark.executor.cores"] == "1"  # the chart's default still there


def test_spark_on_kubernetes_executor_pod_template(chart: Any) -> None:
    values = load_values(SPARK_K8S_VALUES)
    rendered = render(chart, values)
    conf = parse_config(rendered.config).spark.conf
    template = executor_pod_template(rendered)
    assert template["kind"] == "Pod"
    spec = template["spec"]
    (container,) = spec["containers"]
    assert container["name"] == conf["spark.kubernetes.executor.podTemplateContainerName"]
    # Same user, same restrictions as the icemv container; writable emptyDirs only.
    assert spec["securityContext"] == rendered.pod["securityContext"]
    assert container["securityContext"] == rendered.container["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["automountServiceAccountToken"] is False
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for path in WRITABLE:
        assert "emptyDir" in volumes[mounts[path]], path
    assert volumes[mounts["/tmp"]]["emptyDir"]["sizeLimit"] == "20Gi"
    # The image's executor command (tests/test_dockerfile.py checks that the image has it).
    assert container["command"] == ["/usr/local/bin/spark-executor"]
    env = {e["name"]: e for e in container["env"]}
    assert env["SPARK_LOCAL_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    # Executors read and write the warehouse too: they get the same extra environment.
    for entry in values["extraEnv"]:
        assert env[entry["name"]] == entry
    # Executors are not icemv pods: neither the Services nor the PodDisruptionBudget select them.
    labels = template["metadata"]["labels"]
    selector = rendered.deployment["spec"]["selector"]["matchLabels"]
    assert not selector.items() <= labels.items()
    assert labels["app.kubernetes.io/instance"] == RELEASE
    # A valid Pod once Spark has filled in the image.
    pod = {**template, "metadata": {**template["metadata"], "name": "icemv-exec-1"}}
    pod["spec"]["containers"][0]["image"] = conf["spark.kubernetes.container.image"]
    for version in KUBE_VERSIONS:
        kubernetes_validate.validate(pod, version, strict=True)


def test_spark_on_kubernetes_role_covers_what_the_driver_does(chart: Any) -> None:
    rendered = render(chart, load_values(SPARK_K8S_VALUES))
    role, binding = rendered.one("Role"), rendered.one("RoleBinding")
    assert role["metadata"]["namespace"] == NAMESPACE  # namespaced, like the executors
    allowed = {
        (resource, verb)
        for rule in role["rules"]
        if rule["apiGroups"] == [""]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for resource, verbs in {
        "pods": {"create", "get", "list", "watch", "delete", "deletecollection"},
        "configmaps": {"create", "get", "list", "delete", "deletecollection"},
        "services": {"create", "get", "delete"},
        "persistentvolumeclaims": {"create", "get", "list", "delete", "deletecollection"},
    }.items():
        assert {(resource, v) for v in verbs} <= allowed, resource
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": rendered.pod["serviceAccountName"],
            "namespace": NAMESPACE,
        }
    ]
    assert rendered.one("ServiceAccount")["metadata"]["name"] == rendered.pod["serviceAccountName"]
    assert "2 executor pods" in rendered.notes


# ---- secrets -----------------------------------------------------------------------------


def test_existing_secrets_are_referenced_not_created(chart: Any) -> None:
    rendered = render(
        chart,
        {
            "secrets": {
                "catalogPassword": {"existingSecret": "cat", "existingSecretKey": "pw"},
                "kafkaSaslPassword": {"existingSecret": "kaf"},
            }
        },
    )
    env = {e["name"]: e for e in rendered.container["env"]}
    assert env["ICEMV_CATALOG__PASSWORD"]["valueFrom"] == {
        "secretKeyRef": {"name": "cat", "key": "pw"}
    }
    assert env["ICEMV_KAFKA__SASL_PASSWORD"]["valueFrom"] == {
        "secretKeyRef": {"name": "kaf", "key": "password"}
    }
    assert rendered.maybe("Secret") is None


def test_secret_created_from_values(chart: Any) -> None:
    values = {"secrets": {"catalogPassword": {"value": "s3cr3t!"}}}
    rendered = render(chart, values)
    secret = rendered.one("Secret")
    assert secret["type"] == "Opaque"
    assert secret["data"] == {"catalog-password": base64.b64encode(b"s3cr3t!").decode()}
    env = {e["name"]: e for e in rendered.container["env"]}
    assert env["ICEMV_CATALOG__PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": secret["metadata"]["name"],
        "key": "catalog-password",
    }
    assert "ICEMV_KAFKA__SASL_PASSWORD" not in env
    assert "s3cr3t" not in rendered.config_text
    annotations = rendered.deployment["spec"]["template"]["metadata"]["annotations"]
    other = render(chart, {"secrets": {"catalogPassword": {"value": "changed"}}})
    other_annotations = other.deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["checksum/secret"] != other_annotations["checksum/secret"]


def test_rest_catalog_credentials_come_from_secrets(chart: Any) -> None:
    values = {
        "config": {"catalog": {"type": "rest", "uri": "https://polaris:8181/api/catalog"}},
        "secrets": {
            "catalogCredential": {"value": "client:s3cr3t"},
            "catalogToken": {"existingSecret": "lake-token"},
        },
    }
    rendered = render(chart, values)
    secret = rendered.one("Secret")
    assert secret["data"] == {"catalog-credential": base64.b64encode(b"client:s3cr3t").decode()}
    env = {e["name"]: e for e in rendered.container["env"]}
    assert env["ICEMV_CATALOG__CREDENTIAL"]["valueFrom"]["secretKeyRef"] == {
        "name": secret["metadata"]["name"],
        "key": "catalog-credential",
    }
    assert env["ICEMV_CATALOG__TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "lake-token",
        "key": "token",
    }
    assert "s3cr3t" not in rendered.config_text


def test_no_password_env_without_secrets(chart: Any) -> None:
    names = {e["name"] for e in render(chart).container["env"]}
    assert names == {"ICEMV_CONFIG"}
    assert render(chart).maybe("Secret") is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"config": {"metrics": {"host": "127.0.0.1"}}}, "config.metrics.host=127.0.0.1"),
        ({"config": {"catalog": {"password": "x"}}}, "/config/catalog/password"),
        ({"config": {"kafka": {"sasl_password": "x"}}}, "/config/kafka/sasl_password"),
        ({"config": {"catalog": {"credential": "a:b"}}}, "/config/catalog/credential"),
        ({"config": {"catalog": {"token": "t"}}}, "/config/catalog/token"),
        ({"config": {"catalog": {"headers": {"X-Api-Key": "k"}}}}, "/config/catalog/headers"),
        (
            {"config": {"warehouse": {"properties": {"s3.secret-access-key": "k"}}}},
            "config.warehouse.properties.s3.secret-access-key: the config is a ConfigMap",
        ),
        (
            {"config": {"catalog": {"properties": {"header.Authorization": "Bearer t"}}}},
            "config.catalog.properties.header.Authorization: the config is a ConfigMap",
        ),
        ({"replicaCount": 2}, "replicaCount must be 1"),
        (
            {"secrets": {"kafkaSaslPassword": {"value": "a", "existingSecret": "b"}}},
            "secrets.kafkaSaslPassword: set either existingSecret or value",
        ),
        ({"replicas": 3}, "additional properties 'replicas' not allowed"),
        ({"config": {"refresh": {"shutdown_grace": 3}}}, "'shutdown_grace' not allowed"),
        ({"config": {"metrics": {"port": 0}}}, "/config/metrics/port"),
        (
            {"sparkOnKubernetes": {"enabled": True}, "replicaCount": 2},
            "sparkOnKubernetes.enabled: the icemv pod is the one Spark driver",
        ),
        ({"sparkOnKubernetes": {"executor": {"memory": "2 GB"}}}, "/sparkOnKubernetes/executor"),
        ({"sparkOnKubernetes": {"driverPort": 80}}, "/sparkOnKubernetes/driverPort"),
    ],
)
def test_broken_values_stop_the_install(chart: Any, values: dict[str, Any], message: str) -> None:
    assert message in render_error(chart, values)


def test_scaling_out_with_a_shared_catalog_is_allowed(chart: Any) -> None:
    values: dict[str, Any] = {
        "replicaCount": 3,
        "config": {"catalog": {"uri": "postgresql://pg:5432/ice"}},
    }
    assert render(chart, values).deployment["spec"]["replicas"] == 3
    # Without Kafka every pod refreshes every MV; with it they split the MVs by partition.
    assert "every pod polls and refreshes every MV" in render(chart, values).notes
    values["config"]["kafka"] = {"bootstrap_servers": ["kafka:9092"], "topics": ["lake-commits"]}
    notes = render(chart, values).notes
    assert "3 pods split the MVs by the partitions of the topic lake-commits" in notes
    assert "at least 3 partitions" in notes
    assert "Replicas:" not in render(chart).notes


def test_values_schema_config_matches_icemvs_config_model(chart: Any) -> None:
    schema = chart.schema["properties"]["config"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(Config.model_fields)
    for name, field in Config.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and hasattr(model, "model_fields"):
            section = schema["properties"][name]
            assert section["additionalProperties"] is False, name
            # spark.remote (Spark Connect) is not offered by the chart while icemv still has it.
            fields = set(model.model_fields) - NOT_OFFERED.get(name, set())
            assert set(section["properties"]) == fields, name
    mv_items = schema["properties"]["materialized_views"]["items"]
    assert set(mv_items["properties"]) == set(MaterializedViewSpec.model_fields)
    assert set(mv_items["required"]) == {
        n for n, f in MaterializedViewSpec.model_fields.items() if f.is_required()
    }


# ---- monitoring --------------------------------------------------------------------------


def exported_series() -> dict[str, set[str]]:
    """Every series name icemv exports, with its labels (from a real Metrics registry)."""
    series: dict[str, set[str]] = {}
    for metric in vars(Metrics()).values():
        if not isinstance(metric, MetricWrapperBase):
            continue
        name, labels, kind = metric._name, set(metric._labelnames), metric._type
        if kind == "counter":
            series[f"{name}_total"] = labels
        elif kind == "histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                series[name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
        else:
            series[name] = labels
    return series


HISTOGRAM_SUFFIX = re.compile(r"_(bucket|sum|count)$")


def check_promql(expr: str, where: str) -> set[str]:
    """Parse; every selector names an icemv series and filters on labels it has."""
    series = exported_series()
    grafana_free = expr.replace("$__rate_interval", "5m")
    try:
        ast = promql_parser.parse(grafana_free)
    except Exception as exc:  # the parser raises plain ValueErrors/RuntimeErrors
        raise AssertionError(f"{where}: not PromQL: {expr!r}: {exc}") from exc
    names: set[str] = set()
    problems: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name
            if not name:
                problems.append("a selector without a metric name")
                return
            names.add(name)
            family = HISTOGRAM_SUFFIX.sub("", name) if name not in METRIC_NAMES else name
            if family not in METRIC_NAMES:
                problems.append(f"{name} is not in icemv.service.metrics.METRIC_NAMES")
            if name not in series:
                problems.append(f"{name} is not a series icemv exports")
                return
            for matcher in node.matchers.matchers:
                if matcher.name not in series[name] | TARGET_LABELS:
                    problems.append(f"{name} has no label {matcher.name}")
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            inner: set[str] = set()
            promql_parser.walk(
                node,
                lambda n: (
                    inner.update(series.get(n.name, set()))
                    if isinstance(n, promql_parser.VectorSelector)
                    else None
                ),
            )
            for label in node.modifier.labels:
                if label not in inner | TARGET_LABELS:
                    problems.append(f"aggregation by {label}: no such label below it")

    promql_parser.walk(ast, visit)
    assert not problems, f"{where}: {expr}\n  " + "\n  ".join(problems)
    return names


def monitoring_values() -> dict[str, Any]:
    return {
        "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
        "prometheusRule": {"enabled": True, "runbookUrl": "https://docs.example/ops"},
        "config": {"kafka": {"bootstrap_servers": ["kafka:9092"]}},
    }


def alert_rules(chart: Any, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rule = render(chart, values).one("PrometheusRule")
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}


def test_the_chart_readme_names_every_top_level_value(chart: Any) -> None:
    readme = (CHART / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    named = {key for row in rows for key in re.findall(r"`([A-Za-z]+)`", row.split("|")[1])}
    assert named == set(chart.values), set(chart.values) ^ named


PLAIN_RULES = ROOT / "deploy" / "prometheus" / "icemv-rules.yaml"
PLAIN_RULE_VALUES = {
    "prometheusRule": {"enabled": True, "selector": 'job="icemv"'},
    "config": {"kafka": {"bootstrap_servers": ["kafka:9092"]}},
}


def plain_rules(chart: Any) -> dict[str, Any]:
    """The chart's alerts as a Prometheus rule file, for Prometheus without the operator."""
    return {"groups": render(chart, PLAIN_RULE_VALUES).one("PrometheusRule")["spec"]["groups"]}


def test_the_plain_rule_file_is_the_charts_alerts(chart: Any) -> None:
    """deploy/prometheus/icemv-rules.yaml: to regenerate it, write `plain_rules(chart)`."""
    assert yaml.safe_load(PLAIN_RULES.read_text()) == plain_rules(chart)
    for group in plain_rules(chart)["groups"]:
        for rule in group["rules"]:
            check_promql(rule["expr"], rule["alert"])
            assert 'job="icemv"' in rule["expr"], rule["alert"]


def test_alerts_query_only_metrics_icemv_exports(chart: Any) -> None:
    rules = alert_rules(chart, monitoring_values())
    assert set(rules) == {
        "IcemvMaterializedViewStale",
        "IcemvRefreshFailing",
        "IcemvFullRefreshFallbacks",
        "IcemvNotReady",
        "IcemvAbsent",
        "IcemvKafkaDisconnected",
        "IcemvWrongDelta",
        "IcemvVerifyMismatch",
    }
    for name, rule in rules.items():
        check_promql(rule["expr"], name)
        assert rule["labels"]["severity"] in ("info", "warning", "critical")
        assert rule["annotations"]["runbook_url"] == f"https://docs.example/ops#{name.lower()}"
        assert f'job="{RELEASE}",namespace="{NAMESPACE}"' in rule["expr"], name
    # Without Kafka, no Kafka alert.
    assert "IcemvKafkaDisconnected" not in alert_rules(chart, {"prometheusRule": {"enabled": True}})


def test_alert_expressions_mean_what_operations_md_says(chart: Any) -> None:
    rules = alert_rules(chart, monitoring_values())
    stale = rules["IcemvMaterializedViewStale"]["expr"]
    assert check_promql(stale, "stale") == {
        "icemv_mv_staleness_seconds",
        "icemv_mv_max_staleness_seconds",
    }
    assert (
        stale.index("icemv_mv_staleness_seconds")
        < stale.index(">")
        < stale.index("icemv_mv_max_staleness_seconds")
    )
    assert rules["IcemvMaterializedViewStale"]["for"] == "10m"
    assert 'outcome="failure"' in rules["IcemvRefreshFailing"]["expr"]
    assert "increase(icemv_refreshes_total" in rules["IcemvRefreshFailing"]["expr"]
    fallbacks = rules["IcemvFullRefreshFallbacks"]["expr"]
    assert 'mode="full"' in fallbacks
    excluded = re.search(r'reason!~"([^"]+)"', fallbacks)
    assert excluded is not None
    assert set(excluded.group(1).split("|")) == EXPECTED_FULL_REASONS
    # Those reasons are the ones icemv gives to full refreshes that are not fallbacks.
    assert set(icemv.refresh.policy.INHERENTLY_FULL) <= EXPECTED_FULL_REASONS
    wrong = rules["IcemvWrongDelta"]["expr"]
    assert check_promql(wrong, "wrong") == {"icemv_refresh_inconsistent_total"}
    assert "by (namespace, job, mv, rule)" in wrong and "> 0" in wrong
    mismatch = rules["IcemvVerifyMismatch"]["expr"]
    assert check_promql(mismatch, "mismatch") == {"icemv_verify_mismatches_total"}
    assert {RefreshReason.REQUESTED, RefreshReason.POLICY_FULL} <= EXPECTED_FULL_REASONS
    assert re.search(r"icemv_ready\{[^}]*\}\) == 0", rules["IcemvNotReady"]["expr"])
    assert rules["IcemvAbsent"]["expr"].strip().startswith("absent(icemv_ready{")
    assert rules["IcemvAbsent"]["labels"]["severity"] == "critical"
    tuned = alert_rules(
        chart,
        deep_merge(
            monitoring_values(),
            {
                "prometheusRule": {
                    "staleFor": "3m",
                    "selector": 'job="x"',
                    "refreshFailures": {"window": "1h", "threshold": 5},
                }
            },
        ),
    )
    assert tuned["IcemvMaterializedViewStale"]["for"] == "3m"
    assert 'icemv_ready{job="x"}' in tuned["IcemvAbsent"]["expr"]
    assert "[1h]" in tuned["IcemvRefreshFailing"]["expr"]
    assert tuned["IcemvRefreshFailing"]["expr"].rstrip().endswith("> 5")


def test_promql_check_catches_unknown_metrics_and_labels() -> None:
    with pytest.raises(AssertionError, match=r"not in icemv\.service\.metrics\.METRIC_NAMES"):
        check_promql("rate(icemv_refresh_total[5m])", "typo")
    with pytest.raises(AssertionError, match="has no label"):
        check_promql('icemv_kafka_consumer_lag{mv="x"}', "label")
    with pytest.raises(AssertionError, match="aggregation by mv"):
        check_promql("max by (mv) (icemv_kafka_consumer_lag)", "by")
    with pytest.raises(AssertionError, match="not PromQL"):
        check_promql("sum(icemv_up", "syntax")
    assert check_promql(
        "histogram_quantile(0.9, sum by (le) (rate(icemv_refresh_duration_seconds_bucket[5m])))",
        "ok",
    ) == {"icemv_refresh_duration_seconds_bucket"}


def test_service_monitor_scrapes_the_service(chart: Any) -> None:
    rendered = render(chart, monitoring_values())
    monitor, service = rendered.one("ServiceMonitor"), rendered.one("Service")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    # The alerts' default selector is the job label this scrape gives: the Service's name.
    assert service["metadata"]["name"] == RELEASE
    default = render(chart)
    assert default.maybe("ServiceMonitor") is None and default.maybe("PrometheusRule") is None


def test_dashboard_queries_only_metrics_icemv_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert variables == {"datasource", "namespace", "job", "mv"}
    used: set[str] = set()
    ids = []
    for panel in dashboard["panels"]:
        ids.append(panel["id"])
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            for variable in re.findall(r"\$(\w+)", expr):
                assert variable in variables | {"__rate_interval"}, (panel["title"], variable)
            used |= check_promql(expr, panel["title"])
    assert len(ids) == len(set(ids))
    for variable in dashboard["templating"]["list"][1:]:
        used |= check_promql(
            re.sub(r"^label_values\((.*), \w+\)$", r"\1", variable["definition"]), variable["name"]
        )
    # The panels the dashboard promises.
    for series in (
        "icemv_mv_staleness_seconds",
        "icemv_mv_max_staleness_seconds",
        "icemv_refresh_duration_seconds_bucket",
        "icemv_refreshes_total",
        "icemv_refresh_rows_total",
        "icemv_events_total",
        "icemv_kafka_consumer_lag",
    ):
        assert series in used, series
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert any(
        e.startswith("histogram_quantile(")
        and "icemv_refresh_duration_seconds_bucket" in e
        and "by (le, mode)" in e
        for e in exprs
    )
    assert any('mode="full"' in e and "by (reason)" in e for e in exprs)
    assert any("by (outcome)" in e and "icemv_refreshes_total" in e for e in exprs)


def test_notes_tell_how_to_reach_the_daemon(chart: Any) -> None:
    notes = render(chart, load_values(ROOT / "deploy/values/postgres-kafka.yaml")).notes
    assert f"kubectl -n {NAMESPACE} rollout status deployment/{RELEASE}" in notes
    assert "/mvs/NAMESPACE.MV/refresh" in notes
    assert "Declared materialized views: 1" in notes
    assert "kafka-0.kafka.data.svc:9093" in notes
