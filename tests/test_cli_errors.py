"""Every CLI error is one stderr line and an exit code; a failed create leaves nothing behind.

Cases without Spark run the real `icemv` CLI as a subprocess; the create cases need the
JVM, so they call `main()` in-process (sharing the session's Spark) and read capsys.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from icemv.catalog.jdbc import ensure_namespace
from icemv.cli.main import main
from icemv.config import Config, load_config
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from tests.support.tables import create_trips

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'daemon'}{os.pathsep}{REPO}",
        **(env or {}),
    }
    environment.pop("ICEMV_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "icemv.cli.main", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("icemv: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def write_config(path: Path, raw: dict[str, object]) -> str:
    path.write_text(yaml.safe_dump(raw))
    return str(path)


# ---- no Spark: subprocesses ---------------------------------------------------------


def test_non_utf8_config_file(tmp_path: Path) -> None:
    path = tmp_path / "icemv.yaml"
    path.write_bytes(b"home: \xff\xfe\n")
    result = run_cli("--config", str(path), "status")
    assert result.returncode == 2
    assert "not UTF-8" in one_error_line(result.stderr)


def test_an_unreachable_rest_catalog_names_catalog_uri(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "icemv.yaml",
        {"catalog": {"type": "rest", "uri": "http://icemv:hunter2@127.0.0.1:1/api"}},
    )
    result = run_cli("--config", config, "mv", "list")
    assert result.returncode == 1
    line = one_error_line(result.stderr)
    assert line.startswith("icemv: error: REST catalog unreachable (catalog.uri): http://"), line
    assert "/api/v1/config" in line and "Connection refused" in line, line
    assert "hunter2" not in result.stderr


def test_a_deprecated_setting_is_one_warning_line(tmp_path: Path) -> None:
    config = write_config(tmp_path / "icemv.yaml", {"refresh": {"auto_full_ratio": 0.5}})
    result = run_cli("--config", config, "config", "show")
    assert result.returncode == 0, result.stderr
    [line] = result.stderr.splitlines()  # stderr is not a terminal: a JSON log line
    logged = json.loads(line)
    assert (logged["level"], logged["event"]) == ("warning", "deprecated_setting")
    assert logged["detail"].startswith("refresh.auto_full_ratio is deprecated and ignored")
    assert "FutureWarning" not in result.stderr and "site-packages" not in result.stderr


@pytest.mark.parametrize("command", [["status"], ["mv", "list"], ["refresh", "x.y"]])
@pytest.mark.parametrize(
    "uri",
    [
        "postgresql://icemv:hunter2@127.0.0.1:1/lake",  # nobody listens
        "postgresql://postgres@127.0.0.1:5432/icemv_no_such_database",
        "sqlite:////nonexistent-dir/catalog.db",
    ],
    ids=["unreachable", "missing-database", "missing-sqlite-dir"],
)
def test_unusable_catalog_database(tmp_path: Path, command: list[str], uri: str) -> None:
    config = write_config(
        tmp_path / "icemv.yaml",
        {"catalog": {"uri": uri}, "warehouse": {"location": str(tmp_path / "wh")}},
    )
    result = run_cli("--config", config, *command)
    assert result.returncode == 1
    line = one_error_line(result.stderr)
    assert "catalog database unavailable" in line
    assert "hunter2" not in result.stderr


def test_debug_flag_adds_the_traceback(tmp_path: Path) -> None:
    config = write_config(tmp_path / "icemv.yaml", {"catalog": {"uri": "sqlite:////nonexistent/c"}})
    result = run_cli("--config", config, "--debug", "status")
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("icemv: error: ")


def test_a_bad_log_level_is_one_config_error_line(tmp_path: Path) -> None:
    config = write_config(tmp_path / "icemv.yaml", {"logging": {"levels": {"kafka": "LOUD"}}})
    result = run_cli("--config", config, "run")
    assert result.returncode == 2
    line = one_error_line(result.stderr)
    assert "logging.levels.kafka: Input should be 'DEBUG', 'INFO', 'WARNING'" in line


def test_a_json_daemon_that_cannot_start_says_so_in_json(tmp_path: Path) -> None:
    """`icemv run` logging JSON: its last word is a JSON line too, not `icemv: error:`."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        config = write_config(
            tmp_path / "icemv.yaml",
            {
                "catalog": {"uri": f"sqlite:///{tmp_path / 'catalog.db'}"},
                "warehouse": {"location": str(tmp_path / "wh")},
                "metrics": {"host": "127.0.0.1", "port": taken.getsockname()[1]},
                "logging": {"format": "json"},
            },
        )
        result = run_cli("--config", config, "run")
    assert result.returncode == 1 and result.stdout == ""
    [line] = [json.loads(text) for text in result.stderr.splitlines()]
    assert line["event"] == "daemon_failed" and line["level"] == "error"
    assert "Address already in use" in line["error"]


def test_unreachable_broker_on_emit(tmp_path: Path) -> None:
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    raw = {
        "catalog": {"uri": catalog_uri},
        "warehouse": {"location": str(tmp_path / "wh")},
        "kafka": {"bootstrap_servers": ["127.0.0.1:1"]},
    }
    config = write_config(tmp_path / "icemv.yaml", raw)
    lakehouse = Lakehouse(load_config(config, {}))
    ensure_namespace(lakehouse.catalog, ("nyc",))
    lakehouse.catalog.create_table(("nyc", "t"), schema=pa.schema([pa.field("a", pa.int64())]))
    result = run_cli("--config", config, "emit", "nyc.t", "--timeout", "2")
    assert result.returncode == 1
    assert "Kafka broker unreachable" in one_error_line(result.stderr)


def test_map_valued_env_overrides_are_strings(tmp_path: Path) -> None:
    config = write_config(tmp_path / "icemv.yaml", {"catalog": {"uri": "sqlite:///x.db"}})
    result = run_cli(
        "--config",
        config,
        "config",
        "show",
        env={
            "ICEMV_SPARK__CONF__spark.sql.shuffle.partitions": "8",
            "ICEMV_CATALOG__PROPERTIES__pool_size": "5",
        },
    )
    assert result.returncode == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["spark"]["conf"] == {"spark.sql.shuffle.partitions": "8"}
    assert shown["catalog"]["properties"] == {"pool_size": "5"}


# ---- create: in-process, on the session's Spark ---------------------------------------


@pytest.fixture
def config_file(test_config: Config, lakehouse: Lakehouse, tmp_path: Path) -> str:
    """The test catalog as a config file for `main()`; Spark is the session's, already up."""
    lakehouse.spark  # noqa: B018
    return write_config(tmp_path / "icemv.yaml", test_config.model_dump(mode="json"))


def namespaces(lakehouse: Lakehouse) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    pending = list(lakehouse.catalog.list_namespaces())
    while pending:
        namespace = tuple(pending.pop())
        found.add(namespace)
        pending.extend(lakehouse.catalog.list_namespaces(namespace))
    return found


def failed_create(
    capsys: pytest.CaptureFixture[str], config_file: str, *args: str
) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--config", config_file, "mv", "create", *args])
    captured = capsys.readouterr()
    return code, one_error_line(captured.err)


def new_create_target(lakehouse: Lakehouse) -> tuple[Identifier, str, set[tuple[str, ...]]]:
    """A source table in a namespace of its own; an MV name in a namespace that does not
    exist yet; an aggregate over the source; the namespaces before the create."""
    source = f"t_{uuid.uuid4().hex[:8]}"
    ensure_namespace(lakehouse.catalog, (source,))
    create_trips(lakehouse, source)
    target = Identifier((f"n_{uuid.uuid4().hex[:8]}",), "agg")
    sql = f"SELECT vendor, count(*) AS n FROM {source}.trips GROUP BY vendor"
    return target, sql, namespaces(lakehouse)


def assert_nothing_left(lakehouse: Lakehouse, mv: Identifier, before: set[tuple[str, ...]]) -> None:
    assert namespaces(lakehouse) == before
    assert not lakehouse.views.exists(mv)
    assert not lakehouse.table_exists(mv)
    assert not lakehouse.table_exists(mv.storage_default())


@pytest.mark.spark
@pytest.mark.postgres
def test_create_with_hierarchical_name(
    lakehouse: Lakehouse, config_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    top = f"h_{uuid.uuid4().hex[:8]}"
    before = namespaces(lakehouse)
    code, line = failed_create(capsys, config_file, f"{top}.b.c.d", "--sql", "SELECT 1 AS one")
    assert code == 2
    assert "namespace" in line
    assert namespaces(lakehouse) == before


@pytest.mark.spark
@pytest.mark.postgres
def test_create_with_a_backtick_quoted_name(
    lakehouse: Lakehouse, config_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As in Spark SQL: a backtick-quoted part is one identifier, without its backticks."""
    target, sql, before = new_create_target(lakehouse)
    name = f"{target.namespace_str}.`odd`"
    assert main(["--config", config_file, "mv", "create", name, "--sql", sql]) == 0
    odd = Identifier(target.namespace, "odd")
    assert lakehouse.views.exists(odd)
    assert lakehouse.table_exists(Identifier(target.namespace, "odd__storage"))
    assert namespaces(lakehouse) == before | {target.namespace}  # no namespace with backticks

    code, line = failed_create(capsys, config_file, f"{target.namespace_str}..x", "--sql", sql)
    assert code == 2
    assert line.startswith(f"icemv: error: invalid name '{target.namespace_str}..x': expected")


@pytest.mark.spark
@pytest.mark.postgres
def test_create_with_transform_of_the_wrong_type(
    lakehouse: Lakehouse, config_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target, sql, before = new_create_target(lakehouse)
    code, line = failed_create(
        capsys, config_file, target.dotted, "--sql", sql, "--partition-by", "days(vendor)"
    )
    assert code == 2
    assert "vendor" in line and "string" in line
    assert_nothing_left(lakehouse, target, before)


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--partition-by", "bucket(0, vendor)"], "bucket"),
        (["--partition-by", "truncate(0, vendor)"], "truncate"),
        (["--property", "icemv.max-staleness=soon"], "icemv.max-staleness"),
        (["--property", "icemv.refresh-policy=sometimes"], "icemv.refresh-policy"),
        (["--property", "icemv.refresh-interval=often"], "icemv.refresh-interval"),
        (["--property", "icemv.refresh-cron=every day"], "icemv.refresh-cron"),
    ],
)
def test_create_rejects_what_every_refresh_would_fail_on(
    lakehouse: Lakehouse,
    config_file: str,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    expected: str,
) -> None:
    target, sql, before = new_create_target(lakehouse)
    code, line = failed_create(capsys, config_file, target.dotted, "--sql", sql, *extra)
    assert code == 2
    assert expected in line
    assert_nothing_left(lakehouse, target, before)


@pytest.mark.spark
@pytest.mark.postgres
def test_create_with_a_typo_says_it_does_not_parse(
    lakehouse: Lakehouse, config_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = Identifier((f"n_{uuid.uuid4().hex[:8]}",), "agg")
    before = namespaces(lakehouse)
    code, line = failed_create(capsys, config_file, target.dotted, "--sql", "SELEC nope")
    assert code == 2
    assert "ALIAS" not in line
    assert "SELEC" in line
    assert_nothing_left(lakehouse, target, before)
