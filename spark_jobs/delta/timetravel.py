"""Logical date <-> Delta version, restore-aware, and time travel on Delta sources.

Every commit the jobs make carries the Airflow logical date in its ``userMetadata`` (see
:func:`spark_jobs.delta.lake.commit_metadata`), so the version of a date is read from the commit history,
never from a side table. A restore to date D is itself a commit tagged D: from then on the versions
recorded for dates after D (before the restore) no longer describe the table's line of history, and
are forgotten, so those dates can be replayed in order. A snapshot that rebuilds the history forward
from a past date D (``rebuild`` in its metadata, :mod:`spark_jobs.jobs.rebuild`) starts a new line the same way.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable

from spark_jobs.contract import parse_logical_date
from spark_jobs.contract.layout import walk_recorded
from spark_jobs.errors import ConfigError
from spark_jobs.delta.lake import commit_info, history, is_delta_table, latest_version
from spark_jobs.delta.row_hash import read_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def recorded_versions(uri: str) -> dict[str, dict[str, Any]]:
    """logical date -> the history entry of the newest commit that recorded it, restores honoured."""
    return recorded_in(history(uri))


def recorded_in(entries: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """:func:`recorded_versions` of a history already read (newest first)."""
    recorded: dict[str, dict[str, Any]] = {}
    for date, _, entry in walk_recorded(entries):
        recorded.setdefault(date, entry)
    return recorded


def recorded_for(recorded: dict[str, dict[str, Any]], logical_date: str) -> dict[str, Any] | None:
    """The entry ``recorded`` holds for the instant ``logical_date``, however either is spelt."""
    wanted = parse_logical_date(logical_date)
    return next((e for d, e in recorded.items() if parse_logical_date(d) == wanted), None)


def version_for(uri: str, logical_date: str, as_of: bool = False) -> dict[str, Any]:
    """The history entry recorded for ``logical_date``; with ``as_of``, the newest one at or before it.

    Raises :class:`ConfigError` naming the dates that are recorded when there is none.
    """
    if not is_delta_table(uri):
        raise ConfigError(f"{uri} is not a Delta table")
    recorded = recorded_versions(uri)
    if not as_of:
        found = recorded_for(recorded, logical_date)
        if found is not None:
            return found
    else:
        wanted = parse_logical_date(logical_date)
        earlier = [(parse_logical_date(d), e["version"], e) for d, e in recorded.items()
                   if parse_logical_date(d) <= wanted]
        if earlier:
            return max(earlier, key=lambda item: (item[0], item[1]))[2]
    dates = sorted(recorded, key=parse_logical_date)
    span = f"recorded dates run from {dates[0]} to {dates[-1]}" if dates else "no commit carries a logical date"
    how = "at or before" if as_of else "for"
    raise ConfigError(f"{uri} has no version {how} logical date {logical_date}: {span}")


def read_as_of(spark: SparkSession, uri: str, logical_date: str) -> DataFrame:
    """The table as it was recorded for ``logical_date`` (the newest version at or before it)."""
    version = version_for(uri, logical_date, as_of=True)["version"]
    return read_table(spark, uri, version)


def pin_delta_source(source: dict[str, Any], logical_date: str | None) -> dict[str, Any]:
    """Resolve the exact version a Delta source is read at, so the job result names it.

    ``version`` is kept; ``timestamp`` becomes the newest version committed at or before it;
    ``as_of_logical_date`` means the version recorded at or before the run's logical date (tables
    whose commits carry logical dates) or, for other tables, committed at or before it — so a
    backfill of a past date sees the source as it was then. Otherwise the latest version.
    """
    if source.get("format") != "delta" or source.get("version") is not None:
        return source
    path = source.get("path")
    if not path or not is_delta_table(path):
        return source  # read_source explains what is wrong
    pinned = {k: v for k, v in source.items() if k not in ("timestamp", "as_of_logical_date")}
    if source.get("as_of_logical_date"):
        if not logical_date:
            raise ConfigError("as_of_logical_date needs the run's logical date in the spec")
        if recorded_versions(path):
            pinned["version"] = version_for(path, logical_date, as_of=True)["version"]
            return pinned
        cutoff = parse_logical_date(logical_date)
    elif source.get("timestamp"):
        cutoff = parse_logical_date(source["timestamp"])
    else:
        pinned["version"] = latest_version(path)
        return pinned
    entries = history(path)
    earlier = [e for e in entries if _commit_time(e) <= cutoff]
    if not earlier:
        first = entries[-1]["timestamp"]
        raise ConfigError(f"Delta source {path} has no version committed at or before {cutoff.isoformat()} "
                          f"(its first commit is at {first}); nothing to read as of that time")
    pinned["version"] = max(e["version"] for e in earlier)
    return pinned


def _commit_time(entry: dict[str, Any]) -> datetime:
    """A history entry's commit time; PySpark hands timestamps back as naive local time."""
    stamp: datetime = entry["timestamp"]
    return stamp.astimezone(timezone.utc)


def target_version(uri: str, version: int | None,
                   target_logical_date: str | None) -> dict[str, Any]:
    """The history entry a savepoint or restore points at: ``version`` or ``target_logical_date``
    (the spec guarantees exactly one)."""
    if not is_delta_table(uri):
        raise ConfigError(f"{uri} is not a Delta table")
    if version is not None:
        return commit_info(uri, version)
    return version_for(uri, str(target_logical_date))
