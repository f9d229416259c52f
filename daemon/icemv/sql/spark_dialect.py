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
from sqlglot.dialects.hive import Hive
from sqlglot.dialects.spark import Spark
from sqlglot.dialects.spark2 import Spark2
from sqlglot.generator import Generator
from sqlglot.trie import new_trie

_TRANSFORMS = Spark.Generator.TRANSFORMS
_TRANSFORMS.pop(exp.WithinGroup, None)

# Datetime patterns stay Spark's own text. sqlglot turns a pattern into strftime's when
# it parses (`date_format(ts, 'y')` into `%Y`) and back when it renders, and the round trip
# is lossy: 'y' came back 'yyyy' (other text for years before 1000), and 'YYYY' (week
# years: an error in Spark 3, another year under the legacy parser) came back 'yyyy'.
# With no mapping the pattern is carried as written; nothing renders it to another
# dialect (the embedded engine's gate reads Java patterns itself). And `to_date(s,
# 'yyyy-MM-dd')` keeps its pattern: sqlglot wrote it `TO_DATE(s)`, a cast, which reads
# '2024-1-5' or '2024-01-05 10:00' where the pattern gives NULL.
for _dialect in (Hive, Spark2, Spark):
    _dialect.TIME_MAPPING = {}
    _dialect.TIME_TRIE = _dialect.FORMAT_TRIE = new_trie({})
    _dialect.INVERSE_TIME_MAPPING = {}
    _dialect.INVERSE_TIME_TRIE = new_trie({})


def _to_date(generator: Generator, node: exp.TsOrDsToDate) -> str:
    pattern = node.args.get("format")
    return generator.func("TO_DATE", node.this, *([pattern] if pattern is not None else []))


_TRANSFORMS[exp.TsOrDsToDate] = _to_date
