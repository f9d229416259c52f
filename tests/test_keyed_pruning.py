"""Keyed deltas read only the touched keys (refresh/patch/touched_keys.py): K's literal
bounds prune the restricted source reads, the null-safe semi join keeps them exact.

Each key has two versions and the view keeps the latest, so a change to a key's latest
version must bring its older one back from the source: a key the bounds wrongly left out
(an edge of the range, NULL, a quote in a string, a type whose literals do not compare
as the column does) leaves storage different from the view SQL.
"""

from __future__ import annotations

import uuid

import pytest

from icemv.catalog.namespaces import ensure_namespace
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.refresh.patch import touched_keys
from icemv.refresh.policy import refresh_mv
from tests.support.oracle import assert_matches_oracle

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

# Per key type: five keys in increasing order, as SQL literals. The first two go to one
# data file, the next two to another, NULL keys to a third; the fifth is appended later.
KEYS = {
    "BIGINT": ["-9", "0", "3", "12", "40"],
    "STRING": ["'!'", "'a\\'b'", "'a\\\\c'", "'zz'", "'\u00e9'"],  # a quote, a backslash
    "DATE": [f"DATE'2024-0{m}-01'" for m in range(1, 6)],
    "DECIMAL(10,2)": ["-1.50", "0.00", "2.25", "3.00", "9.99"],
    "DOUBLE": ["-1.5", "0.0", "2.5", "3.0", "9.5"],  # no literal bounds: semi join alone
}
DEDUP = (
    "SELECT k, id, v FROM (SELECT k, id, v, row_number() OVER (PARTITION BY k "
    "ORDER BY id DESC) AS rn FROM events) t WHERE rn = 1"
)


@pytest.mark.parametrize("key_type", list(KEYS))
def test_changes_at_the_edges_of_the_touched_keys(lakehouse: Lakehouse, key_type: str) -> None:
    _refresh_through_edge_changes(lakehouse, key_type)


@pytest.mark.parametrize("key_type", ["BIGINT", "STRING"])
def test_bounds_of_a_key_set_too_big_for_the_driver(
    lakehouse: Lakehouse, key_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above `KEYS_ON_DRIVER` keys, the bounds come from one aggregate over the cached K."""
    monkeypatch.setattr(touched_keys, "KEYS_ON_DRIVER", 1)
    _refresh_through_edge_changes(lakehouse, key_type)


def _refresh_through_edge_changes(lakehouse: Lakehouse, key_type: str) -> None:
    spark = lakehouse.spark
    namespace = f"kp_{uuid.uuid4().hex[:8]}"
    ensure_namespace(lakehouse.catalog, (namespace,))
    events = lakehouse.quoted(Identifier((namespace,), "events"))
    k1, k2, k3, k4, k5 = KEYS[key_type]
    spark.sql(
        f"CREATE TABLE {events} (k {key_type}, id BIGINT, v INT) USING iceberg TBLPROPERTIES "
        "('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read')"
    )
    for file in ([k1, k2], [k3, k4], ["NULL"]):  # one data file each, disjoint key ranges
        values = ", ".join(f"({k}, {i}, 0)" for i, k in enumerate(file * 2))
        spark.sql(f"INSERT INTO {events} VALUES {values}")
    mv = Identifier((namespace,), "latest")
    create_mv(lakehouse, mv, DEDUP, properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, mv)
    changes = [
        # the latest version of the lowest and the highest key: K's range edges
        f"DELETE FROM {events} WHERE (k = {k1} OR k = {k4}) AND id >= 2",
        f"DELETE FROM {events} WHERE k IS NULL AND id = 1",  # K = {NULL}
        f"UPDATE {events} SET v = v + 1 WHERE k = {k2} OR k IS NULL",  # a key and NULL
        f"INSERT INTO {events} VALUES ({k3}, 9, 1), ({k5}, 9, 1), (NULL, 9, 1)",
    ]
    for change in changes:
        spark.sql(change)
        result = refresh_mv(lakehouse, mv)
        assert (result.mode, result.reason) == ("incremental", "source-changed"), change
        assert_matches_oracle(lakehouse, mv)
