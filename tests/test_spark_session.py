"""Spark session start-up under concurrency: the first refreshes of a fresh daemon process.

Issue 12 #5: a restarted daemon's first incremental refreshes failed to resolve the
catalog (`default_iceberg ... is not defined`). Here a fresh process (a fresh JVM) starts
many refreshes at once, each on its own new thread, before anything else touched Spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from icemv.config import Config
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.refresh.policy import refresh_mv
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

REPO = Path(__file__).resolve().parents[1]
CONCURRENT = 6

CHILD = textwrap.dedent(
    """
    import json, sys, threading
    from icemv.lakehouse import Lakehouse
    from icemv.config import load_config
    from icemv.engine import spark as engine
    from icemv.identifiers import Identifier
    from icemv.service.daemon import Daemon

    config = load_config(sys.argv[1], {})
    names = json.loads(sys.argv[2])
    daemon = Daemon(config, lakehouse=Lakehouse(config))
    start = threading.Barrier(len(names))
    results = {}

    def refresh(name):
        start.wait()
        try:
            result = daemon._refresh(Identifier.parse(name, "default"))
            results[name] = {"mode": result.mode, "session": id(engine._session)}
        except BaseException as exc:
            results[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}

    threads = [threading.Thread(target=refresh, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    print(json.dumps(results))
    engine.stop_spark()
    """
)


def test_concurrent_first_refreshes_on_a_fresh_session(
    lakehouse: Lakehouse, namespace: str, test_config: Config, tmp_path: Path
) -> None:
    mvs = []
    for i in range(CONCURRENT):
        table = f"trips_{i}"
        create_trips(lakehouse, namespace, name=table, rows=[(1, "a", 1.0, None)])
        mv = Identifier((namespace,), f"agg_{i}")
        sql = f"SELECT vendor, count(*) AS n FROM {table} GROUP BY vendor"
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental"})
        refresh_mv(lakehouse, mv)
        append_trips(lakehouse, namespace, [(2, "b", 2.0, None)], name=table)
        mvs.append(mv.dotted)
    raw = test_config.model_dump(mode="json", exclude={"materialized_views"})
    path = tmp_path / "icemv.yaml"
    path.write_text(yaml.safe_dump(raw))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), json.dumps(mvs)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": f"{REPO / 'daemon'}{os.pathsep}{REPO}"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(results) == set(mvs)
    failures = {name: r["error"] for name, r in results.items() if "error" in r}
    assert not failures
    # Every refresh read its change incrementally, all on one session.
    assert {r["mode"] for r in results.values()} == {"incremental"}
    assert len({r["session"] for r in results.values()}) == 1
