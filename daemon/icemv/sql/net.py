"""Change rows netted, and the one identity of a row, as a tree both executors run.

Rows with a weight (+1 inserted, -1 deleted, more for copies) are summed per identical row
and zero sums dropped: a copy-on-write rewrite's moved rows and an update that changed
nothing the view reads cancel here. Two rows are identical when every column is: NULLs
alike, and floating point by its text, which tells -0.0 from 0.0 and keeps NaN one value
(grouping by the value itself would make -0.0 and 0.0 one, as both engines normalise
keys); complex values by their text too. The text never leaves the grouping: the row keeps
its value (MIN over values of one text is that value). A stored row's identity in a
storage rewrite (refresh/patch/row_images.py) is the same: floats by their bits, NaN one.
Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from sqlglot import exp

from icemv.sql.names import WEIGHT


def _quoted(name: str) -> exp.Column:
    return exp.Column(this=exp.to_identifier(name, quoted=True))


# How a column enters a row's identity: its value, or its text (floating point, and
# complex values, which Spark cannot group by).
Identity = Literal["value", "float", "complex"]


def identity_key(name: str, identity: Identity) -> exp.Expr:
    """The grouping key of a column: itself, or its text."""
    if identity != "value":
        return exp.Cast(this=_quoted(name), to=exp.DataType.build("STRING"))
    return _quoted(name)


def _carried(name: str, identity: Identity) -> exp.Expr:
    """The value a row keeps: its group key, or one of the values of one text (MIN for
    floating point, whose equal texts are equal values; FIRST for what MIN cannot order)."""
    column: exp.Expr = _quoted(name)
    if identity == "float":
        column = exp.Min(this=column)
    elif identity == "complex":
        column = exp.First(this=column)
    return exp.alias_(column, name, quoted=True)


def netted(source: exp.Expr, columns: Sequence[tuple[str, Identity]]) -> exp.Select:
    """`source`'s rows (`columns`, each with how it enters the identity, then WEIGHT)
    summed by weight per identical row, the zero sums dropped; WEIGHT an INT."""
    keys = [identity_key(name, identity) for name, identity in columns]
    values = [_carried(name, identity) for name, identity in columns]
    total = exp.Sum(this=_quoted(WEIGHT))
    weight = exp.alias_(exp.Cast(this=total, to=exp.DataType.build("INT")), WEIGHT, quoted=True)
    query = exp.select(*values, weight).from_(source)
    if keys:
        query = query.group_by(*keys)
    return query.having(exp.NEQ(this=total.copy(), expression=exp.Literal.number(0)))
