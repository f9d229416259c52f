"""sqlglot's Spark dialect as icemv renders views: entries of its generator's `TRANSFORMS`
table that write another function than the one parsed are put right, once per process
(imported by `icemv.sql`, before any rendering).

- `PERCENTILE_CONT(p) / PERCENTILE_DISC(p) WITHIN GROUP (ORDER BY x)`: sqlglot's Spark 2
  generator, which Spark 3's inherits, writes `PERCENTILE_APPROX(x, p)`, an approximation
  that picks an input value where PERCENTILE_CONT interpolates: a view asking for the
  exact median got an approximate one, on full and incremental refreshes alike (and the
  oracle, rendering the same way, agreed). Spark has had the WITHIN GROUP syntax since
  3.3: rendered as written.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark

_TRANSFORMS = Spark.Generator.TRANSFORMS
_TRANSFORMS.pop(exp.WithinGroup, None)
