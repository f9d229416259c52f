"""SQL passes over sqlglot trees; `spark_dialect` sets the Spark rendering first."""

from icemv.sql import spark_dialect as _spark_dialect  # noqa: F401
