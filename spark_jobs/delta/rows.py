"""The one row of a query that always answers one.

An aggregate without grouping, ``DESCRIBE DETAIL`` and ``OPTIMIZE`` answer exactly one row, but
pyspark types ``DataFrame.first()`` as optional for every frame. :func:`one_row` says so once, typed,
instead of each caller indexing an optional row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row


def one_row(frame: DataFrame) -> Row:
    """The first row of ``frame``, a query that always answers at least one (fails loudly if not)."""
    row = frame.first()
    if row is None:
        raise RuntimeError(f"A query that always answers one row answered none (columns {frame.columns})")
    return row
