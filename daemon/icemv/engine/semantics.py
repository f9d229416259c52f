"""The Spark session settings that decide what a view's SQL evaluates to, as the running
session has them: ANSI mode (overflow, an invalid cast and division by zero raise instead
of giving NULL or wrapping) and the session time zone (timestamps' dates and hours).

The embedded engine must compute what Spark would; it can only if it knows these. They
are read from the session (`spark.conf.get`), after Spark has applied every source:
icemv's `spark.conf`, `spark-defaults.conf` (under SPARK_CONF_DIR or SPARK_HOME/conf),
spark-submit's `--conf`, and the version's default (false in Spark 3.5; Spark 4 makes
it true unless SPARK_ANSI_SQL_MODE says false). A refresh worker process has no Spark:
it is given its daemon's (service/refresh_workers.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ANSI_KEY = "spark.sql.ansi.enabled"
TIME_ZONE_KEY = "spark.sql.session.timeZone"


@dataclass(frozen=True)
class SessionSemantics:
    ansi: bool
    time_zone: str


def session_semantics(session: SparkSession) -> SessionSemantics:
    """The session's effective ANSI mode and time zone."""
    ansi = str(session.conf.get(ANSI_KEY, "false")).strip().lower() == "true"
    return SessionSemantics(ansi=ansi, time_zone=str(session.conf.get(TIME_ZONE_KEY)))
