"""Answers kept per process: the last `size` of them by key, least recently used out.

For the pure passes whose answer is a function of a key a refresh can compute cheaply
(sql/analysis.py per view SQL and source schemas, sql/portable/ per tree and relation
types), and for what is decoded from immutable files, by path (catalog/jdbc.py table
metadata, catalog/manifest_reads.py manifests). Thread-safe; what is kept must not be
changed by its readers (the caller copies what it hands out, or keeps immutable values).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Memo(Generic[V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._kept.get(key)
            if value is not None:
                self._kept.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def pop(self, key: Hashable) -> None:
        """Keep nothing for `key`."""
        with self._lock:
            self._kept.pop(key, None)
