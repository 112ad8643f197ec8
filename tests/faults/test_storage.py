"""DeltaVersionTrigger and SnapshotSensor under storage faults, with real parts: a Delta table written
by the snapshot job, served from a real S3-compatible server (moto's) that is stopped and started
again while the trigger polls. An outage keeps the trigger waiting (logged, backing off) until the
version appears; a problem waiting cannot fix (a corrupt commit, a directory that is not a Delta
table) ends the wait at once, naming the table, and fails the sensor without retries."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_reverse_etl.delta_log import find_version
from airflow_reverse_etl.exceptions import ReverseEtlDataError, ReverseEtlInfrastructureError
from airflow_reverse_etl.sensors.snapshot import SnapshotSensor
from airflow_reverse_etl.triggers.delta_version import DeltaVersionTrigger
from tests_common.jobs import job, write_parquet
from tests_common.object_store import BUCKET

D = "2026-05-0{}T00:00:00+00:00"


def snap(spark, warehouse: str, src: str, day: int) -> None:
    write_parquet(spark, src, [(1, f"d{day}")], "id INT, v STRING")
    job(spark, "snapshot", warehouse, name="orders", primary_key=["id"], source={"format": "parquet", "path": src},
        logical_date=D.format(day), run_id=f"run-{day}")


def upload_log(local_table: str, remote_table: str, versions) -> None:
    import s3fs

    fs = s3fs.S3FileSystem()
    for version in versions:
        name = f"_delta_log/{version:020d}.json"
        fs.put_file(str(Path(local_table) / name), f"{remote_table.removeprefix('s3://')}/{name}")


def first_event(trigger):
    async def run():
        async for event in trigger.run():
            return event.payload
    return asyncio.run(run())


@pytest.mark.fault("storage fault", "storage outage while the trigger polls: waits, finds the version on recovery")
def test_a_storage_outage_keeps_the_trigger_waiting_until_the_version_appears(spark, warehouse, tmp_path,
                                                                              s3_server, capfd):
    src, local = str(tmp_path / "src"), f"{warehouse}/snapshots/orders"
    for day in (1, 2):
        snap(spark, warehouse, src, day)
    remote = f"s3://{BUCKET}/warehouse/snapshots/orders"
    upload_log(local, remote, [0])
    assert find_version(remote, D.format(1)) == {"version": 0, "logical_date": D.format(1)}

    s3_server.stop()
    with pytest.raises(ReverseEtlInfrastructureError, match=f"Storage unavailable while reading the Delta log of "
                                                            f"{remote}"):
        find_version(remote, D.format(2))

    def recover():
        time.sleep(3)  # several polls fail meanwhile
        s3_server.start()
        upload_log(local, remote, [1])

    recovering = threading.Thread(target=recover)
    recovering.start()
    trigger = DeltaVersionTrigger(uri=remote, logical_date=D.format(2), poll_interval=0.2, deadline=time.time() + 120)
    event = first_event(trigger)
    recovering.join()
    assert event == {"status": "found", "uri": remote, "version": 1, "logical_date": D.format(2)}
    log = capfd.readouterr().out  # Airflow logs to stdout
    assert f"Poll 1: Storage unavailable while reading the Delta log of {remote}" in log
    assert f"still waiting for Delta table {remote} to have a version for logical date {D.format(2)}" in log


@pytest.mark.fault("storage fault", "storage outage past the deadline: times out saying the storage was down")
def test_an_outage_past_the_deadline_times_out_saying_so(s3_server):
    remote = f"s3://{BUCKET}/warehouse/snapshots/orders"
    s3_server.stop()
    event = first_event(DeltaVersionTrigger(uri=remote, min_version=0, poll_interval=0.2, deadline=time.time() + 2))
    s3_server.start()
    assert event["status"] == "timeout"
    assert f"waiting for Delta table {remote} to have a version >= 0 (the storage was unavailable" in event["message"]


@pytest.mark.fault("storage fault", "corrupt Delta commit: ends the wait, fails the sensor without retries")
def test_a_corrupt_commit_ends_the_wait_and_fails_the_sensor_without_retries(spark, warehouse, tmp_path, s3_server):
    import s3fs

    src, local = str(tmp_path / "src"), f"{warehouse}/snapshots/orders"
    snap(spark, warehouse, src, 1)
    remote = f"s3://{BUCKET}/warehouse/snapshots/orders"
    upload_log(local, remote, [0])
    s3fs.S3FileSystem().pipe_file(f"{BUCKET}/warehouse/snapshots/orders/_delta_log/{1:020d}.json", b'{"commitInfo":')

    event = first_event(DeltaVersionTrigger(uri=remote, logical_date=D.format(2), poll_interval=0.2,
                                            deadline=time.time() + 60))
    assert event["status"] == "error" and event["category"] == "data"
    assert f"The Delta log of {remote} is corrupt: {1:020d}.json line 1 is not JSON" in event["message"]

    sensor = SnapshotSensor(task_id="wait", table="orders", logical_date=D.format(2),
                            warehouse=f"s3://{BUCKET}/warehouse")
    with pytest.raises(ReverseEtlDataError, match="is corrupt") as failure:
        sensor.execute_complete({}, event)
    assert isinstance(failure.value, AirflowFailException)
    with pytest.raises(ReverseEtlDataError, match="is corrupt"):  # poke mode says the same
        sensor.poke({})


@pytest.mark.fault("storage fault", "a directory of plain files (no Delta log): ends the wait as a config error")
def test_a_directory_of_plain_files_is_not_waited_for(spark, warehouse):
    plain = f"{warehouse}/snapshots/orders"
    write_parquet(spark, plain, [(1, "a")], "id INT, v STRING")  # parquet, not Delta: Spark leaves _SUCCESS
    event = first_event(DeltaVersionTrigger(uri=plain, min_version=0, poll_interval=0.2, deadline=time.time() + 60))
    assert event["status"] == "error" and event["category"] == "config"
    assert f"{plain} holds files written without Delta (_SUCCESS, no _delta_log)" in event["message"]


def snapshot_of(spark, warehouse: str, source: str, rows: list[tuple], day: int) -> dict:
    """The result of recording ``rows`` as table ``c`` for day ``day`` of D (failed ones too)."""
    from spark_jobs.entry import run

    write_parquet(spark, source, rows, "id INT, v STRING")
    return run(spark, {"job": "snapshot", "warehouse": warehouse, "name": "c", "primary_key": ["id"],
                       "source": {"format": "parquet", "path": source}, "logical_date": D.format(day),
                       "run_id": f"r{day}"})


@pytest.mark.fault("storage fault", "the newest commit file of a snapshot table cut short or emptied: the jobs "
                                    "(snapshot, diff, SCD2 history) stop with a data error naming it, not a "
                                    "retryable one")
@pytest.mark.parametrize("damage", ["cut", "emptied"])
def test_a_damaged_newest_commit_stops_the_jobs(spark, warehouse, tmp_path, damage):
    source = str(tmp_path / "source")
    uri = f"{warehouse}/snapshots/c"

    def snapshot(rows, day):
        return snapshot_of(spark, warehouse, source, rows, day)

    assert snapshot([(1, "a")], 1)["status"] == snapshot([(1, "b")], 2)["status"] == "success"
    newest = damage_newest_commit(uri, damage)
    from spark_jobs.entry import run

    diff = run(spark, {"job": "diff", "warehouse": warehouse, "table": "snapshots/c", "consumer": "crm"})
    scd2 = run(spark, {"job": "history", "warehouse": warehouse, "table": "snapshots/c", "run_id": "h"})
    for failed in (snapshot([(1, "c")], 3), diff, scd2):
        assert_damaged_log_error(failed.get("error") or {}, newest, damage)
    assert len(list(Path(uri, "_delta_log").glob("*.json"))) == 2  # nothing written on top of it


def damage_newest_commit(table_uri: str, damage: str, version: int | None = None) -> Path:
    """Cut the newest commit file of the Delta table at ``table_uri`` (or that of ``version``) in half,
    or empty it; the file."""
    commits = sorted(Path(table_uri, "_delta_log").glob("*.json"))
    target = commits[-1] if version is None else Path(table_uri, "_delta_log", f"{version:020d}.json")
    text = target.read_bytes()
    target.write_bytes(text[: len(text) // 2] if damage == "cut" else b"")
    return target


def assert_damaged_log_error(error: dict, damaged: Path, damage: str) -> None:
    """``error`` (a failed job's) is the data error of a damaged log naming the table (and the cut file)."""
    assert (error.get("type"), error.get("category"), error.get("retryable")) == \
        ("CorruptTableError", "data", False), error
    table = str(damaged.parent.parent)
    assert f"Delta log of {table}" in error["message"] and "Nothing was written or sent" in error["message"], error
    if damage == "cut":
        assert damaged.name in error["message"]


@pytest.mark.fault("storage fault", "the change set's commit file cut short or emptied before its sync: a data "
                                    "error naming it, nothing sent, the consumer not moved (emptied, it was "
                                    "read as no changes: the sync succeeded, sent nothing and committed)")
@pytest.mark.parametrize("damage", ["cut", "emptied"])
def test_a_damaged_change_set_is_not_synced(spark, warehouse, tmp_path, damage):
    import sqlite3

    from tests_common.pipeline import Pipeline

    crm = {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers"}
    p = Pipeline(spark, warehouse, tmp_path)
    first = [(1, "ann", "oslo"), (2, "bob", "rome")]
    p.sync(p.step(first), crm, mode="mirror")
    changes = p.step([(1, "ann", "bergen")])
    damaged = damage_newest_commit(f"{warehouse}/{changes['changes']}", damage)

    assert_damaged_log_error(p.sync_error(changes, crm, mode="mirror"), damaged, damage)
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        assert conn.execute("SELECT id, name, city FROM customers ORDER BY id").fetchall() == first
    assert p.committed() == 0


@pytest.mark.fault("storage fault", "a commit of a wide table's source emptied: the fold stops with a data error "
                                    "naming the table, the wide table as it was")
def test_a_damaged_source_commit_stops_the_fold(spark, warehouse):
    from tests_common.wide_lake import Lake

    wide = {"name": "totals", "primary_key": ["k"], "aggregations": {"amount": "sum"},
            "sources": [{"name": "sales", "columns": ["amount"]}]}
    lake = Lake(spark, warehouse)
    lake.record("sales", [(1, 10), (2, 20)], "k INT, amount INT", "k")
    lake.widen(wide)
    lake.record("sales", [(1, 15), (2, 20), (3, 30)], "k INT, amount INT", "k")
    lake.record("sales", [(1, 15), (3, 31)], "k INT, amount INT", "k")
    damaged = damage_newest_commit(f"{warehouse}/snapshots/sales", "emptied", version=1)

    assert_damaged_log_error(lake.widen_error(wide), damaged, "emptied")
    assert lake.wide("totals", "k", "amount") == [(1, 10), (2, 20)]


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs of the test's own (the suite runs as root, as CI does), unmounted afterwards."""
    import subprocess

    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def remount_read_only(disk: Path, spark) -> None:
    """Remount ``disk`` read-only, as an administrator would.

    The kernel refuses (EBUSY) while any file on it is open for writing, and the aborted Spark write of the
    full-disk step can leave its output stream to the JVM's cleaner. So collect garbage on both sides and try
    again for a while; if it still fails, name the processes that hold the disk open.
    """
    import gc
    import os
    import subprocess
    import time

    for _ in range(20):
        tried = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True, text=True)
        if tried.returncode == 0:
            return
        gc.collect()
        spark._jvm.System.gc()
        time.sleep(0.5)
    holders = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            holders += [f"pid {pid}: {os.readlink(f'/proc/{pid}/fd/{fd}')}" for fd in os.listdir(f"/proc/{pid}/fd")
                        if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(str(disk))]
        except OSError:
            continue
    raise AssertionError(f"cannot remount {disk} read-only: {tried.stderr.strip()}; open there: {holders}")


def fill(directory: Path) -> Path:
    """Fill the file system of ``directory`` to the last byte; the file that does it."""
    filler = directory / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * (1 << 20))
                out.flush()
        except OSError:
            pass
    return filler


@pytest.mark.fault("storage fault", "the warehouse's disk full, then mounted read-only: typed errors, the table "
                                    "as it was, and the same run succeeds once the disk is writable again")
def test_a_full_or_read_only_warehouse(spark, tmp_path, small_disk):
    import subprocess

    warehouse, source = str(small_disk / "warehouse"), str(tmp_path / "source")
    uri = f"{warehouse}/snapshots/c"

    def snapshot(rows, day):
        return snapshot_of(spark, warehouse, source, rows, day)

    def versions():
        return sorted(p.name for p in Path(uri, "_delta_log").glob("*.json"))

    rows = [(i, f"value-{i}") for i in range(50)]
    assert snapshot(rows, 1)["status"] == "success"
    recorded = versions()
    changed = [(i, f"changed-{i}") for i in range(50)]

    filler = fill(small_disk)
    full = snapshot(changed, 2)
    assert full["status"] == "failed", full
    assert (full["error"]["type"], full["error"]["category"], full["error"]["retryable"]) == \
        ("StorageFullError", "infrastructure", True), full["error"]
    assert "file system is full" in full["error"]["message"] and warehouse in full["error"]["message"]
    filler.unlink()
    assert versions() == recorded  # nothing committed
    assert snapshot(changed, 2)["version"] == 1  # the retry, with room again

    remount_read_only(small_disk, spark)
    try:
        read_only = snapshot(rows, 3)
        assert (read_only["error"]["type"], read_only["error"]["retryable"]) == ("ReadOnlyStorageError", False), \
            read_only
        assert "read-only" in read_only["error"]["message"]
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    assert snapshot(rows, 3)["version"] == 2
