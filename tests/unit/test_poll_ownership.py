"""A poll checks only the MVs this replica owns and that have no refresh under way."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, cast

from icemv.identifiers import Identifier
from icemv.refresh.result import RefreshResult
from icemv.service.metrics import Metrics
from icemv.service.poller import Reconciler
from icemv.service.source_index import IndexSnapshot

MVS = [Identifier(("n",), f"mv{i}") for i in range(6)]


# A catalog that lists nothing, so a poll's reads load nothing up front.
LAKEHOUSE = SimpleNamespace(backend=SimpleNamespace(listing=lambda namespaces: None))


class Index:
    def rebuild(self, reads: Any = None) -> IndexSnapshot:
        mvs = {mv: cast(Any, SimpleNamespace(identifier=mv, properties={})) for mv in MVS}
        return IndexSnapshot(mvs=mvs)


def request(mv: Identifier, reason: str) -> Future[RefreshResult]:
    raise AssertionError("check is replaced")


def test_a_poll_checks_owned_idle_mvs_and_drops_the_freshness_of_moved_ones() -> None:
    owned = set(MVS[:4])
    busy = {MVS[1]}
    metrics = Metrics()
    poller = Reconciler(
        cast(Any, LAKEHOUSE),
        cast(Any, Index()),
        metrics,
        request,
        60.0,
        owns=owned.__contains__,
        busy=lambda: busy,
    )
    checked: list[Identifier] = []
    poller.check = lambda mv, reads=None: checked.append(mv.identifier)  # type: ignore
    for mv in MVS:
        metrics.staleness.labels(mv.dotted).set(1.0)

    poller.poll()
    assert checked == [MVS[0], MVS[2], MVS[3]]
    assert metrics.registry.get_sample_value("icemv_owned_mvs") == 4

    owned.discard(MVS[0])  # a rebalance gave it to another replica
    checked.clear()
    poller.poll()
    assert checked == [MVS[2], MVS[3]]
    staleness = metrics.registry.get_sample_value
    assert staleness("icemv_mv_staleness_seconds", {"mv": MVS[0].dotted}) is None
    assert staleness("icemv_mv_staleness_seconds", {"mv": MVS[2].dotted}) == 1.0
