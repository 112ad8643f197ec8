"""The Change Data Feed fast path of the snapshot job: a Delta source with CDF is applied from its
changes, and that must give exactly the table and the diff a full extract gives."""

import pytest

from tests_common.jobs import job, job_error, rows_of

SCHEMA = "id INT, name STRING, score DOUBLE"
DAY_0 = [(i, f"n{i}", float(i)) for i in range(1, 11)]


def make_source(spark, path: str, cdf: bool = True) -> None:
    (spark.createDataFrame(DAY_0, SCHEMA).coalesce(1).write.format("delta")
     .option("delta.enableChangeDataFeed", str(cdf).lower()).save(path))


def sql(spark, statement: str, path: str) -> None:
    spark.sql(statement.replace("SRC", f"delta.`{path}`"))


# Each day is a list of statements, each its own source commit: updates, inserts, deletes, a key
# inserted then deleted, an update reverted, a key updated twice, a deleted key coming back.
DAYS = [
    ["UPDATE SRC SET score = score + 100 WHERE id IN (1, 2)",
     "INSERT INTO SRC VALUES (11, 'n11', 11.0), (12, 'n12', 12.0)",
     "DELETE FROM SRC WHERE id = 3"],
    ["INSERT INTO SRC VALUES (13, 'n13', 13.0)",
     "DELETE FROM SRC WHERE id = 13",
     "UPDATE SRC SET name = 'tmp' WHERE id = 4",
     "UPDATE SRC SET name = 'n4' WHERE id = 4",
     "UPDATE SRC SET score = NULL WHERE id = 5",
     "UPDATE SRC SET score = 55.0 WHERE id = 5",
     "INSERT INTO SRC VALUES (3, 'back', 3.5)"],
    [],  # no source change at all
    ["DELETE FROM SRC WHERE id > 8", "UPDATE SRC SET name = NULL WHERE id = 6"],
]


def snapshot(spark, warehouse, name, source, day, **extra):
    return job(spark, "snapshot", warehouse, name=name, primary_key=["id"], source=source,
               logical_date=f"2026-01-0{day + 1}", run_id=f"r{day}", **extra)


def delivered_diff(spark, warehouse, name):
    """The consumer's change set since its last one, which it then commits (as a sync would): each
    day's diff reads that day's changes from the snapshot table's own Change Data Feed."""
    from spark_jobs.contract import Warehouse
    from spark_jobs.state import consumers

    result = job(spark, "diff", warehouse, table=f"snapshots/{name}", consumer="c")
    frame = spark.read.format("delta").load(result["changes_uri"]).drop("_commit_timestamp", "_commit_version")
    consumers.commit(Warehouse(warehouse), f"snapshots/{name}", "c", result["to_version"], "test")
    return result["counts"], sorted(map(tuple, frame.collect()), key=lambda r: (r[0], r[-1]))


def net_change(before: dict[int, tuple], after: dict[int, tuple]) -> tuple[dict[str, int], list[tuple]]:
    """The plain-Python model of a day's diff (and of what a full extract merges): per key, its net
    change from one day's rows to the next's."""
    rows, counts = [], {"insert": 0, "update": 0, "delete": 0}
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        kind = "insert" if old is None else "delete" if new is None else "update"
        counts[kind] += 1
        images = {"insert": [(new, "insert")], "delete": [(old, "delete")],
                  "update": [(new, "update_postimage"), (old, "update_preimage")]}[kind]
        rows += [(*image, change) for image, change in images]
    return counts, sorted(rows, key=lambda r: (r[0], r[-1]))


def by_key(spark, path: str) -> dict[int, tuple]:
    return {row[0]: row for row in rows_of(spark.read.format("delta").load(path))}


def test_fast_path_gives_the_same_table_and_diff_as_the_full_path(spark, warehouse, tmp_path):
    """Each day's snapshot through the Change Data Feed, its table and its consumer's diff (read from
    the snapshot table's own feed: the consumer commits each day) are checked against the model of a
    full extract (:func:`net_change` of the source's rows from one day to the next): what the full path
    computes, without a second snapshot and diff per day, each a Spark job. The full path itself,
    ``cdf: False`` on a source with a Change Data Feed, runs on the first and the last day and gives the
    same table."""
    src = str(tmp_path / "source")
    make_source(spark, src)
    fast_source = {"format": "delta", "path": src}  # CDF found on the source
    full_source = {"format": "delta", "path": src, "cdf": False}
    assert snapshot(spark, warehouse, "fast", fast_source, 0)["read"] == "full_extract"
    assert snapshot(spark, warehouse, "full", full_source, 0)["read"] == "full_extract"
    delivered_diff(spark, warehouse, "fast")  # the consumer's first change set: version 0 as inserts

    before = first = by_key(spark, src)
    for day, statements in enumerate(DAYS, start=1):
        for statement in statements:
            sql(spark, statement, src)
        after = by_key(spark, src)
        counts, changes = net_change(before, after)
        fast = snapshot(spark, warehouse, "fast", fast_source, day)
        assert fast["read"] == "change_data_feed" and fast["version"] == day  # one commit per run, also with no change
        assert (fast["rows"], fast["inserted"], fast["updated"], fast["deleted"]) == \
            (len(after), counts["insert"], counts["update"], counts["delete"]), (day, fast)
        assert by_key(spark, f"{warehouse}/snapshots/fast") == after, day
        assert delivered_diff(spark, warehouse, "fast") == (counts, changes), day
        before = after

    full = snapshot(spark, warehouse, "full", full_source, len(DAYS))
    counts, _ = net_change(first, before)
    assert (full["read"], full["version"], full["inserted"], full["updated"], full["deleted"]) == \
        ("full_extract", 1, counts["insert"], counts["update"], counts["delete"]), full
    assert by_key(spark, f"{warehouse}/snapshots/full") == by_key(spark, f"{warehouse}/snapshots/fast")

    entry = spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/snapshots/fast` LIMIT 1").first()
    assert '"source_version": ' in entry["userMetadata"] and '"run_id": "r4"' in entry["userMetadata"]


def test_fast_path_rerun_is_idempotent(spark, warehouse, tmp_path):
    src = str(tmp_path / "source")
    make_source(spark, src)
    source = {"format": "delta", "path": src, "cdf": True}
    snapshot(spark, warehouse, "s", source, 0)
    sql(spark, "UPDATE SRC SET score = -1 WHERE id = 1", src)
    first = snapshot(spark, warehouse, "s", source, 1)
    sql(spark, "UPDATE SRC SET score = -2 WHERE id = 1", src)
    again = snapshot(spark, warehouse, "s", source, 1)
    assert again["reused"] and again["version"] == first["version"] == 1
    assert (first["updated"], first["rows"]) == (1, 10)


def test_a_z_ordered_table_stays_on_the_fast_path(spark, warehouse, tmp_path):
    """Z-ordering the snapshot table by its key (the maintenance job's OPTIMIZE, docs/concepts/snapshots.md)
    changes no row: the next run still reads the source's Change Data Feed from the version recorded
    before it, and commits on top of the OPTIMIZE."""
    src = str(tmp_path / "source")
    make_source(spark, src)
    source = {"format": "delta", "path": src}
    snapshot(spark, warehouse, "s", source, 0)
    job(spark, "maintenance", warehouse, table="snapshots/s", zorder_by=["id"], vacuum=False)
    sql(spark, "UPDATE SRC SET score = -1 WHERE id = 1", src)
    after = snapshot(spark, warehouse, "s", source, 1)
    assert (after["read"], after["version"], after["updated"], after["rows"]) == ("change_data_feed", 2, 1, 10)
    assert by_key(spark, f"{warehouse}/snapshots/s") == by_key(spark, src)


@pytest.mark.parametrize("statement, message", [
    ("INSERT INTO SRC VALUES (1, 'again', 0.0)", "duplicate primary key ['id']: {'id': 1} x2"),
    ("INSERT INTO SRC VALUES (NULL, 'nokey', 0.0)", "have a null primary key"),
])
def test_a_change_that_breaks_the_key_fails_and_writes_nothing(spark, warehouse, tmp_path, statement, message):
    src = str(tmp_path / "source")
    make_source(spark, src)
    source = {"format": "delta", "path": src}
    snapshot(spark, warehouse, "s", source, 0)
    sql(spark, statement, src)
    error = job_error(spark, "snapshot", warehouse, name="s", primary_key=["id"], source=source,
                      logical_date="2026-01-02", run_id="r1")
    assert error["type"] == "DataQualityError" and message in error["message"], error
    assert spark.sql(f"DESCRIBE HISTORY delta.`{warehouse}/snapshots/s`").count() == 1


def test_cdf_requested_on_a_source_without_it_is_refused(spark, warehouse, tmp_path):
    src = str(tmp_path / "source")
    make_source(spark, src, cdf=False)
    source = {"format": "delta", "path": src, "cdf": True}
    snapshot(spark, warehouse, "s", source, 0)
    error = job_error(spark, "snapshot", warehouse, name="s", primary_key=["id"], source=source,
                      logical_date="2026-01-02", run_id="r1")
    assert error["type"] == "ConfigError" and "has no Change Data Feed" in error["message"]
    # without the explicit flag the full extract is read
    assert snapshot(spark, warehouse, "s", {"format": "delta", "path": src}, 1)["read"] == "full_extract"


def test_a_schema_change_takes_the_full_path_and_its_drift_rules(spark, warehouse, tmp_path):
    src = str(tmp_path / "source")
    make_source(spark, src)
    source = {"format": "delta", "path": src}
    snapshot(spark, warehouse, "s", source, 0)
    sql(spark, "ALTER TABLE SRC ADD COLUMNS (tier STRING)", src)
    error = job_error(spark, "snapshot", warehouse, name="s", primary_key=["id"], source=source,
                      logical_date="2026-01-02", run_id="r1")
    assert error["type"] == "SchemaDriftError" and "new column(s) ['tier']" in error["message"]
    evolved = snapshot(spark, warehouse, "s", source, 1, allow_schema_evolution=True)
    assert evolved["read"] == "full_extract"
    sql(spark, "UPDATE SRC SET tier = 'gold' WHERE id = 2", src)
    assert snapshot(spark, warehouse, "s", source, 2)["read"] == "change_data_feed"
    assert rows_of(spark.read.format("delta").load(f"{warehouse}/snapshots/s")) == \
        rows_of(spark.read.format("delta").load(src).select("id", "name", "score", "tier"))


def sqlite_rows(database: str, table: str) -> list[tuple]:
    import sqlite3

    with sqlite3.connect(database) as conn:
        return sorted(conn.execute(f"SELECT id, name, score FROM {table}").fetchall())


def test_a_source_replaced_at_its_path_is_read_in_full_and_synced(spark, warehouse, tmp_path):
    """Issue 33 §3 at job level: the source directory is removed and another table written there, whose
    history has as many versions as the one recorded. Its versions are not the old table's: the Change
    Data Feed path took version 2 of the new table for version 2 of the old one, found nothing new, and
    the destination kept the old rows for good. The new table is read in full, the snapshot and its result
    say it replaced the old one, and a mirror sync makes the destination equal to it — the mass-delete
    guard still standing between a much smaller replacement and the destination."""
    import shutil

    from spark_jobs.contract import change_set_fields

    src, db = str(tmp_path / "source"), str(tmp_path / "crm.db")
    source = {"format": "delta", "path": src}

    def sync(day: int, run=job, **options):
        changes = job(spark, "diff", warehouse, table="snapshots/live", consumer="crm")
        return run(spark, "sync", warehouse, **change_set_fields(changes), mode="mirror", run_id=f"sync-{day}",
                   destination={"type": "sqlite", "database": db, "table": "customers"}, **options)

    def table_id() -> str:
        return spark.sql(f"DESCRIBE DETAIL delta.`{src}`").first()["id"]

    make_source(spark, src)  # version 0
    for statement in ("UPDATE SRC SET score = 0.5 WHERE id = 1", "DELETE FROM SRC WHERE id = 10"):  # 1, 2
        sql(spark, statement, src)
    snapshot(spark, warehouse, "live", source, 0)
    sync(0)
    old_id = table_id()

    shutil.rmtree(src)  # replaced: a new table of three versions, 0..2, at the same path
    replacement = [(i, f"new{i}", float(i * 10)) for i in range(3, 10)]
    (spark.createDataFrame(replacement[:3], SCHEMA).coalesce(1).write.format("delta")
     .option("delta.enableChangeDataFeed", "true").save(src))
    for rows in (replacement[3:5], replacement[5:]):
        spark.createDataFrame(rows, SCHEMA).coalesce(1).write.format("delta").mode("append").save(src)
    new_id = table_id()
    assert new_id != old_id

    result = snapshot(spark, warehouse, "live", source, 1)
    assert (result["read"], result.get("source_replaced")) == ("full_extract", {"table_id": old_id, "version": 2})
    assert rows_of(spark.read.format("delta").load(f"{warehouse}/snapshots/live")) == sorted(replacement)
    sync(1)
    assert sqlite_rows(db, "customers") == sorted(replacement)

    # the case: a much smaller table at the path; the guard refuses to empty the destination
    shutil.rmtree(src)
    smaller = [(42, "only", 1.0)]
    spark.createDataFrame(smaller, SCHEMA).write.format("delta").option("delta.enableChangeDataFeed", "true").save(src)
    assert snapshot(spark, warehouse, "live", source, 2)["source_replaced"] == {"table_id": new_id, "version": 2}
    refused = sync(2, run=job_error)
    assert refused["type"] == "DestinationError" and "allow_mass_delete" in refused["message"], refused
    assert sqlite_rows(db, "customers") == sorted(replacement)  # nothing deleted
    sync(2, allow_mass_delete=True)
    assert sqlite_rows(db, "customers") == smaller
