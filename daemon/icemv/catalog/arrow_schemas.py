"""An Iceberg schema's Arrow schema, converted once per process.

pyiceberg converts a schema afresh each time `Schema.as_arrow()` is called: 0.38 ms for
a ten-column table here, and a small refresh asked for three or four of them (the
relations' types, the stored rows, the patch conformed to the storage). A schema's fields
fix its Arrow schema (names, types, nullability, field ids), so the conversion is kept
by them: a schema read again from new metadata finds it.
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.schema import Schema

from icemv.sql.memo import Memo

_converted: Memo[pa.Schema] = Memo(1024)


def arrow_schema(schema: Schema) -> pa.Schema:
    """`schema.as_arrow()`, kept (an Arrow schema is immutable)."""
    key = (schema.schema_id, schema.fields)
    found = _converted.get(key)
    if found is None:
        found = schema.as_arrow()
        _converted.put(key, found)
    return found
