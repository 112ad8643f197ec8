"""DeltaCommitTrigger: an event trigger (for an ``AssetWatcher``) that fires when a Delta source has
commits the snapshot consuming it has not recorded yet.

Its state lives in the lake, never in the triggerer's memory, so a triggerer restart (or a move of
the trigger to another triggerer) neither loses a commit nor fires twice for one:

- *what the pipeline has carried*: the ``source_version`` and ``source_table_id`` the consuming
  snapshot's newest commit recorded (the snapshot job pins a Delta source to the version it reads and
  records it, with the id of the Delta table it read, in its commit's ``userMetadata``,
  :mod:`spark_jobs.jobs.snapshot`);
- *what has been fired for and not carried yet*: a claim, ``_system/watchers/<snapshot table>.json``
  in the warehouse (``{"source_version", "source_table_id", "fired_at"}``), written before the event
  is handed to Airflow.

A poll fires when the source's head is past the recorded version with commits that change rows (not
only OPTIMIZE, VACUUM, ...) and no claim is outstanding (a claim is outstanding while it names a
version of a table the snapshot has not recorded yet). It also fires, whatever the version numbers
say, when the source was **replaced** at its path (removed and written again, its versions starting
again at 0): the Delta table id there is another than the one recorded, or — for a version recorded
before table ids were — the head is older than the recorded version. The run that follows reads the
new table in full (:mod:`spark_jobs.sources.change_feed`); the event says ``source_replaced`` and the
trigger logs why it fired. The id is read from the source's log at every poll (one listing and the
first lines of its first commit, :func:`spark_jobs.lake_io.table_id`): the version
numbers alone cannot tell the new table's history from the old one's. So one run is in flight
at a time and a burst of commits during it is carried by the next run, which reads up to the head:
no queue of runs that each find nothing. A claim older than ``refire_after`` seconds that the
snapshot still has not caught up with (the run failed for good, or the triggerer stopped between the
claim and the event reaching Airflow) is fired again: a commit is never stranded, at the price of one
run that may find its work already done.

Reads go through :class:`airflow_reverse_etl.delta_log.TableLog` in a worker thread: one listing of
each log per poll and the newest commit files, no Spark. A storage
outage keeps it watching (logged, backing off up to ``MAX_BACKOFF_POLLS`` intervals); a problem
waiting cannot fix (access denied, a path that is not a Delta table) ends the trigger with that
error, naming the table — an event would start a run.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_reverse_etl.delta_log import TableLog
from airflow_reverse_etl.exceptions import ReverseEtlInfrastructureError
from airflow_reverse_etl.storage import reading_log
from airflow_reverse_etl.triggers.delta_version import MAX_BACKOFF_POLLS
from spark_jobs.contract import Warehouse, table_rel

#: How many of the snapshot's newest commits are looked at for its recorded source version
#: (maintenance commits — OPTIMIZE, VACUUM, column renames — record none and are skipped).
RECORD_LOOKBACK = 20
#: Source commits that change no row: a run for them alone would find nothing new.
MAINTENANCE = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END", "CHECKPOINT", "SET TBLPROPERTIES"})
#: Up to how many uncarried source commits are looked at for data changes; past it, a run is fired.
MAINTENANCE_LOOKBACK = 50


@dataclass(frozen=True)
class Recorded:
    """What the snapshot's newest recording commit read of the source: its ``version`` and the id of
    the Delta table it was (None: recorded before table ids were)."""

    version: int
    table_id: str | None

    def replaced_by(self, table_id: str | None, head: int) -> bool:
        """Whether the source is now another table than the one recorded: another id, or (ids not
        recorded) a head older than the version read."""
        if self.table_id is not None and table_id is not None:
            return self.table_id != table_id
        return head < self.version


def recorded_source(snapshot: TableLog) -> Recorded | None:
    """What the snapshot's newest recording commit read; None before its first."""
    for commit in snapshot.newest_commits(RECORD_LOOKBACK):
        recorded = commit["metadata"].get("source_version")
        if commit["metadata"].get("job") == "snapshot" and isinstance(recorded, int):
            return Recorded(recorded, commit["metadata"].get("source_table_id"))
    return None


def _maintenance_only(source: TableLog, uncarried: int) -> bool:
    """Whether the source's ``uncarried`` newest commits all change no row (OPTIMIZE, VACUUM, ...):
    the pipeline is not behind, whatever the version numbers say."""
    if uncarried > MAINTENANCE_LOOKBACK:
        return False
    return all(commit["operation"] in MAINTENANCE for commit in source.newest_commits(uncarried))


class DeltaCommitTrigger(BaseEventTrigger):
    """Fire when the Delta table ``source`` has versions the snapshot ``snapshot`` (a name, or a
    warehouse-relative table) of ``warehouse`` has not recorded yet.

    Each event's payload is ``{"source", "snapshot", "source_version", "recorded_version"}``: the
    source head seen and the version the snapshot had recorded (None: never), plus
    ``"source_replaced": True`` when the source is another table than the one recorded. The run it
    starts reads the source at its head, which is at least ``source_version``.
    """

    def __init__(self, source: str, snapshot: str, warehouse: str, poll_interval: float = 5.0,
                 refire_after: float = 900.0) -> None:
        super().__init__()
        self.source = source.rstrip("/")
        self.snapshot = snapshot
        self.warehouse = warehouse.rstrip("/")
        self.poll_interval = poll_interval
        self.refire_after = refire_after

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}", {
            "source": self.source, "snapshot": self.snapshot, "warehouse": self.warehouse,
            "poll_interval": self.poll_interval, "refire_after": self.refire_after,
        })

    @property
    def snapshot_uri(self) -> str:
        return Warehouse(self.warehouse).uri(table_rel(self.snapshot))

    @property
    def claim_uri(self) -> str:
        return Warehouse(self.warehouse).watcher_claim(table_rel(self.snapshot))

    def describe(self) -> str:
        return f"commits of {self.source} not yet recorded by {self.snapshot_uri}"

    async def run(self) -> AsyncIterator[TriggerEvent]:
        polls = failures = 0
        while True:
            polls += 1
            try:
                event = await asyncio.to_thread(self.poll)
                failures = 0
            except ReverseEtlInfrastructureError as exc:
                failures, event = failures + 1, None
                self.log.warning("Poll %d: %s; still watching %s", polls, exc, self.describe())
            if event is not None:
                self._log_firing(event)
                yield TriggerEvent(event)
            pause = self.poll_interval * min(2 ** max(failures - 1, 0), MAX_BACKOFF_POLLS)
            await asyncio.sleep(pause)

    def _log_firing(self, event: dict[str, Any]) -> None:
        if event.get("source_replaced"):
            self.log.warning("Source %s was replaced at its path: it is another Delta table than the one the snapshot "
                             "recorded (version %s), now at version %s; firing a run that reads the new table in full",
                             self.source, event["recorded_version"], event["source_version"])
        else:
            self.log.info("Source %s is at version %s, the snapshot recorded %s: firing", self.source,
                          event["source_version"], event["recorded_version"])

    def poll(self) -> dict[str, Any] | None:
        """One look at the lake: the event to fire (after claiming it), or None."""
        source = TableLog(self.source)  # one listing of each log per poll
        source_id = source.table_id()
        head = source.head_version()
        if head is None:
            return None
        recorded = recorded_source(TableLog(self.snapshot_uri))
        replaced = recorded is not None and recorded.replaced_by(source_id, head)
        if recorded is not None and not replaced and (
                head <= recorded.version or _maintenance_only(source, head - recorded.version)):
            return None
        claim = self._read_claim()
        if claim is not None and self._outstanding(claim, recorded, replaced, source_id):
            return None
        self._write_claim({"source_version": head, "source_table_id": source_id, "fired_at": time.time()})
        event = {"source": self.source, "snapshot": table_rel(self.snapshot), "source_version": head,
                 "recorded_version": None if recorded is None else recorded.version}
        return {**event, "source_replaced": True} if replaced else event

    def _outstanding(self, claim: dict[str, Any], recorded: Recorded | None, replaced: bool,
                     source_id: str | None) -> bool:
        """Whether a run fired for ``claim`` may still be carrying it: the claim is for the table at the
        source's path now (for a replaced source: fired for the replacement itself), the snapshot has
        not recorded its version of that table yet, and it is younger than ``refire_after``. A claim
        for the table the path held before can never be carried: it is not outstanding."""
        claimed = claim.get("source_table_id")
        for_this_table = claimed == source_id if replaced else claimed in (None, source_id)
        carried = not replaced and recorded is not None and recorded.version >= int(claim["source_version"])
        return for_this_table and not carried and time.time() - float(claim["fired_at"]) < self.refire_after

    def _read_claim(self) -> dict[str, Any] | None:
        import fsspec

        with reading_log(self.claim_uri):
            fs, path = fsspec.core.url_to_fs(self.claim_uri)
            fs.invalidate_cache(path.rsplit("/", 1)[0])
            if not fs.exists(path):
                return None
            with fs.open(path, "r") as handle:
                claim: dict[str, Any] = json.load(handle)
            return claim

    def _write_claim(self, claim: dict[str, Any]) -> None:
        """One whole-object write (a single PUT on an object store; a rename over the old file on a
        local disk), so a reader never sees half a claim."""
        import fsspec

        with reading_log(self.claim_uri):
            fs, path = fsspec.core.url_to_fs(self.claim_uri)
            fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            if "file" in fs.protocol:
                fs.pipe_file(f"{path}.tmp", json.dumps(claim).encode())
                fs.mv(f"{path}.tmp", path)
            else:
                fs.pipe_file(path, json.dumps(claim).encode())
