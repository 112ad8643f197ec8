"""MERGE target pruning by key: the ON clause lists the keys a MERGE's source holds.

A Delta MERGE joins its source with every row of the files it touches. With deletion vectors the join
keeps the source's side (source ⟕ target), so the target's rows reach the join whole, shuffled, and
its cost grows with the table instead of the change: changed keys are scattered, so every file is
touched. A literal ``t.id IN (...)`` in the ON clause names the target alone; Spark filters the
target's rows with it in the scan, before the shuffle. Measured at 10M rows (local[2], 16 columns,
deletion vectors, 9.8k source rows of which 7.4k matched): the MERGE took 20.6-23.5 s without the
list and 8.7-10.6 s with it, and wrote 1 file instead of 14; at 1M rows, the same source: 6.0-8.1 s
against 4.5-5.6 s.

The list is SQL text: Spark parses and plans every value, and Delta records the ON clause in the
commit's ``operationParameters`` in the table's log (so a MERGE's keys stay readable there for the
log's retention, as its partition values do). With 150k keys the same MERGE took 37-41 s against
22-29 s without the list. So past :data:`MAX_LISTED_KEYS` source rows the ON clause stays as it is,
and so it does for key types whose values are not exact as literals
(:func:`spark_jobs.delta.literals.has_literal`). Each value is written as a literal of its column's exact
type: a composite key is compared as a struct, whose fields Spark does not widen. The list never changes
what matches: a target row that equals a source row on the key has one of the source's keys.

Reading the keys is a Spark job over the source, so the MERGEs that list them read sources that are
already computed: a local checkpoint (the snapshot's change rows, either path; the wide table's
folded rows) or rows over a persisted frame (a Kafka upsert's per-key states). The wide table's
reverse-index MERGEs do not: their sources are joins over Change Data Feeds, which a first run reads
whole, and reading them for the list would compute them twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from spark_jobs.delta.keys import any_null
from spark_jobs.delta.literals import column, has_literal, literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Past this many source rows a MERGE goes without the key list.
MAX_LISTED_KEYS = 10_000


def listed_keys(source: DataFrame, key: Sequence[str], alias: str = "t") -> str | None:
    """SQL on the target ``alias``: its key is one of the keys of ``source``'s rows; None when they are
    more than :data:`MAX_LISTED_KEYS` or a key column's type has no exact literal. A row with a null
    in its key matches nothing, so it is left out; ``FALSE`` when no row is left."""
    types = {f.name: f.dataType.simpleString() for f in source.schema.fields}
    if not all(has_literal(types.get(c)) for c in key):
        return None
    values = source.where(~any_null(list(key))).select(*key).limit(MAX_LISTED_KEYS + 1).collect()
    if len(values) > MAX_LISTED_KEYS:
        return None
    if not values:
        return "FALSE"
    if len(key) == 1:
        return f"{column(alias, key[0])} IN ({', '.join(literal(row[0], types[key[0]]) for row in values)})"
    tuples = ", ".join("(" + ", ".join(literal(v, types[c]) for c, v in zip(key, row)) + ")" for row in values)
    return f"({', '.join(column(alias, c) for c in key)}) IN ({tuples})"
