"""sqlglot's Spark dialect as icemv renders views: entries of its generator's `TRANSFORMS`
table that write another function than the one parsed are put right, once per process
(imported by `icemv.sql`, before any rendering). Every change to sqlglot's own classes
lives here (ruff's SLF001 is allowed in this module only for that).

- `PERCENTILE_CONT(p) / PERCENTILE_DISC(p) WITHIN GROUP (ORDER BY x)`: sqlglot's Spark 2
  generator, which Spark 3's inherits, writes `PERCENTILE_APPROX(x, p)`, an approximation
  that picks an input value where PERCENTILE_CONT interpolates: a view asking for the
  exact median got an approximate one, on full and incremental refreshes alike (and the
  oracle, rendering the same way, agreed). Spark has had the WITHIN GROUP syntax since
  3.3: rendered as written.
- Aggregates that may take DISTINCT (`percentile`, `percentile_approx`, `max_by`, ...):
  sqlglot's parser keeps the arguments its node knows and drops the rest silently, so
  `percentile(x, 0.5, f)` (Spark's frequency argument) rendered `PERCENTILE(x, 0.5)`, a
  different value. An argument more than the node keeps is a parse error now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp
from sqlglot.dialects.hive import Hive
from sqlglot.dialects.spark import Spark
from sqlglot.dialects.spark2 import Spark2
from sqlglot.generator import Generator
from sqlglot.parser import Parser
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


@dataclass(frozen=True)
class _Arity:
    """Stands for a function's node class where sqlglot's parser builds it from its
    argument list: the node as sqlglot builds it, or a parse error when an argument would
    be dropped."""

    parser: Parser
    func: type[exp.Func]
    name: str  # as the view wrote it

    def from_arg_list(self, args: list[exp.Expr]) -> exp.Func:
        kept = len(self.func.arg_types)
        if len(args) > kept and not self.func.is_var_len_args:
            self.parser.raise_error(
                f"{self.name} with {len(args)} arguments is not supported (at most {kept})"
            )
        return self.func.from_arg_list(args)


_DISTINCT_ARG_FUNCTION = Parser._parse_distinct_arg_function


def _distinct_arg_function(self: Parser, func: type[exp.Func], distinct_index: int = 0) -> Any:
    name = self._tokens[self._index - 2].text if self._index >= 2 else func.key
    return _DISTINCT_ARG_FUNCTION(self, _Arity(self, func, name), distinct_index)  # type: ignore[arg-type]


Hive.Parser._parse_distinct_arg_function = _distinct_arg_function  # type: ignore[method-assign]
