"""Rebuild forward: record a logical date older than the newest recorded one, keeping history in order.

A snapshot table's versions follow logical dates, so a past date cannot simply be appended. With
``on_past_date="rebuild"`` the snapshot job rebuilds the table's line of history from that date on:

1. :func:`start` restores the table to the version of the newest recorded date before D (or empties
   it when D comes before every recorded date) in a commit that carries no logical date, so the
   Change Data Feed of D's own commit is the change from the date before;
2. the snapshot job records D as usual (one MERGE of D's extract), its commit marked ``rebuild``
   with the replay plan ``[[date, old version], ...]`` of the later dates. From that commit on the
   line of history restarts at D: the older commits of later dates are hidden
   (:func:`spark_jobs.delta.timetravel.walk_recorded`);
3. :func:`finish` replays each later date from its own recorded version, by time travel, as a new
   commit tagged with that date (``replayed_from``: the old version), oldest first, and moves every
   consumer whose committed version was one of the replaced ones to the new version of the same
   logical date. A consumer's position thus keeps meaning "delivered up to date X": its next diff
   sends only what changed after X (nothing for a re-run of an older date); positions at dates
   before D are untouched and stay valid.

Each step is safe to repeat: a retry of a run that died midway finds D recorded (with its plan) and
replays only the dates not replayed yet; consumers already moved are not moved again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spark_jobs.state import consumers
from spark_jobs.contract import SnapshotSpec, parse_logical_date
from spark_jobs.delta.extract_merge import merge_changes
from spark_jobs.delta.lake import commit_metadata, history, latest_version, on_top_of
from spark_jobs.delta.renames import to_head_names
from spark_jobs.delta.timetravel import recorded_for, recorded_versions
from spark_jobs.delta.row_hash import read_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def start(spark: SparkSession, uri: str, recorded: dict[str, dict[str, Any]], spec: SnapshotSpec) -> dict[str, Any]:
    """Restore the table to the date before ``spec.logical_date``; return the plan D's commit carries."""
    when = parse_logical_date(str(spec.logical_date))
    later = sorted(((d, e["version"]) for d, e in recorded.items() if parse_logical_date(d) > when),
                   key=lambda item: parse_logical_date(item[0]))
    earlier = [(parse_logical_date(d), e["version"]) for d, e in recorded.items() if parse_logical_date(d) < when]
    base = max(earlier)[1] if earlier else None
    with commit_metadata(spark, {"job": "rebuild_base", "rebuild_of": spec.logical_date, "run_id": spec.run_id,
                                 "restored_version": base}):
        if base is None:
            spark.sql(f"DELETE FROM delta.`{uri}`")
        else:
            spark.sql(f"RESTORE TABLE delta.`{uri}` TO VERSION AS OF {int(base)}")
    return {"base_version": base, "replay": [[d, v] for d, v in later]}


def finish(spark: SparkSession, spec: SnapshotSpec, uri: str, entry: dict[str, Any]) -> dict[str, int]:
    """Replay the later dates of the plan in ``entry`` (D's commit) and move the consumers; return
    {date: new version} of the replayed dates."""
    plan = [(str(d), int(v)) for d, v in entry["metadata"]["rebuild"]["replay"]]
    key = list(entry["metadata"]["primary_key"])
    for date, old_version in plan:
        if recorded_for(recorded_versions(uri), date) is None:
            _replay(spark, uri, key, date, old_version, spec.run_id)
    line = recorded_versions(uri)
    replayed = {date: found["version"] for date, _ in plan if (found := recorded_for(line, date)) is not None}
    _move_consumers(spec, {old: replayed[date] for date, old in plan})
    return replayed


def _replay(spark: SparkSession, uri: str, key: list[str], date: str, old_version: int, run_id: str | None) -> None:
    """Record ``date`` again with the content it had at ``old_version`` (one MERGE, one commit), under
    the head's column names: a column renamed since (:mod:`spark_jobs.delta.renames`) keeps its values."""
    entries = history(uri)
    df = to_head_names(read_table(spark, uri, old_version), entries, old_version)
    old = next(e for e in entries if e["version"] == old_version)["metadata"]
    metadata = {"job": "snapshot", "logical_date": date, "run_id": run_id, "primary_key": key,
                "source": {"replayed_from": old_version}, "replayed_from": old_version, "rows": old.get("rows")}
    base = latest_version(uri)  # the replay lands right on top of the line it extends
    with commit_metadata(spark, metadata), on_top_of(spark, base):
        merge_changes(spark, uri, df, key, [], metadata, base)


def _move_consumers(spec: SnapshotSpec, moved: dict[int, int]) -> None:
    """Consumers committed at a replaced version now sit at the new version of the same date."""
    current = consumers.positions(spec.lake, lambda table, _consumer: table == spec.rel)
    moves = {pair: moved[pos.version] for pair, pos in current.items() if pos.version in moved}
    if moves:
        consumers.commit_all(spec.lake, moves, spec.run_id)
