"""Widen job: merge some sources of a wide table into ``<warehouse>/wide/<name>``.

Spec::

    {"job": "widen", "warehouse": ..., "wide": {wide table spec, see .config},
     "sources": ["order_info", "order_address"],     # this step's sources; default: all of them
     "versions": {"order_info": 7, ...},              # exact versions from the upstream snapshot tasks
     "run_id": ..., "logical_date": ...}

A partitioned wide table (``partition_by`` in the wide-table spec) is created partitioned, and each
full-join MERGE matches its changed keys only in the partitions their stored rows are in
(:mod:`spark_jobs.delta.partitions`), so a change confined to one partition rewrites only its files. A left
join's MERGE matches by key alone: its rows' partitions are not in the reverse index, and finding them
would cost the scan of the wide table's keys that pruning saves (Delta still rewrites only the files
holding the rows it updates).

The spec is validated before any Spark work. A step merges its full-join sources first (one
partial-update MERGE for all of them, so several sources updating one key in one run fold in order),
then each left join (reverse index). Each source is read by exact version over (merged, target]; the
merged version per (table, consumer ``widen:<name>``) lives in ``_system/consumers`` and, atomically
with the data, in the ``userMetadata`` of the wide-table commit that merged it, so a run killed
between the MERGE and the consumer commit never merges the same changes twice (a ``sum`` would
double-count them).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from spark_jobs import crashpoints
from spark_jobs.state import consumers
from spark_jobs.contract import Warehouse, WidenResult, WidenSpec, table_ref
from spark_jobs.errors import ConcurrentWriteError, ConfigError, DataQualityError, SchemaDriftError
from spark_jobs.delta.keys import require_columns
from spark_jobs.delta.partitions import check_layout, check_new_layout, pruned
from spark_jobs.delta.renames import renamed_columns
from spark_jobs.delta.lake import (
    TABLE_PROPERTIES,
    assignments,
    commit_metadata,
    delta_path,
    history,
    insert_values,
    is_delta_table,
    latest_version,
    merge_into,
    on_top_of,
    require_intact,
    retry_on_conflict,
    table_history,
)
from spark_jobs.widen import guards, partial_update, reverse_index
from spark_jobs.widen.changes import ROW_TYPES, read_changes, require_table
from spark_jobs.contract.key_types import check_key_types
from spark_jobs.contract.wide_table import ADDS, RETRACTIONS, Source, WideTable
from spark_jobs.delta.row_hash import read_table
from spark_jobs.delta.rows import one_row

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

EXAMPLES = 5
BROADCAST_CELLS = 1_000_000  # folded rows x columns a change run's MERGE broadcasts (~20 MB on the driver)


@dataclass
class Input:
    """One table a step reads, between the version it last merged and the version it merges now."""
    rel: str
    uri: str
    consumer: str
    from_version: int | None
    to_version: int

    @property
    def advances(self) -> bool:
        return self.from_version is None or self.to_version > self.from_version


def run_widen(spark: SparkSession, spec: WidenSpec) -> WidenResult:
    t = spec.wide  # validated with the spec, before any Spark work
    step = step_sources(t, spec.sources)
    versions = spec.versions
    wh = spec.lake
    uri = wh.uri(t.rel)
    base_md = {"job": spec.job, "wide": t.name, "primary_key": t.primary_key,
               "run_id": spec.run_id, "logical_date": spec.logical_date}
    tracked = [(s.table, t.consumer()) for s in step] + [(t.rel, t.consumer(s.name)) for s in step if s.is_left]
    # The one read of the wide table's log before writing (None: no table yet): whether it exists, the
    # versions it merged, and its head, on top of which the fold's commit lands.
    entries = require_intact(table_history(uri), uri)
    exists = entries is not None
    base = int(entries[0]["version"]) if entries else -1
    if exists and t.partition_by:
        check_layout(spark, uri, t.partition_by, f"Wide table {t.name}")
    merged = _merged_versions(wh, t, entries or [], tracked)
    inputs = {s.name: _input(wh, t, s, versions.get(s.name), merged) for s in step}
    full = [s for s in step if not s.is_left]
    left = [s for s in step if s.is_left]
    if left and not full and not exists:
        raise ConfigError(f"Wide table {t.name} does not exist yet: merge its full-join sources "
                          f"{[s.name for s in t.full_sources]} before the left join(s) {[s.name for s in left]}")
    types = _types(spark, wh, t, step, inputs, exists)
    # the wide key and the foreign keys the reverse indexes are keyed by
    check_key_types({c: kind.simpleString() for c, kind in types.items()},
                    [*t.primary_key, *(c for s in left for c in s.on)], f"Wide table {t.name}")
    columns = t.merged_columns(full)
    partial_update.check_types(t, columns, types)
    events = _full_events(spark, t, full, inputs, columns, types)  # refuses deletes before any write

    wanted = list(dict.fromkeys([*t.primary_key, *t.partition_by, *columns, *[c for s in left for c in s.columns]]))
    _ensure_wide(spark, t, uri, wanted, types, base_md, exists)
    commits: dict[str, dict[str, Any] | None] = {}  # step part -> metadata of the commit it made
    if full:
        done = [(inputs[s.name].rel, inputs[s.name].consumer, inputs[s.name].to_version) for s in full]
        inserts_only = all(inputs[s.name].from_version is None and not s.is_changelog for s in full)
        commits["full"] = _merge_full(spark, t, uri, events, columns, types, {**base_md, "merged": done}, base,
                                      inserts_only)
    wide_inputs = []
    for s in left:
        wide_in = Input(t.rel, uri, t.consumer(s.name), merged.get((t.rel, t.consumer(s.name))),
                        latest_version(uri))
        wide_inputs.append(wide_in)
        commits[s.name] = _merge_left(spark, wh, t, s, inputs[s.name], wide_in, types, base_md)

    crashpoints.reached("widen.merged")
    read = [*inputs.values(), *wide_inputs]
    behind = _recorded_behind(wh, t, [i for i in read if not i.advances])
    consumers.commit_all(wh, {(i.rel, i.consumer): i.to_version
                                     for i in read if i.advances or (i.rel, i.consumer) in behind}, spec.run_id)
    return _result(spec, inputs, wide_inputs, commits)


def _result(spec: WidenSpec, inputs: dict[str, Input], wide_inputs: list[Input],
            commits: dict[str, dict[str, Any] | None]) -> WidenResult:
    """The step's result: the wide table's new version and what each of its commits merged."""
    t, wh = spec.wide, spec.lake
    uri = wh.uri(t.rel)
    recent = history(uri, 2 * len(commits) + 2)
    version = recent[0]["version"]
    return WidenResult(
        table=t.rel,
        uri=uri,
        version=version,
        wide=t.name,
        primary_key=t.primary_key,
        sources={name: {"table": i.rel, "from_version": i.from_version, "to_version": i.to_version}
                 for name, i in inputs.items()},
        stats={part: _stats(recent, md) for part, md in commits.items()},
        inputs=[table_ref(wh, i.rel, i.to_version) for i in [*inputs.values(), *wide_inputs]],
        outputs=[table_ref(wh, t.rel, version)],
    )


def step_sources(t: WideTable, names: list[str]) -> list[Source]:
    """The sources a step merges, full joins first (priority) in spec order, then left joins in join
    order (a left join after the one providing its foreign key)."""
    chosen = t.sources if not names else [t.source(n) for n in names]
    return [s for s in chosen if not s.is_left] + [s for s in t.left_sources if s in chosen]


def _merged_versions(wh: Warehouse, t: WideTable, entries: list[dict[str, Any]],
                     wanted: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """(table, consumer) -> the newest version merged into the wide table.

    The wide table's own commits (its history ``entries``) record what they merged, atomically with
    the data, so they are read first; ``_system/consumers`` (committed after each run) covers the
    pairs whose commits are no longer in the Delta log, or that never changed a row.
    """
    merged: dict[tuple[str, str], int] = {}
    for entry in entries:
        for rel, consumer, version in entry["metadata"].get("merged") or []:
            merged[(rel, consumer)] = max(int(version), merged.get((rel, consumer), -1))
    if any(pair not in merged for pair in wanted):
        for pair, version in consumers.committed_versions(wh, t.consumer()).items():
            if pair in wanted:
                merged[pair] = max(version, merged.get(pair, -1))
    return merged


def _recorded_behind(wh: Warehouse, t: WideTable, idle: list[Input]) -> set[tuple[str, str]]:
    """The pairs with nothing new to merge whose ``_system/consumers`` row is older than what the wide
    table's own log says it merged: a run killed between its fold and its consumer commit leaves them
    so. The next run that finds nothing to merge records them, so the two never disagree for long —
    once the fold's commit has left the Delta log, ``_system/consumers`` is all that is left to say
    the changes were merged, and a ``sum`` must not count them again. Read only when a pair is idle."""
    if not idle:
        return set()
    recorded = consumers.committed_versions(wh, t.consumer())
    return {(i.rel, i.consumer) for i in idle if recorded.get((i.rel, i.consumer), -1) < i.to_version}


def _input(wh: Warehouse, t: WideTable, s: Source, version: int | None,
           merged_versions: dict[tuple[str, str], int]) -> Input:
    uri = wh.uri(s.table)
    latest = require_table(uri, s.table, f"Wide table {t.name}, source {s.name}")
    to_version = latest if version is None else int(version)
    merged = merged_versions.get((s.table, t.consumer()))
    if merged is not None and merged > to_version:
        # A re-run of an older task finds its changes already merged: nothing to do, nothing moves back.
        to_version = merged
    return Input(s.table, uri, t.consumer(), merged, to_version)


def _types(spark: SparkSession, wh: Warehouse, t: WideTable, step: list[Source], inputs: dict[str, Input],
           exists: bool) -> dict[str, DataType]:
    """Wide column -> Spark type: the wide table's own schema (if it ``exists``), then the step's
    sources (which must agree with it), then other full-join sources for group fields this step nulls
    but does not carry."""
    types: dict[str, DataType] = {}
    owner: dict[str, str] = {}
    uri = wh.uri(t.rel)
    if exists:
        for f in spark.read.format("delta").load(uri).schema.fields:
            types[f.name], owner[f.name] = f.dataType, f"wide table {t.rel}"
    for s in step:
        inp = inputs[s.name]
        schema = read_table(spark, inp.uri, inp.to_version).schema
        mapping = {**s.key, **s.columns}  # a left join's key types follow the wide fk columns
        event = [c for c in (s.row_kind_field, s.order_field) if c]
        _require_source_columns(t, s, inp.uri, schema, [*mapping.values(), *s.on.values(), *event],
                                inp.to_version)
        _check_changelog_types(t, s, schema)
        for wide_col, src_col in mapping.items():
            _agree(t, types, owner, wide_col, schema[src_col].dataType, f"source {s.name}")
    for c in t.merged_columns([s for s in step if not s.is_left]) + [c for s in step for c in s.on] + t.partition_by:
        if c not in types:
            _type_from_other_sources(spark, wh, t, c, types, owner)
    return types


def _require_source_columns(t: WideTable, s: Source, uri: str, schema: StructType,
                            needed: list[str], version: int) -> None:
    """The source table (``schema`` at ``version``) has the columns the spec names. A name its snapshot
    renamed (``renames=``) fails naming the new one: the spec names a source's current columns, and
    following the rename silently would leave a stale spec working only while the rename commit is in
    the Delta log."""
    needed = list(dict.fromkeys(needed))
    missing = [c for c in needed if c not in schema.fieldNames()]
    renamed = renamed_columns(history(uri), missing, version) if missing else {}
    if renamed:
        told = ", ".join(f"{old!r} -> {new!r} (version {at})" for old, (new, at) in renamed.items())
        raise ConfigError(f"Wide table {t.name}, source {s.name}: {s.table} renamed column(s) {told}, and the "
                          f"wide-table spec still names {sorted(renamed)}. Name the new column(s) in the source's "
                          "columns/key/on (the wide table's own column names stay). Nothing was written.")
    require_columns(schema.fieldNames(), needed, f"Wide table {t.name}, source {s.name} ({s.table}): column(s)")


def _agree(t: WideTable, types: dict[str, DataType], owner: dict[str, str], col: str, dtype: DataType,
           who: str) -> None:
    if col in types and types[col] != dtype:
        raise SchemaDriftError(f"Wide table {t.name}: column {col!r} is {types[col].simpleString()} in "
                               f"{owner[col]} but {dtype.simpleString()} in {who}")
    types.setdefault(col, dtype)
    owner.setdefault(col, who)


def _check_changelog_types(t: WideTable, s: Source, schema: StructType) -> None:
    from pyspark.sql.types import IntegralType, StringType

    where = f"Wide table {t.name}, changelog source {s.name} ({s.table})"
    if s.row_kind_field and not isinstance(schema[s.row_kind_field].dataType, StringType):
        raise ConfigError(f"{where}: row_kind_field {s.row_kind_field!r} must be a string column of row kinds "
                          f"{[*ADDS, *RETRACTIONS]}, it is {schema[s.row_kind_field].dataType.simpleString()}")
    if s.order_field and not isinstance(schema[s.order_field].dataType, IntegralType):
        raise ConfigError(f"{where}: order_field {s.order_field!r} must be an integer column (an offset or log "
                          f"position), it is {schema[s.order_field].dataType.simpleString()}")


def _type_from_other_sources(spark: SparkSession, wh: Warehouse, t: WideTable, col: str, types: dict[str, DataType],
                             owner: dict[str, str]) -> None:
    for s in t.sources:
        uri = wh.uri(s.table)
        if col in s.columns and is_delta_table(uri):
            schema = read_table(spark, uri).schema
            _require_source_columns(t, s, uri, schema, [s.columns[col]], latest_version(uri))
            dtype = schema[s.columns[col]].dataType
            _agree(t, types, owner, col, dtype, f"source {s.name}")
            return
    raise ConfigError(f"Wide table {t.name}: the type of column {col!r} is unknown: no snapshot of a source "
                      f"providing it exists yet")


def _full_events(spark: SparkSession, t: WideTable, full: list[Source], inputs: dict[str, Input], columns: list[str],
                 types: dict[str, DataType]) -> DataFrame | None:
    """Every source row written since the last merge as an event for the partial-update fold, or None."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    seq_type = types[t.sequence_field] if t.sequence_field else IntegerType()
    frames = []
    for idx, s in enumerate(full):
        inp = inputs[s.name]
        cdf = read_changes(spark, inp.uri, inp.from_version, inp.to_version)
        if cdf is None:
            continue
        rows, retraction, removal, position = _source_events(t, s, cdf)
        if t.ignore_delete:
            rows = rows.where(~retraction)
        elif not _can_retract(t, s) and (s.is_changelog or inp.from_version is not None):
            with guards.reported(DataQualityError):  # the look for deletes meets a changelog's checks first
                _refuse_deletes(t, s, inp, rows, retraction)
        seq = (F.col(s.columns[t.sequence_field]) if t.sequence_field in s.columns else F.lit(None)).cast(seq_type)
        order = F.struct(seq.alias("seq"), F.col("_commit_timestamp").alias("ts"), F.lit(idx).alias("source"),
                         F.col("_commit_version").cast("long").alias("version"), position.alias("position"))
        frames.append(rows.select(
            *[F.col(s.key[k]).cast(types[k]).alias(k) for k in t.primary_key],
            order.alias(partial_update.ORDER),
            retraction.alias(partial_update.DELETE),
            removal.alias(partial_update.REMOVE),
            *[(F.col(s.columns[c]) if c in s.columns else F.lit(None)).cast(types[c]).alias(c) for c in columns],
        ))
    return reduce(lambda a, b: a.unionByName(b), frames) if frames else None


def _source_events(t: WideTable, s: Source, cdf: DataFrame) -> tuple[DataFrame, Column, Column, Column]:
    """A source's rows as events: (rows, is-retraction, is-removal, position within a commit).

    A snapshot's Change Data Feed rows are inserts, update after-images and deletes (carrying the
    row's last image). A changelog's appended rows are the events themselves, each with its row kind;
    rows later deleted from the changelog (retention) are not events, and a row kind other than
    +I/-U/+U/-D fails the merge naming it.
    """
    from pyspark.sql import functions as F

    remove = F.lit(s.remove_row_on_delete)
    kind_field = s.row_kind_field
    if kind_field is None:
        delete = F.col("_change_type") == "delete"
        return (cdf.where(F.col("_change_type").isin(*ROW_TYPES)), delete, delete & remove,
                F.lit(None).cast("long"))
    kind = F.col(kind_field)
    key = F.to_json(F.struct(*[F.col(s.key[k]) for k in t.primary_key]))
    rows = cdf.where(F.col("_change_type") == "insert").where(guards.check(
        ~F.coalesce(kind.isin(*ADDS, *RETRACTIONS), F.lit(False)),
        f"Wide table {t.name}: changelog source {s.name} ({s.table}) has a row with key ", key,
        f" whose {kind_field} is ", F.coalesce(F.concat(F.lit("'"), kind, F.lit("'")), F.lit("null")),
        f"; row kinds are {[*ADDS, *RETRACTIONS]}."))
    position = (F.col(s.order_field) if s.order_field else F.lit(None)).cast("long")
    return rows, kind.isin(*RETRACTIONS), (kind == "-D") & remove, position


def _can_retract(t: WideTable, s: Source) -> bool:
    """Whether the source's retractions mean something: it removes rows, carries a sequence group,
    or (a changelog) carries a ``sum`` that subtracts its values."""
    return (s.remove_row_on_delete or any(g in s.columns for g in t.sequence_groups)
            or (s.is_changelog and any(t.aggregations.get(c) == "sum" for c in s.columns)))


def _refuse_deletes(t: WideTable, s: Source, inp: Input, rows: DataFrame, retraction: Column) -> None:
    src_key = [s.key[k] for k in t.primary_key]
    sample = [r.asDict() for r in rows.where(retraction).select(*src_key).limit(EXAMPLES).collect()]
    if sample:
        first = 0 if inp.from_version is None else inp.from_version + 1
        what = "retracted (-U/-D)" if s.is_changelog else "deleted"
        raise DataQualityError(
            f"Wide table {t.name}: source {s.name} {what} row(s) with key(s) {sample} in versions "
            f"{first}..{inp.to_version} of {inp.rel}. A partial update cannot apply a delete "
            f"by default. Set ignore_delete=True to drop deletes, remove_row_on_delete=True on the source "
            f"to delete the wide row, or put the source's fields in sequence_groups so a delete retracts "
            f"its group's fields. Nothing was written."
        )


def _ensure_wide(spark: SparkSession, t: WideTable, uri: str, wanted: list[str], types: dict[str, DataType],
                 md: dict[str, Any], exists: bool) -> None:
    """Create the wide table (CDF + deletion vectors, partitioned by ``partition_by``) unless it
    ``exists``, or add the columns this step brings."""
    from pyspark.sql.types import StructField, StructType

    with commit_metadata(spark, md):
        if not exists:
            columns = ", ".join(f"`{c}` {types[c].simpleString()}" for c in wanted)
            properties = ", ".join(f"'{prop}' = '{value}'" for prop, value in TABLE_PROPERTIES.items())
            partitioned = ""
            if t.partition_by:
                check_new_layout(StructType([StructField(c, types[c]) for c in wanted]), t.partition_by,
                                 f"Wide table {t.name}")
                partitioned = "PARTITIONED BY (" + ", ".join(f"`{c}`" for c in t.partition_by) + ") "
            retry_on_conflict(lambda: spark.sql(f"CREATE TABLE IF NOT EXISTS {delta_path(uri)} ({columns}) "
                                                f"USING delta {partitioned}TBLPROPERTIES ({properties})"))()
        existing = set(spark.read.format("delta").load(uri).columns)
        missing = [c for c in wanted if c not in existing]
        if missing:
            added = ", ".join(f"`{c}` {types[c].simpleString()}" for c in missing)
            retry_on_conflict(lambda: spark.sql(f"ALTER TABLE delta.`{uri}` ADD COLUMNS ({added})"))()


def _merge_full(spark: SparkSession, t: WideTable, uri: str, events: DataFrame | None, columns: list[str],
                types: dict[str, DataType], md: dict[str, Any], base: int,
                inserts_only: bool) -> dict[str, Any] | None:
    """Fold the events into the wide table as one commit made :func:`~spark_jobs.delta.lake.on_top_of`
    ``base``, the version whose merged source versions the events start from: two runs that read the
    same merged versions would otherwise both add the same events (a ``sum`` counted twice). On a
    partitioned table the MERGE matches only in the partitions of the changed keys' stored rows.
    ``inserts_only``: every event is an insert (whole snapshot versions read for the first time)."""
    from pyspark.sql import functions as F

    if events is None:
        return None
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in t.primary_key)

    @retry_on_conflict
    def _merge() -> None:  # rebuilt on a conflict: the fold must start from the rows stored now
        if one_row(spark.sql(f"DESCRIBE DETAIL {delta_path(uri)}").select("numFiles"))[0] == 0:
            # Nothing stored yet (the first run): every folded row is an insert, and a plain append
            # skips the MERGE's materialized source and its join against the target. The merges of a
            # wide table run one at a time (planning.py); a concurrent run's append is refused (on_top_of).
            rows = (partial_update.newest_values(t, events, columns)
                    if inserts_only and partial_update.plain_fold(t, columns)
                    else partial_update.merged_rows(t, events, None, columns, types))
            rows.drop(partial_update.REMOVE, partial_update.RESET).write.format("delta").mode("append").save(uri)
            return
        stored = spark.read.format("delta").load(uri)
        # computed once (checkpointed): the fold feeds the partition predicate and the MERGE
        rows = _folded_source(partial_update.merged_rows(t, events, stored, columns, types))
        update = {f"`{c}`": f"s.`{c}`" for c in columns}
        # a row a removal emptied and later events filled again keeps nothing of other groups' sources
        others = [c for c in t.merged_columns(t.full_sources) if c not in columns and c in stored.columns]
        where = on
        if t.partition_by:
            stored_in = rows.where(F.col(partial_update.PRIOR).isNotNull()).select(f"{partial_update.PRIOR}.*")
            where = pruned(on, stored_in, t.partition_by)
        reset = ([f"WHEN MATCHED AND s.{partial_update.RESET} THEN UPDATE SET "
                  + assignments({**update, **{f"`{c}`": "NULL" for c in others}})] if others else [])
        merge_into(spark, uri, rows, where,
                   f"WHEN MATCHED AND s.{partial_update.REMOVE} THEN DELETE",
                   *reset,
                   "WHEN MATCHED THEN UPDATE SET " + assignments(update),
                   "WHEN NOT MATCHED THEN INSERT "
                   + insert_values({f"`{c}`": f"s.`{c}`" for c in (*t.primary_key, *columns)}),
                   checkpointed=True, key=t.primary_key)

    with commit_metadata(spark, md), on_top_of(spark, base), guards.reported(DataQualityError):
        _merge()
    _require_own_merge(t, uri, base, md)
    return md


def _folded_source(rows: DataFrame) -> DataFrame:
    """The folded rows as the MERGE's source: computed once (a local checkpoint, so Delta does not copy
    them again) and, when few (at most :data:`BROADCAST_CELLS` values: a change run), broadcast, so the
    MERGE's joins stream the wide table instead of shuffling all of it to meet a few rows. Counting the
    checkpoint reads rows already computed; the estimate Spark has of them is a guess."""
    from pyspark.sql import functions as F

    rows = rows.localCheckpoint(eager=True)
    return F.broadcast(rows) if rows.count() * len(rows.columns) <= BROADCAST_CELLS else rows


def _require_own_merge(t: WideTable, uri: str, base: int, md: dict[str, Any]) -> None:
    """Fail with :class:`ConcurrentWriteError` when another run merged into the wide table since
    ``base`` and this run's fold did not commit (Delta refused or skipped it)."""
    newer = [e for e in history(uri, 20) if e["version"] > base and e["metadata"].get("merged")]
    if newer and not any(e["metadata"].get("run_id") == md["run_id"] for e in newer):
        other = newer[-1]
        raise ConcurrentWriteError(
            f"Wide table {t.name}: another run ({other['metadata'].get('run_id')!r}) merged version "
            f"{other['version']} while this run folded changes read against version {base}; nothing of this "
            "run's merge was committed. Retry after it finishes (a retry merges only what is left).")


def _merge_left(spark: SparkSession, wh: Warehouse, t: WideTable, s: Source, right: Input, wide_in: Input,
                types: dict[str, DataType], base_md: dict[str, Any]) -> dict[str, Any] | None:
    inp = reverse_index.LeftJoinInput(wide_in.uri, wide_in.from_version, wide_in.to_version,
                                      right.uri, right.from_version, right.to_version)
    present = spark.read.format("delta").load(wide_in.uri).columns
    missing = [c for c in s.on if c not in present]
    if missing:
        providers = [o.name for o in t.sources if set(o.columns) & set(missing)]
        raise ConfigError(f"Wide table {t.name}, left join {s.name}: its foreign key column(s) {missing} are not "
                          f"in the wide table yet; merge {providers} first (the planned task order does)")
    index = reverse_index.index_uri(wh, t, s)
    changes = reverse_index.fk_changes(spark, t, s, inp)
    if changes is not None:
        reverse_index.update_index(spark, index, t, s, changes, types)
        crashpoints.reached("widen.index_updated")
    rows = reverse_index.recompute(spark, t, s, inp, index, changes, types) if is_delta_table(index) else None
    if rows is None:
        return None
    md = {**base_md, "merged": [(right.rel, right.consumer, right.to_version),
                                (wide_in.rel, wide_in.consumer, wide_in.to_version)]}
    with commit_metadata(spark, md), guards.reported(DataQualityError):
        retry_on_conflict(lambda: reverse_index.merge_joined(spark, wide_in.uri, t, s, rows))()
    return md


def _stats(recent: list[dict[str, Any]], md: dict[str, Any] | None) -> dict[str, int]:
    """Rows read, inserted and updated by the commit made with metadata ``md`` (zeros when the step
    had nothing to merge or its MERGE changed nothing and so committed nothing)."""
    metrics: dict[str, Any] = {}
    if md is not None:
        merged = [list(m) for m in md["merged"]]
        metrics = next((e["operationMetrics"] for e in recent if e["metadata"].get("merged") == merged
                        and e["metadata"].get("run_id") == md["run_id"]), {})
    appended = metrics.get("numOutputRows", 0)  # a first run's plain append (WRITE) inserted them all
    return {"source_rows": int(metrics.get("numSourceRows", appended)),
            "inserted": int(metrics.get("numTargetRowsInserted", appended)),
            "updated": int(metrics.get("numTargetRowsUpdated", 0))}
