"""Storage-table upkeep: leftover refresh branches, snapshot expiry, unreferenced files."""

from icemv.mv.maintenance.compaction import CompactionResult, compact_storage
from icemv.mv.maintenance.upkeep import UpkeepResult, maintain_storage

__all__ = ["CompactionResult", "UpkeepResult", "compact_storage", "maintain_storage"]
