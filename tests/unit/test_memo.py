"""sql/memo.py: the last `size` answers by key, the least recently used out first."""

from __future__ import annotations

from icemv.sql.memo import Memo


def test_the_least_recently_used_answer_goes_first() -> None:
    memo: Memo[str] = Memo(2)
    memo.put("a", "A")
    memo.put("b", "B")
    assert memo.get("a") == "A"  # now b is the least recently used
    memo.put("c", "C")
    assert memo.get("b") is None
    assert (memo.get("a"), memo.get("c")) == ("A", "C")
