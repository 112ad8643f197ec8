"""History on real Spark + Delta: logical date lookups, restore then replay, SCD type-2 history,
savepoints and a VACUUM that keeps every protected version, OPTIMIZE with Z-ORDER."""

import contextlib
from datetime import datetime
from typing import Callable, Iterator

import pytest

from spark_jobs.state import consumers
from spark_jobs.errors import ConfigError
from spark_jobs.contract import Warehouse
from spark_jobs.delta.lake import history
from spark_jobs.state.lineage import read_lineage
from spark_jobs.jobs.maintenance import LISTING_CONF
from spark_jobs.delta.timetravel import read_as_of, recorded_versions, version_for
from tests_common.jobs import job, job_error, rows_of, write_parquet

SCHEMA = "id INT, v STRING"
D = "2026-04-0{}T00:00:00+00:00"


def snap_day(spark, wh, src, day, rows):
    write_parquet(spark, src, rows, SCHEMA)
    return job(spark, "snapshot", wh, name="dim", primary_key=["id"], source={"format": "parquet", "path": src},
               logical_date=D.format(day), run_id=f"run-{day}")


@contextlib.contextmanager
def job_group(spark, group: str) -> Iterator[Callable[[], int]]:
    """Run the block's Spark jobs in ``group``; yield a function giving the most tasks of any of their
    stages (read from Spark's status tracker)."""
    context = spark.sparkContext
    context.setJobGroup(group, group)

    def widest_stage() -> int:
        tracker = context.statusTracker()
        stages = [tracker.getStageInfo(stage) for job_id in tracker.getJobIdsForGroup(group)
                  for stage in tracker.getJobInfo(job_id).stageIds]
        return max(stage.numTasks for stage in stages if stage is not None)

    try:
        yield widest_stage
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)


def dim(spark, wh, version=None):
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return rows_of(reader.load(f"{wh}/snapshots/dim"))


def test_lookup_restore_and_replay(spark, warehouse, tmp_path):
    src, uri = str(tmp_path / "src"), f"{warehouse}/snapshots/dim"
    for day in (1, 2, 3):
        snap_day(spark, warehouse, src, day, [(1, f"d{day}")])
    assert version_for(uri, D.format(2))["version"] == 1
    assert version_for(uri, "2026-04-02T00:00:00Z")["version"] == 1  # same instant, other spelling
    assert rows_of(read_as_of(spark, uri, "2026-04-02T18:00:00+00:00")) == [(1, "d2")]
    with pytest.raises(ConfigError, match="no version at or before logical date 2026-03-01"):
        read_as_of(spark, uri, "2026-03-01T00:00:00+00:00")

    restored = job(spark, "restore", warehouse, table="dim", target_logical_date=D.format(1), run_id="fix")
    assert (restored["restored_version"], restored["version"]) == (0, 3)
    again = job(spark, "restore", warehouse, table="dim", target_logical_date=D.format(1), run_id="fix")
    assert again["reused"] and again["version"] == 3
    assert dim(spark, warehouse) == [(1, "d1")]
    assert sorted(recorded_versions(uri)) == [D.format(1)]  # days 2 and 3 are forgotten
    assert version_for(uri, D.format(1))["version"] == 3
    # the restore commit is the head: a diff up to it reads the key there (the restore records it)
    assert job(spark, "diff", warehouse, table="snapshots/dim", consumer="c", to_version=3)["to_version"] == 3

    replayed = snap_day(spark, warehouse, src, 2, [(1, "d2-fixed")])  # replay is no longer refused
    assert (replayed["version"], replayed["reused"]) == (4, False)
    assert version_for(uri, D.format(2))["version"] == 4
    row = read_lineage(spark, warehouse).where("job = 'restore'").first()
    assert ([i["version"] for i in row["inputs"]], [o["version"] for o in row["outputs"]]) == ([0], [3])

    error = job_error(spark, "restore", warehouse, table="dim", target_logical_date=D.format(3), run_id="x")
    assert "has no version for logical date 2026-04-03" in error["message"]


def test_scd2_history_over_four_versions(spark, warehouse, tmp_path):
    src = str(tmp_path / "src")
    snap_day(spark, warehouse, src, 1, [(1, "a"), (2, "b"), (3, "c")])
    snap_day(spark, warehouse, src, 2, [(1, "a"), (2, "B"), (3, "c"), (4, "d")])  # 2 updated, 4 new
    snap_day(spark, warehouse, src, 3, [(1, "a"), (2, "B"), (4, "d")])            # 3 deleted
    snap_day(spark, warehouse, src, 4, [(1, "A"), (2, "B"), (3, "c2"), (4, "d")])  # 1 updated, 3 back

    result = job(spark, "history", warehouse, table="snapshots/dim", logical_date=D.format(4), run_id="h")
    assert (result["table"], result["rows"], result["versions"]) == ("history/dim", 7, 4)
    assert [i["version"] for i in result["inputs"]] == [0, 1, 2, 3]

    d = [None] + [datetime.fromisoformat(D.format(i)).replace(tzinfo=None) for i in (1, 2, 3, 4)]
    expected = [
        (1, "a", d[1], d[4], False, 0),
        (1, "A", d[4], None, True, 3),
        (2, "b", d[1], d[2], False, 0),
        (2, "B", d[2], None, True, 1),
        (3, "c", d[1], d[3], False, 0),   # the hard delete on day 3 closes the interval
        (3, "c2", d[4], None, True, 3),   # and the key's return opens a new one
        (4, "d", d[2], None, True, 1),
    ]
    table = spark.read.format("delta").load(f"{warehouse}/history/dim")
    assert table.columns == ["id", "v", "valid_from", "valid_to", "is_current", "_version"]
    assert rows_of(table, "id", "valid_from") == expected


def test_vacuum_keeps_savepointed_and_unconsumed_versions(spark, warehouse, tmp_path):
    src, uri = str(tmp_path / "src"), f"{warehouse}/snapshots/dim"
    for day in (1, 2, 3, 4):  # every version rewrites the one row: each removes the previous file
        snap_day(spark, warehouse, src, day, [(1, f"d{day}")])
    point = job(spark, "savepoint", warehouse, table="dim", target_logical_date=D.format(3), run_id="sp")
    assert (point["version"], point["savepoint"]) == (2, "v2")
    consumers.commit(Warehouse(warehouse), "snapshots/dim", "crm", 3, "r")

    result = job(spark, "maintenance", warehouse, table="dim", vacuum=True, retain_hours=0)
    vacuumed = result["vacuumed"]
    assert (vacuumed["savepoints"], vacuumed["consumer_floor"], vacuumed["floor"]) == ([2], 3, 2)
    assert vacuumed["asked_hours"] == 0 and vacuumed["retain_hours"] == 1  # stretched back past v2
    for version, day in ((2, 3), (3, 4)):
        assert dim(spark, warehouse, version=version) == [(1, f"d{day}")]
    assert sorted(recorded_versions(uri)) == [D.format(i) for i in (1, 2, 3, 4)]

    # The same VACUUM on a table nothing protects removes what older versions need: the stretch matters.
    other = f"{warehouse}/wide/other"
    for i in range(3):
        spark.createDataFrame([(1, f"o{i}")], SCHEMA).write.format("delta").mode("overwrite").save(other)
    with job_group(spark, "vacuum-other") as widest_stage:
        plain = job(spark, "maintenance", warehouse, table="wide/other", vacuum=True, retain_hours=0)["vacuumed"]
    assert (plain["floor"], plain["retain_hours"]) == (None, 0) and plain["files_deleted"] >= 2
    # VACUUM lists files as wide as the session's shuffles (4), not in Delta's 10,000 partitions
    assert widest_stage() <= 8 and spark.conf.get(LISTING_CONF, None) is None  # and the setting restored
    with pytest.raises(Exception, match="FILE_NOT_EXIST|does not exist"):
        spark.read.format("delta").option("versionAsOf", 0).load(other).collect()
    assert rows_of(spark.read.format("delta").load(other)) == [(1, "o2")]


def test_optimize_zorder_compacts_without_changing_data_or_dates(spark, warehouse, tmp_path):
    path = f"{warehouse}/wide/events"
    for part in range(3):
        spark.createDataFrame([(part * 10 + i, f"x{i}") for i in range(10)], SCHEMA) \
            .repartition(2).write.format("delta").mode("append").save(path)
    before = rows_of(spark.read.format("delta").load(path))
    # vacuum defaults to on (one default for the operator and the job): this test is about OPTIMIZE
    result = job(spark, "maintenance", warehouse, table="wide/events", zorder_by=["id"], vacuum=False)
    assert result["optimized"]["files_removed"] >= 4 and result["optimized"]["files_added"] >= 1
    assert result["outputs"][0]["version"] == result["inputs"][0]["version"] + 1
    assert history(path, 1)[0]["operation"] == "OPTIMIZE"
    assert rows_of(spark.read.format("delta").load(path)) == before
    error = job_error(spark, "maintenance", warehouse, table="wide/events", zorder_by=["nope"])
    assert "zorder_by column(s) ['nope'] not found" in error["message"]
