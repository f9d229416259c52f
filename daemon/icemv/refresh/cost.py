"""What policy `auto` weighs: the rows a change read scans against a full recompute's.

Pure arithmetic over manifest facts (refresh/changes/manifests.py gathers them). The
change read (refresh/changes/reader.py) scans, per moved source:
  - an append-only range: the appended records;
  - otherwise: every data file the range added (at the new snapshot) and removed (at the
    old one), files both added and removed in the range not at all; the data files that
    new position deletes name (each counted at the table's mean file size; all data files
    when a delete file does not name exactly one); for each equality delete the data files
    its values may be in (refresh/changes/pushdown.py; every data file when its values are
    not pushed down); and each file a deletion vector hits twice (old and new), plus the
    delete files.
A full recompute scans every source of the view at its pinned snapshot. Both sides read
the same projected columns, so rows compare like for like. The incremental path costs
more per row (weights, the delta query, cancelling moved rows): `refresh.auto_cost_factor`
scales its rows before the comparison. A delta that recomputes the touched groups of an
aggregate (MIN/MAX or a floating-point SUM under deletes, HAVING, grouping sets) evaluates
the view at the new snapshots semi-joined to the touched keys, so on Spark it scans every
source whole besides the change: its rows are added to the change read's (refresh/plan.py),
and only the embedded engine, which holds small tables whole, keeps it incremental. A merge
of MIN/MAX under deletes recomputes only the groups a delete takes the extreme of, known
once the delta is read: when its reread would be too dear, Spark recomputes fully then.

When the embedded engine takes the change (refresh/embedded/route.py decides; the plan asks
it only when the Spark estimate says full), its read costs less (`embedded_read_rows`): the
deleted positions, the whole files added and removed (a rewrite's unchanged rows cancel
on the driver), and of each data file the deletes hit only the row groups holding them,
read by pyarrow on the driver, counted at `EMBEDDED_SCAN_SHARE` of a row a full recompute
scans.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PositionDeletes:
    records: int  # positions in the delete file
    target: str | None  # the one data file it names; None: several or unknown


@dataclass(frozen=True)
class TouchedFiles:
    """The files one source's change range added or removed, with their record counts."""

    added: Mapping[str, int] = field(default_factory=dict)  # data file -> records
    removed: Mapping[str, int] = field(default_factory=dict)
    position_deletes: tuple[PositionDeletes, ...] = ()
    equality_delete_records: tuple[int, ...] = ()  # one per equality-delete file
    # Per equality-delete file, the data files its values may be in, with their records;
    # None: some delete's values are not pushed down (it reads every data file).
    equality_candidates: tuple[Mapping[str, int], ...] | None = None

    @property
    def equality_scan_records(self) -> int | None:
        """Records the equality deletes have a change read scan (each delete's files)."""
        if self.equality_candidates is None:
            return None
        return sum(sum(files.values()) for files in self.equality_candidates)

    vectors: int = 0  # deletion vectors (Puffin), one data file each
    # The table before the range: what unnamed deletes may hit.
    old_records: int = 0
    old_data_files: int = 0


def change_read_rows(touched: TouchedFiles) -> int:
    """Rows the change read scans for a non-append range (see the module doc)."""
    moved = touched.added.keys() & touched.removed.keys()
    whole = {p: n for p, n in (*touched.added.items(), *touched.removed.items()) if p not in moved}
    rows = sum(whole.values())
    mean_file = touched.old_records / max(touched.old_data_files, 1)
    deletes = touched.position_deletes
    if deletes:
        rows += sum(d.records for d in deletes)
        if any(d.target is None for d in deletes):
            hit = float(touched.old_records)
        else:
            hit = len({d.target for d in deletes} - whole.keys()) * mean_file
        rows += int(min(hit, touched.old_records))
    if touched.equality_delete_records:
        scan = touched.equality_scan_records
        rows += sum(touched.equality_delete_records)
        rows += touched.old_records if scan is None else scan
    rows += int(2 * touched.vectors * mean_file)
    return rows


# What reading one row of a data file's projected row groups with pyarrow on the driver
# costs, against one row of a full recompute by Spark (scan, aggregate, write): measured
# at 1M rows, a whole 1M-row file read and its rows taken in ~0.05 s, a full recompute
# ~0.7 s.
EMBEDDED_SCAN_SHARE = 0.1


def embedded_scan_rows(touched: TouchedFiles) -> tuple[int, int]:
    """What the Arrow change read scans of a range whose equality deletes (if any) are
    pushed down: the rows of the whole data files added and removed plus the positions
    deletes name, and the rows of the data files deletes hit (at most those files whole:
    only their row groups holding the positions are read; the key column of the files an
    equality delete's values may be in)."""
    moved = touched.added.keys() & touched.removed.keys()
    whole = {p: n for p, n in (*touched.added.items(), *touched.removed.items()) if p not in moved}
    rows = sum(whole.values()) + sum(d.records for d in touched.position_deletes)
    mean_file = touched.old_records / max(touched.old_data_files, 1)
    if any(d.target is None for d in touched.position_deletes):
        hit = float(touched.old_records)
    else:
        named = {d.target for d in touched.position_deletes} - whole.keys()
        hit = (len(named) + touched.vectors) * mean_file
    if touched.equality_delete_records:
        rows += sum(touched.equality_delete_records)
        hit += touched.old_records if touched.equality_scan_records is None else 0
        hit += touched.equality_scan_records or 0
    return rows, int(min(hit, touched.old_records))


def embedded_read_rows(touched: TouchedFiles) -> int:
    """Rows the Arrow change read (refresh/embedded/changes.py) costs, in full-scan
    rows: what it scans (`embedded_scan_rows`) at `EMBEDDED_SCAN_SHARE`, the positions deletes
    name whole. A range with equality deletes not pushed down costs Spark's read (the
    Arrow route refuses them)."""
    if touched.equality_delete_records and touched.equality_scan_records is None:
        return change_read_rows(touched)
    rows, hit = embedded_scan_rows(touched)
    return int((rows + hit) * EMBEDDED_SCAN_SHARE)


@dataclass(frozen=True)
class CostEstimate:
    change_rows: int  # all moved sources' change reads
    full_rows: int  # all sources at their pinned snapshots

    def incremental(self, factor: float) -> bool:
        """Whether the change read, weighted by `factor`, costs no more than a full scan."""
        return self.change_rows * factor <= self.full_rows

    def describe(self, factor: float) -> str:
        return (
            f"change read ~{self.change_rows} rows (x{factor:g}) against {self.full_rows} "
            "rows for a full recompute"
        )


def estimate(
    appended: Iterable[int],
    rewritten: Iterable[TouchedFiles],
    full_rows: int,
    arrow: bool = False,
) -> CostEstimate:
    """`appended`: records of each append-only source; `rewritten`: the other moved ones;
    `arrow`: the change read on the driver for the embedded engine (`embedded_read_rows`)."""
    read = embedded_read_rows if arrow else change_read_rows
    change = sum(appended) + sum(read(t) for t in rewritten)
    return CostEstimate(change, full_rows)
