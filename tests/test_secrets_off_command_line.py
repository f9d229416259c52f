"""No secret on any command line: `icemv refresh` as a real process, its JVM read from /proc.

PySpark passes builder settings to spark-submit as `--conf` arguments, readable by every
user through `ps`; icemv sets secret catalog and Hadoop properties on the running session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from pydantic import SecretStr

from icemv.config import Config
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

SQL = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor"
SECRET_PROPERTY = "s3.secret-access-key"


def descendants(root: int) -> list[int]:
    """Every live process below `root`, from /proc (ppid is field 4 of /proc/<pid>/stat)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def command_lines(root: int) -> dict[int, str]:
    lines = {}
    for pid in descendants(root):
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        lines[pid] = raw.replace(b"\0", b" ").decode(errors="replace")
    return lines


def plain(value: SecretStr | str) -> str:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


@pytest.mark.parametrize("storage_kind", ["s3"], indirect=True)
def test_no_secret_reaches_a_command_line_or_the_logs(
    lakehouse: Lakehouse, namespace: str, test_config: Config, tmp_path: Path
) -> None:
    create_trips(lakehouse, namespace, rows=[(1, "a", 10.0, None), (2, "b", 5.0, None)])
    mv = Identifier((namespace,), "agg")
    create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": "incremental"})
    append_trips(lakehouse, namespace, [(3, "a", 1.5, None)])

    # Fresh secrets, unknown to everything else; PostgreSQL (trust) and moto accept any.
    password = f"pg-{uuid.uuid4().hex}@:/x"
    s3_secret = f"s3-{uuid.uuid4().hex}"
    properties = {
        key: plain(value)
        for key, value in test_config.warehouse.properties.items()
        if key != SECRET_PROPERTY
    }
    config = {
        "home": str(tmp_path / "home"),
        "catalog": {"uri": test_config.catalog.uri, "user": "postgres"},
        "warehouse": {"location": test_config.warehouse.location, "properties": properties},
        "spark": {
            "master": "local[1]",
            "driver_memory": "1g",
            "shuffle_partitions": 2,
            "extra_jars": test_config.spark.extra_jars,
        },
    }
    path = tmp_path / "icemv.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "ICEMV_CATALOG__PASSWORD": password,
        f"ICEMV_WAREHOUSE__PROPERTIES__{SECRET_PROPERTY}": s3_secret,
        "ICEMV_LOGGING__LEVEL": "DEBUG",
    }
    icemv = Path(sys.executable).parent / "icemv"
    process = subprocess.Popen(
        [str(icemv), "refresh", mv.dotted, "--config", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    seen: dict[int, str] = {}
    deadline = time.monotonic() + 1200  # a loaded 2-core machine needs minutes
    while process.poll() is None:  # read every descendant's argv while the refresh runs
        seen.update(command_lines(os.getpid()))
        assert time.monotonic() < deadline, "icemv refresh did not finish"
        time.sleep(0.2)
    stdout, stderr = process.communicate()
    output = (stdout + stderr).decode(errors="replace")
    assert process.returncode == 0, output[-3000:]

    jvms = [line for line in seen.values() if "org.apache.spark.deploy.SparkSubmit" in line]
    # The refresh's own JVM (launched through spark-submit), plus the test process's.
    assert any("spark.app.name=icemv" in line and "local[1]" in line for line in jvms), jvms
    # Only launch settings are on a command line; catalog settings go over the gateway.
    assert not any("spark.sql.catalog." in line for line in jvms), jvms
    for secret in (password, s3_secret, plain(test_config.warehouse.properties[SECRET_PROPERTY])):
        assert not any(secret in line for line in seen.values())
        assert secret not in output
    assert_matches_oracle(lakehouse, mv)
