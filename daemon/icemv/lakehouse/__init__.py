"""What a command or the daemon works with: the catalog, its views and Spark, opened lazily.

This is where catalog access and the engine meet, above both: `Lakehouse` hands out the
configured catalog backend, its view store and the SparkSession; `CatalogReads` loads each
table and view at most once for one refresh (and answers the pure SQL passes' look-ups),
`refresh_reads` a refresh's, asking for what the MV's last refresh read in one request;
`PollReads` hands the daemon's polls theirs, each reusing what the last poll loaded.
"""

from icemv.lakehouse.handles import Lakehouse
from icemv.lakehouse.reads import (
    CatalogReads,
    PollReads,
    forget_reads,
    refresh_reads,
    remember,
)

__all__ = ["CatalogReads", "Lakehouse", "PollReads", "forget_reads", "refresh_reads", "remember"]
