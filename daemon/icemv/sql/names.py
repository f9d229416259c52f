"""icemv's own column names in delta queries (`__icemv_*`), in one place.

Source and view columns keep their names; these never collide with them in practice
and are always quoted like every other name.
"""

from __future__ import annotations

WEIGHT = "__icemv_w"  # +1 inserted, -1 deleted: every delta row carries it
ANY = "__icemv_any"  # the one column of a key-less, argument-less pre-aggregation delta
KEYS = "__icemv_keys"  # the key values a keyed delta's changes touch (sql/keys.py)...
KEY = "__icemv_key"  # ...in this column


def key_column(index: int) -> str:
    """The delta column of group key `index`."""
    return f"__icemv_k{index}"


def argument_column(index: int) -> str:
    """The delta column of aggregate argument `index`."""
    return f"__icemv_a{index}"
