"""What the reading commands print (issue 27): the result on stdout, nothing on stderr.

The real `icemv` CLI runs as a subprocess (stdout and stderr are pipes, not a terminal)
on a real catalog holding an MV of this test's own. The catalog is shared by the
session's tests, so the checks look at this MV's line or object and at the absence of
any log line, never at the whole listing. The config asks for the chattiest logging an
operator might give the daemon (root DEBUG, every SQL statement of the catalog database
at INFO): a command at its default verbosity still writes nothing but its result, and
`--verbose` shows what that silenced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from icemv.config import Config
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.refresh.policy import refresh_mv
from tests.support.tables import append_trips, create_trips

REPO = Path(__file__).resolve().parents[1]
SQL = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor"
CHATTY_LOGGING = {"level": "DEBUG", "levels": {"sqlalchemy.engine": "INFO"}}


def icemv(
    config: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ICEMV_")}
    environment["PYTHONPATH"] = f"{REPO / 'daemon'}{os.pathsep}{REPO}"
    environment.update(env or {})
    result = subprocess.run(
        [sys.executable, "-m", "icemv.cli.main", "--config", str(config), *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, (args, result.stderr[-2000:])
    return result


def quiet(config: Path, *args: str) -> str:
    """The command's stdout, having checked that stderr is empty."""
    result = icemv(config, *args)
    assert result.stderr == "", (args, result.stderr[:2000])
    assert not [line for line in result.stdout.splitlines() if line.startswith('{"')], (
        args,
        result.stdout[:2000],
    )
    return result.stdout


def document(config: Path, *args: str) -> Any:
    """The one JSON document a command printed (json.loads fails on anything around it)."""
    result = icemv(config, *args)
    assert result.stderr == "", (args, result.stderr[:2000])
    return json.loads(result.stdout)


@pytest.fixture
def config_file(test_config: Config, tmp_path: Path) -> Path:
    raw = test_config.model_dump(mode="json", exclude={"materialized_views"})
    raw["catalog"]["password"] = None
    raw["logging"] = CHATTY_LOGGING
    path = tmp_path / "icemv.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def fresh_mv(lakehouse: Lakehouse, namespace: str) -> Identifier:
    create_trips(lakehouse, namespace, rows=[(i, f"v{i % 3}", float(i), None) for i in range(30)])
    mv = Identifier((namespace,), "agg")
    create_mv(lakehouse, mv, SQL)
    refresh_mv(lakehouse, mv)
    return mv


@pytest.mark.spark
@pytest.mark.postgres
def test_text_output_is_the_result_alone(config_file: Path, fresh_mv: Identifier) -> None:
    name, storage = fresh_mv.dotted, f"{fresh_mv.dotted}__storage"

    status = quiet(config_file, "status").splitlines()
    assert status[0].startswith("materialized view")
    [row] = [line for line in status if line.split()[:1] == [name]]
    assert row.split()[1:4] == ["fresh", "0.0", "0"]

    listing = quiet(config_file, "mv", "list").splitlines()
    assert listing[0].split() == ["materialized", "view", "storage", "table", "version"]
    assert [name, storage, "1"] in [line.split() for line in listing]

    show = quiet(config_file, "mv", "show", name).splitlines()
    assert show[0] == f"materialized view {name}  (view version 1)"
    assert f"  storage table : {storage}" in show
    assert "  state         : fresh" in show
    assert all(len(line) <= 100 for line in show), show
    [history] = [i for i, line in enumerate(show) if line.startswith("  refresh history (1")]
    assert show[history + 1].split() == ["when", "mode", "(reason)", "engine", "rows", "took"]
    assert "full (never-refreshed)" in show[history + 2] and " ago " in show[history + 2]

    # The same command with --verbose: the config's SQL statements, as JSON lines on stderr
    # (not a terminal), and the same result on stdout.
    verbose = icemv(config_file, "--verbose", "mv", "list")
    assert [name, storage, "1"] in [line.split() for line in verbose.stdout.splitlines()]
    logged = [json.loads(line) for line in verbose.stderr.splitlines()]
    assert logged and {line["logger"] for line in logged} == {"sqlalchemy.engine.Engine"}


@pytest.mark.spark
@pytest.mark.postgres
def test_output_json_is_one_document_per_command(config_file: Path, fresh_mv: Identifier) -> None:
    name, storage = fresh_mv.dotted, f"{fresh_mv.dotted}__storage"

    rows = document(config_file, "status", "--output", "json")
    [row] = [r for r in rows if r["name"] == name]
    assert row == {
        "name": name,
        "state": "fresh",
        "reason": None,
        "staleness-seconds": 0.0,
        "pending-snapshots": 0,
        "quarantined-rule": None,
    }
    # The old option name still works and prints the same document.
    assert [r for r in document(config_file, "status", "--format", "json") if r["name"] == name]

    listing = document(config_file, "mv", "list", "--output", "json")
    assert {"name": name, "storage-table": storage, "view-version-id": 1} in listing
    assert all(set(entry) == {"name", "storage-table", "view-version-id"} for entry in listing)

    show = document(config_file, "mv", "show", name, "--output", "json")
    assert (show["name"], show["storage-table"], show["state"]) == (name, storage, "fresh")
    assert [entry["mode"] for entry in show["history"]] == ["full"]
    assert len(show["refreshes"]) == 1
    assert show == document(config_file, "mv", "show", name, "--format", "json")

    explained = document(config_file, "mv", "explain", name, "--output", "json")
    assert explained["name"] == name and explained["incremental"] is True


@pytest.mark.postgres
def test_status_on_the_embedded_default_says_nothing_on_stderr(tmp_path: Path) -> None:
    """The first command a newcomer runs: where no lakehouse is, it says so (it made an
    empty one and answered for it before); where one is, the embedded catalog's start-up
    is INFO."""
    config = tmp_path / "icemv.yaml"
    home = tmp_path / "lakehouse"
    config.write_text(yaml.safe_dump({"home": str(home)}))
    for command in (["status"], ["mv", "list"], ["mv", "show", "x.y"]):
        missing = subprocess.run(
            [sys.executable, "-m", "icemv.cli.main", "--config", str(config), *command],
            capture_output=True, text=True, timeout=180, check=False,
            env={**os.environ, "PYTHONPATH": f"{REPO / 'daemon'}{os.pathsep}{REPO}"},
        )  # fmt: skip
        assert missing.returncode == 2, missing
        assert missing.stderr == (
            f"icemv: error: no lakehouse at {home} (the embedded default, `home`): "
            "`icemv demo` makes one there, or pass --config FILE for yours\n"
        )
        assert not home.exists()
    home.mkdir()
    assert quiet(config, "status").splitlines()[0].startswith("materialized view")
    assert document(config, "mv", "list", "--output", "json") == []
    verbose = icemv(config, "status", "--verbose")
    events = [json.loads(line)["event"] for line in verbose.stderr.splitlines()]
    assert "embedded_postgres.started" in events


@pytest.mark.spark
@pytest.mark.postgres
def test_ansi_mode_set_in_spark_defaults_keeps_the_delta_off_duckdb(
    config_file: Path, lakehouse: Lakehouse, namespace: str, tmp_path: Path
) -> None:
    """ANSI mode set where icemv's config does not say it (Spark's spark-defaults.conf):
    `icemv refresh` reads it from its Spark session and leaves the delta to Spark, which
    fails on an overflow or an invalid cast where DuckDB would answer; the same refresh
    without it computes on DuckDB."""
    create_trips(lakehouse, namespace, rows=[(i, f"v{i % 3}", float(i), None) for i in range(9)])
    mv = Identifier((namespace,), "ansi")
    create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, mv)
    spark_conf = tmp_path / "spark-conf"
    spark_conf.mkdir()
    (spark_conf / "spark-defaults.conf").write_text("spark.sql.ansi.enabled true\n")
    append_trips(lakehouse, namespace, [(100, "v1", 2.5, None)])
    icemv(config_file, "refresh", mv.dotted, env={"SPARK_CONF_DIR": str(spark_conf)})
    append_trips(lakehouse, namespace, [(101, "v2", 1.5, None)])
    icemv(config_file, "refresh", mv.dotted)
    history = document(config_file, "mv", "show", mv.dotted, "--output", "json")["history"]
    engines = [(entry["mode"], entry["engine"]) for entry in history]
    assert engines == [("incremental", "duckdb"), ("incremental", "spark"), ("full", None)]
