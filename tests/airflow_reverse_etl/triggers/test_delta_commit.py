"""DeltaCommitTrigger against real Delta tables written with delta-rs, iterated the way the triggerer
iterates it (``async for`` over ``run()``, events collected while it keeps polling).

The consuming snapshot's commits carry the ``userMetadata`` the snapshot job writes
(``{"job": "snapshot", "source_version": N}``); the standalone test (tests/system/test_live_standalone.py)
runs the real jobs. Here: fire only for commits not recorded, once per outstanding claim, not again
after a restart (a new trigger instance with no memory), again after ``refire_after`` when the run
never recorded; a source replaced at its path (another table id, or a head older than what was
recorded) fires whatever its version numbers; an object-store source; a path that cannot be a table
ends the trigger naming it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_reverse_etl.delta_log import TableLog
from airflow_reverse_etl.exceptions import (
    ReverseEtlConfigError,
    ReverseEtlDataError,
    ReverseEtlInfrastructureError,
)
from airflow_reverse_etl.live import live_source
from airflow_reverse_etl.triggers.delta_commit import DeltaCommitTrigger, Recorded, recorded_source
from tests_common.object_store import BUCKET

POLL = 0.05


def commit_source(uri: str, rows: int = 3, storage_options: dict[str, str] | None = None) -> None:
    from deltalake import write_deltalake

    write_deltalake(uri, pa.table({"id": list(range(rows)), "v": ["x"] * rows}), mode="append",
                    configuration={"delta.enableChangeDataFeed": "true"}, storage_options=storage_options)


def record(snapshot_uri: str, source_version: int | None, job: str = "snapshot", table_id: str | None = None) -> None:
    """A commit of the consuming snapshot, with the metadata the snapshot job gives it (``table_id``:
    the source's Delta table id; None as the snapshots written before ids were recorded)."""
    from deltalake import CommitProperties, write_deltalake

    metadata: dict[str, Any] = {"job": job, "logical_date": "2026-05-01T00:00:00+00:00"}
    if source_version is not None:
        metadata["source_version"] = source_version
    if table_id is not None:
        metadata["source_table_id"] = table_id
    write_deltalake(snapshot_uri, pa.table({"id": [1]}), mode="append",
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": json.dumps(metadata)}))


def events_within(trigger: DeltaCommitTrigger, seconds: float, first: int | None = None) -> list[dict[str, Any]]:
    """The events ``run()`` yields in ``seconds`` of polling (it never ends by itself), or its
    ``first`` events as soon as they are there."""
    seen: list[dict[str, Any]] = []

    async def watch() -> None:
        async for event in trigger.run():
            seen.append(event.payload)
            if len(seen) == first:
                return

    async def bounded() -> None:
        try:
            await asyncio.wait_for(watch(), seconds)
        except TimeoutError:
            pass

    asyncio.run(bounded())
    return seen


@pytest.fixture
def lake(tmp_path: Path) -> dict[str, str]:
    warehouse = str(tmp_path / "warehouse")
    return {"source": str(tmp_path / "source"), "warehouse": warehouse,
            "snapshot": f"{warehouse}/snapshots/orders"}


def trigger_for(lake: dict[str, str], refire_after: float = 900.0) -> DeltaCommitTrigger:
    return DeltaCommitTrigger(source=lake["source"], snapshot="orders", warehouse=lake["warehouse"],
                              poll_interval=POLL, refire_after=refire_after)


def test_fires_once_per_uncarried_head_and_not_again_after_a_restart(lake):
    assert events_within(trigger_for(lake), 0.3) == []  # no source table yet: nothing to carry
    commit_source(lake["source"])
    events = events_within(trigger_for(lake), 0.4)
    assert events == [{"source": lake["source"], "snapshot": "snapshots/orders", "source_version": 0,
                       "recorded_version": None}]  # many polls, one event: the claim is outstanding
    commit_source(lake["source"])
    # a restarted triggerer (a new instance, no memory) while the run is in flight: no second event
    assert events_within(trigger_for(lake), 0.3) == []
    record(lake["snapshot"], 1)  # the run read up to the head, version 1: both commits carried
    assert events_within(trigger_for(lake), 0.3) == []
    commit_source(lake["source"])
    assert [e["source_version"] for e in events_within(trigger_for(lake), 0.3)] == [2]
    assert recorded_source(TableLog(lake["snapshot"])) == Recorded(1, None)


def test_a_commit_during_a_run_fires_once_that_run_records(lake):
    trigger = trigger_for(lake)  # one trigger throughout
    commit_source(lake["source"])
    record(lake["snapshot"], None, job="optimize")  # the snapshot exists, with nothing recorded yet
    assert len(events_within(trigger, 0.2)) == 1
    commit_source(lake["source"])  # while the run fired for version 0 runs
    assert events_within(trigger, 0.2) == []
    record(lake["snapshot"], 0)  # that run read version 0 only
    record(lake["snapshot"], None, job="optimize")  # a maintenance commit records no source version
    assert [e["source_version"] for e in events_within(trigger, 0.2)] == [1]
    record(lake["snapshot"], 1)
    commit_source(lake["source"])
    assert [e["source_version"] for e in events_within(trigger, 0.2)] == [2]


def source_id(uri: str) -> str:
    from deltalake import DeltaTable

    return str(DeltaTable(uri).metadata().id)


def replace_source(uri: str, rows: int) -> None:
    """Remove the source's directory and write a new table there: its versions start again at 0."""
    import shutil

    shutil.rmtree(uri)
    commit_source(uri, rows=rows)


@pytest.mark.parametrize("ids_recorded", [True, False], ids=["table-id-recorded", "recorded-before-table-ids"])
def test_a_source_replaced_at_its_path_fires_and_logs_why(lake, ids_recorded, capsys):
    """Issue 33 §3: a live source of several versions is removed and a smaller table written at the same
    path. Its head (0) is below the version the snapshot recorded: the watcher compared numbers only,
    fired nothing and the destination kept the old rows for good."""
    trigger = trigger_for(lake)  # one trigger throughout: the table it keeps open is the old one
    for _ in range(3):
        commit_source(lake["source"], rows=5)
    old_id = source_id(lake["source"])
    record(lake["snapshot"], 2, table_id=old_id if ids_recorded else None)
    assert events_within(trigger, 0.2) == []  # carried
    replace_source(lake["source"], rows=2)
    events = events_within(trigger, 0.3)
    assert events == [{"source": lake["source"], "snapshot": "snapshots/orders", "source_version": 0,
                       "recorded_version": 2, "source_replaced": True}]  # once: the claim is outstanding
    assert "was replaced at its path" in capsys.readouterr().out  # the triggerer's log (structlog)
    # the run it started read the new table in full and recorded it: nothing more to fire
    record(lake["snapshot"], 0, table_id=source_id(lake["source"]))
    assert events_within(trigger, 0.2) == []
    commit_source(lake["source"], rows=1)
    assert events_within(trigger, 0.3) == [{"source": lake["source"], "snapshot": "snapshots/orders",
                                            "source_version": 1, "recorded_version": 0}]


def test_a_replaced_source_whose_history_caught_up_fires_by_its_table_id(lake):
    """The new table at the path has as many versions as the old one had when recorded: equal numbers,
    another table. Only the table id tells (a snapshot that recorded none falls back to the numbers)."""
    trigger = trigger_for(lake)
    for _ in range(2):
        commit_source(lake["source"])
    record(lake["snapshot"], 1, table_id=source_id(lake["source"]))
    replace_source(lake["source"], rows=1)
    commit_source(lake["source"], rows=1)  # version 1 of the new table
    assert [(e["source_version"], e.get("source_replaced")) for e in events_within(trigger, 0.3)] == [(1, True)]


def test_maintenance_commits_of_the_source_start_no_run(lake):
    from deltalake import DeltaTable

    trigger = trigger_for(lake)
    for _ in range(3):
        commit_source(lake["source"], rows=1)
    record(lake["snapshot"], 2)
    DeltaTable(lake["source"]).optimize.compact()  # version 3: the same rows in one file
    DeltaTable(lake["source"]).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert events_within(trigger, 0.3) == []
    commit_source(lake["source"], rows=1)
    assert [e["source_version"] for e in events_within(trigger, 0.3)] == [DeltaTable(lake["source"]).version()]


def test_a_poll_lists_each_log_once(lake, monkeypatch):
    """A poll asks the source's log for its id, its head and (a maintenance commit on top) its newest
    commits, and the snapshot's for what it recorded: one LIST of each (on an object store each is a
    paid request, every poll interval). The local filesystem's own listing, counted as it runs."""
    from deltalake import DeltaTable
    from fsspec.implementations.local import LocalFileSystem

    for _ in range(2):
        commit_source(lake["source"], rows=1)
    record(lake["snapshot"], 0)
    DeltaTable(lake["source"]).optimize.compact()  # the head is maintenance: the poll reads its commits
    listed: list[str] = []
    ls = LocalFileSystem.ls

    def counted(fs: LocalFileSystem, path: str, *args: Any, **kwargs: Any) -> Any:
        listed.append(str(path))
        return ls(fs, path, *args, **kwargs)

    monkeypatch.setattr(LocalFileSystem, "ls", counted)
    event = trigger_for(lake).poll()
    assert event is not None and event["source_version"] == 2 and event["recorded_version"] == 0
    logs = [path for path in listed if path.endswith("_delta_log")]
    assert sorted(logs) == sorted([f"{lake['source']}/_delta_log", f"{lake['snapshot']}/_delta_log"]), listed


def test_a_claim_never_recorded_is_fired_again_after_refire_after(lake):
    commit_source(lake["source"])
    assert len(events_within(trigger_for(lake, refire_after=0.5), 0.2)) == 1
    assert events_within(trigger_for(lake, refire_after=0.5), 0.1) == []
    assert len(events_within(trigger_for(lake, refire_after=0.5), 0.6)) == 1  # the run failed for good


def test_a_path_that_cannot_be_a_table_ends_the_trigger_naming_it(lake):
    Path(lake["source"]).write_text("not a table")
    with pytest.raises(ReverseEtlConfigError, match=f"{lake['source']} is not a Delta table"):
        events_within(trigger_for(lake), 1)


def test_a_corrupt_source_commit_ends_the_trigger_naming_the_table(lake):
    trigger = trigger_for(lake)
    commit_source(lake["source"])
    assert len(events_within(trigger, 0.2)) == 1
    Path(lake["source"], "_delta_log", f"{1:020d}.json").write_text('{"commitInfo":')  # a truncated commit
    with pytest.raises(ReverseEtlDataError, match=f"The Delta log of {lake['source']} is corrupt: "
                                                  f"{1:020d}.json line 1 is not JSON"):
        events_within(trigger, 1)


def test_an_object_store_source(lake, s3):
    from spark_jobs.lake_io import storage_options

    source = "s3a://lake/raw/orders"  # Hadoop's spelling, as the Spark jobs name it
    commit_source("s3://lake/raw/orders", storage_options={**storage_options(), "AWS_S3_ALLOW_UNSAFE_RENAME": "true"})
    trigger = DeltaCommitTrigger(source=source, snapshot="orders", warehouse="s3a://lake/warehouse",
                                 poll_interval=POLL)
    assert [e["source_version"] for e in events_within(trigger, 1.0)] == [0]
    assert s3.get_object(Bucket="lake", Key="warehouse/_system/watchers/snapshots/orders.json")


def test_a_storage_outage_keeps_it_watching(lake, s3_server):
    """The object store goes down while the trigger polls: it keeps watching (logged, backing off),
    and fires once the store is back."""
    from spark_jobs.lake_io import storage_options

    options = {**storage_options(), "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    trigger = DeltaCommitTrigger(source=f"s3://{BUCKET}/raw/orders", snapshot="orders",
                                 warehouse=f"s3://{BUCKET}/warehouse", poll_interval=POLL)
    s3_server.stop()
    with pytest.raises(ReverseEtlInfrastructureError, match=f"Storage unavailable while reading the Delta log of "
                                                            f"s3://{BUCKET}/raw/orders"):
        trigger.poll()
    assert events_within(trigger, 1.0) == []  # the same in run(): no event, no error, still watching
    s3_server.start()
    commit_source(f"s3://{BUCKET}/raw/orders", storage_options=options)
    assert [e["source_version"] for e in events_within(trigger, 30, first=1)] == [0]


def test_live_source_builds_a_watched_asset(lake):
    asset = live_source(lake["source"], "orders", warehouse=lake["warehouse"], poll_interval=2)
    assert asset.name == "reverse-etl-live/snapshots/orders"
    [watcher] = asset.watchers
    assert isinstance(watcher.trigger, DeltaCommitTrigger)
    assert watcher.trigger.serialize()[1] == {"source": lake["source"], "snapshot": "orders",
                                              "warehouse": lake["warehouse"], "poll_interval": 2,
                                              "refire_after": 900.0}
