"""icemv's embedded PostgreSQL: the catalog database of the zero-configuration default."""

from icemv.catalog.embedded.server import EmbeddedPostgres

__all__ = ["EmbeddedPostgres"]
