"""The portability gate: a Spark SQL tree DuckDB computes exactly as Spark 3.5 does, or why not.

The delta and merge trees the rules build (sql/delta.py, refresh/patch/) are Spark SQL. The
embedded engine (refresh/embedded/executor.py) runs the same trees: this pass types every node
with Spark's types (sql/spark_types.py, DECIMAL by sql/decimals.py) over the relations
the engine holds, refuses exactly the constructs where the two engines differ, and renders
the rest as DuckDB SQL through sqlglot, with a cast to Spark's type wherever DuckDB would
type a value differently. What it refuses goes to Spark, with the reason as the refresh's
`engine_reason`. Every construct it admits is checked, value for value, against Spark by
the engine-comparison corpus (tests/test_engine_corpus.py).

Where the engines differ, and what the gate does about it:

- integer overflow: Spark wraps, DuckDB raises: admitted (a raise falls back to Spark);
  SUM of integers is BIGINT in Spark, HUGEINT in DuckDB: cast back (strictly: overflow
  raises).
- DECIMAL: `+`, `-` and `*` are exact in DuckDB at their natural scale (max(s1, s2), s1 +
  s2) or raise (overflow past 38 digits), and Spark computes the exact value and rounds it
  once, HALF_UP, to its result type (past precision 38 a smaller scale): the exact value
  cast to Spark's type is the same rounding (DuckDB's casts round half away from zero),
  and a value too large for it raises where Spark's is NULL. Refused: a natural scale past
  38. SUM's type is DECIMAL(p + 10, s) in Spark: cast. Division: DuckDB
  divides DECIMAL as DOUBLE, so it is rendered as long division on the digits in
  HUGEINT, rounding the exact quotient half up to Spark's scale (`_decimal_division`).
  AVG of a DECIMAL is what Spark's Average evaluates: its sum in DECIMAL(p + 10, s)
  divided by the count, rounded once to DECIMAL(p + 4, s + 4) (the same long division);
  over a window the same of windowed SUM and COUNT.
- division and `%` by zero: NULL in Spark; the connection is set so DuckDB agrees
  (`error_on_division_by_zero`, `ieee_floating_point_ops` off).
- time zones: TIMESTAMP is Spark's session-zone type: DuckDB's TIMESTAMPTZ, the
  connection's TimeZone set to Spark's session zone. In a session zone of offset 0
  (`UTC_ZONES`), date_trunc and hour/minute/second of a TIMESTAMP, and the TIMESTAMP
  arguments of the functions that read its local time (the table's `local_time`:
  date_format, months_between), are computed on its UTC time
  (`make_timestamp(epoch_us(ts))`, back with `make_timestamptz`): there the local time is
  the UTC time, so these are ICU's values (checked against ICU on generated instants,
  tests/unit/test_utc_local.py; the engine and function corpora run the forms against
  Spark), and DuckDB binds ICU's functions anew on every run of a prepared statement.
- -0.0 and NaN as keys: Spark normalises them in GROUP BY and DISTINCT, DuckDB keeps the
  first it sees: floating-point group keys and DISTINCT over them (COUNT(DISTINCT),
  SUM(DISTINCT) included) are refused.
- casts: Spark's CAST (non-ANSI) gives NULL or wraps where DuckDB's raises or rounds
  differently: every cast is rendered strict (a value that does not fit raises in DuckDB,
  and Spark computes it), so admitted are integers to integers, integers to DOUBLE and
  DECIMAL, DECIMAL to DECIMAL (fewer places round half up in both), DECIMAL to DOUBLE (the
  nearest DOUBLE in both: checked at every precision on DuckDB 2.0.1), TIMESTAMP to DATE and
  back, integers, dates, timestamps and DECIMALs of scale at most 6 (never E notation in
  Spark) to strings (a timestamp as Spark writes it: its fraction without trailing zeros),
  ISO date and timestamp literals. An integer literal in DECIMAL arithmetic is typed by its
  digits, as Spark does. A string literal cast to a number has one value, computed at plan
  time as Spark does (sql/string_casts.py) and rendered as an exact literal. A string cast
  to an integer type, and a string compared with an integer (Spark casts the string), by
  Spark's grammar written out (string_numbers.py: blanks trimmed, a fraction truncated, NULL
  past the range).
- strings: CONCAT and `||` are NULL when an argument is (`||` in both); ordering is binary
  in both; LIKE only with a literal pattern without escapes; SUBSTR with literal positions
  from 1; regular expressions (RLIKE, regexp_extract, regexp_replace) only of a literal
  Java pattern in the subset sql/regex.py writes as an RE2 pattern matching alike; UPPER
  and LOWER (rows of the function table) agree on ASCII only (Spark's upper('ß') is 'SS',
  DuckDB's 'ẞ'): other text raises in DuckDB. TRIM names its characters for DuckDB (a bare
  TRIM there also removes Unicode spaces such as U+00A0, Spark's only the ASCII space).
- NULL ordering: Spark puts NULLs first ascending and last descending; a window's ORDER BY
  is written out that way for DuckDB (sqlglot's dialects). Windows: ranks (PERCENT_RANK and
  CUME_DIST one DOUBLE division of counts in both), LAG/LEAD and aggregates (SUM, COUNT,
  MIN, MAX, AVG) and FIRST_VALUE/LAST_VALUE (not IGNORE NULLS) over the default frame, a
  ROWS frame of counted or unbounded rows, or RANGE from UNBOUNDED PRECEDING; RANGE offsets
  and frames of other functions refused. ORDER BY and LIMIT of a SELECT: an integer row
  count, and no floating-point key (which engine tells -0.0 from 0.0 is not checked), NULLs
  placed as the tree says.
- subqueries (EXISTS, IN, scalar; correlated or not) as the same SQL: EXISTS is two-valued
  in both, a scalar subquery of more than one row raises in both; `x IN (SELECT ...)` and
  `NOT (x IN (SELECT ...))` where a WHERE tests its truth alone: under AND/OR, as a
  CASE/IF condition or branch (`_filters`); and `x IN (SELECT ...)` or `NOT (x IN (SELECT
  ...))` in a projection under no other NOT, as `COALESCE(..., FALSE)`: there Spark gives
  FALSE where SQL, and DuckDB, give NULL (`_valued`). Spark's optimiser first moves NOTs
  through AND, OR and NOT onto the IN (De Morgan), where its NULL-aware NOT IN is not the
  NOT of its IN: the gate moves them the same way before it looks (`_nots_pushed`); a NOT
  left above anything else (a CASE, a comparison) over an IN is refused.
  Integers and strings in an IN (a list or a subquery) compare as strings, as in Spark.
- WITH: each CTE gated like a query (a column list renames its columns), its name hiding
  a relation's; recursive WITH refused.
- generators: `LATERAL VIEW explode(sequence(a, b))` (counting down when a > b, as Spark's
  does and DuckDB's series does not without a step) and `explode(array(x, ...))` of one
  type, each as an array of Spark's element type. OUTER, explode_outer (a row of NULLs
  for an empty or NULL array, which sqlglot's plain UNNEST drops) and posexplode
  (positions from 0, DuckDB's ordinality from 1) as lateral joins: `LEFT JOIN LATERAL
  (SELECT ... FROM UNNEST(...) WITH ORDINALITY) ON TRUE`.
- grouping sets: GROUPING SETS, ROLLUP and CUBE in the GROUP BY make the same groups in
  both, keys NULL where rolled up, except over no rows: DuckDB then makes the empty set's
  row (as SQL says), Spark none, so the gate adds `HAVING COUNT(*) > 0` (every other group
  has a row). GROUPING(x) is TINYINT in Spark (cast), GROUPING_ID() the same bits in both
  (the first grouping expression highest). WITH ROLLUP / WITH CUBE and nested sets
  refused.
- MEDIAN, `percentile(x, p)` and `percentile_cont(p) WITHIN GROUP (ORDER BY x [DESC])`
  of numbers, a literal p: Spark's Percentile written out step for step (aggregates.py;
  DuckDB's quantile_cont rounds otherwise); `percentile_disc` as Spark 3.5's
  PercentileDisc (the value at place ceil(n * p)); a group of DOUBLE values with both
  -0.0 and 0.0 raises (Spark orders the two as its hash map does); DISTINCT and windows
  refused.
- ANY_VALUE(x): Spark's is its First, NULLs included: DuckDB's FIRST (its ANY_VALUE skips
  NULLs). Which row's value neither engine defines; where the group decides it, both
  give it.
- functions: besides those above, the table of sql/functions/table.py (each argument's types
  and literals, Spark's result type, the DuckDB expression), proven per function on
  generated values; set operations other than UNION ALL, complex types, and functions
  in neither: refused.
Pure: sqlglot trees and types only (the answers kept per process, see `to_duckdb`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from sqlglot import exp

from icemv.errors import EngineRefusedError
from icemv.sql.memo import Memo
from icemv.sql.portable.common import UTC_ZONES, Portable, Schema, duckdb_type, spark_type_of
from icemv.sql.portable.queries import Gate

__all__ = ["UTC_ZONES", "Portable", "Schema", "Tree", "built", "duckdb_type",
           "spark_type_of", "to_duckdb", "tree_key"]  # fmt: skip

_answers: Memo[Portable | str] = Memo(2048)


# A tree, or a builder of it (called only when the tree is needed: see `given`).
Tree = exp.Query | Callable[[], exp.Query]


def built(tree: Tree) -> exp.Query:
    return tree if isinstance(tree, exp.Query) else tree()


def to_duckdb(
    query: Tree,
    relations: Mapping[str, Schema],
    given: Hashable | None = None,
    utc: bool = False,
) -> Portable:
    """`query` (Spark SQL over the named relations) as DuckDB SQL, or EngineRefusedError.

    The answer is a function of the tree and the relations' types, so it is kept per
    process, keyed by both: a refresh builds the trees its MV's last refresh built (the
    executor names its relations alike each time). The tree's key is its whole structure
    (`tree_key`): every node's class and every argument, strings with their case. Two
    trees with one key are one tree to the gate, which reads nothing else of them
    (types it derives from `relations`, not from the nodes' annotations). The key costs
    a tenth of rendering the tree (0.26 against 2.1 ms for a fleet MV's trees).

    `given`: a key that names the tree exactly (its caller's: what the tree is a
    function of), used instead of the tree's own; `query` may then be a builder of the
    tree, called only when the answer is not kept.

    `utc`: the session zone the SQL runs in is UTC (the gate's `Gate.utc`); SQL rendered
    so runs only there."""
    types = tuple((name, tuple(schema.items())) for name, schema in sorted(relations.items()))
    if given is None:
        query = built(query)
        key: Any = (tree_key(query), types, utc)
    else:
        key = (("given", given), types, utc)
    try:
        kept = _answers.get(key)
    except TypeError:  # an argument that cannot be hashed: gate it, keep nothing
        key, kept = None, None
    if kept is None:
        # A tree its caller names by a key may be kept by the caller: the gate reads a copy.
        tree = query.copy() if given is not None and isinstance(query, exp.Query) else built(query)
        try:
            rendered, columns = Gate(relations, utc).query(tree)
            kept = Portable(rendered.sql(dialect="duckdb", copy=False), tuple(columns))
        except EngineRefusedError as why:
            kept = str(why)
        if key is not None:
            _answers.put(key, kept)
    if isinstance(kept, str):
        raise EngineRefusedError(kept)
    return kept


def tree_key(node: Any) -> Any:
    """A sqlglot tree as nested tuples, equal exactly when the trees are: each node's
    class and its arguments in order (unset ones left out), strings as they are. sqlglot's
    own `==` compares hashes, so it cannot be an exact key."""
    if isinstance(node, exp.Expr):
        return (
            type(node),
            *[
                (name, tree_key(value))
                for name, value in node.args.items()
                if value is not None and not (type(value) is list and not value)
            ],
        )
    if type(node) is list:
        return tuple([tree_key(value) for value in node])
    return node
