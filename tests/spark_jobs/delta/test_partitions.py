"""Partitioned snapshots (spark_jobs.delta.partitions): a change confined to one partition rewrites only that
partition's files, on the full-extract path and on the Change Data Feed fast path alike — counted
from the add/remove actions the commit wrote to the Delta log."""

import datetime as dt

from tests_common.delta_commits import touched
from tests_common.jobs import job, job_error, rows_of

REGIONS = ("eu", "us", "o'hare")  # a quote, to be escaped in the MERGE's partition predicate


def snapshot(spark, warehouse, name, source, day):
    return job(spark, "snapshot", warehouse, name=name, primary_key=["id"], source=source, partition_by=["region"],
               logical_date=f"2026-02-0{day + 1}T00:00:00+00:00", run_id=f"{name}-{day}")


def test_a_change_in_one_partition_rewrites_only_its_files(spark, warehouse, tmp_path):
    src = str(tmp_path / "source")
    rows = [(i, f"n{i}", REGIONS[i % 3]) for i in range(30)]
    (spark.createDataFrame(rows, "id INT, name STRING, region STRING").write.format("delta")
     .option("delta.enableChangeDataFeed", "true").save(src))
    sources = {"full": {"format": "delta", "path": src, "cdf": False}, "fast": {"format": "delta", "path": src}}
    for name, source in sources.items():
        snapshot(spark, warehouse, name, source, 0)
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{warehouse}/snapshots/{name}`").first()
        assert detail["partitionColumns"] == ["region"]

    def check(day, partitions):
        for name, source in sources.items():
            result = snapshot(spark, warehouse, name, source, day)
            assert result["read"] == ("full_extract" if name == "full" else "change_data_feed")
            uri = f"{warehouse}/snapshots/{name}"
            regions, files = touched(uri, result["version"])
            assert files and regions == partitions, (name, day, regions)
            assert rows_of(spark.read.format("delta").load(uri)) == rows_of(spark.read.format("delta").load(src))

    # an update, a delete and an insert, all in eu
    spark.sql(f"UPDATE delta.`{src}` SET name = 'changed' WHERE id = 0")
    spark.sql(f"DELETE FROM delta.`{src}` WHERE id = 3")
    spark.sql(f"INSERT INTO delta.`{src}` VALUES (100, 'new', 'eu')")
    check(1, {"eu"})
    # a row moving from o'hare to us is rewritten in both, and nowhere else
    spark.sql(f"UPDATE delta.`{src}` SET region = 'us' WHERE id = 2")
    check(2, {"o'hare", "us"})

    error = job_error(spark, "snapshot", warehouse, name="full", primary_key=["id"], source=sources["full"],
                      partition_by=["name"], logical_date="2026-02-09T00:00:00+00:00", run_id="other")
    assert "the table is partitioned by ['region'], the spec says partition_by=['name']" in error["message"]


def test_the_partition_predicate_is_exact_for_every_literal_type(spark):
    """The predicate a MERGE's ON clause carries names each touched partition by literals of the
    partition column's exact type (the key list's literals, spark_jobs.delta.literals): every type a
    table may be partitioned by, its extreme values and a null partition included."""
    from decimal import Decimal

    from spark_jobs.delta.partitions import touched_predicate

    columns = {"t": ("TINYINT", [-128, 127]), "s": ("SMALLINT", [-32768, 32767]), "i": ("INT", [-2**31, 2**31 - 1]),
               "b": ("BIGINT", [-2**63, 2**63 - 1]), "d": ("DECIMAL(20,4)", [Decimal("-1234567890123456.7890"),
                                                                          Decimal("0.0001")]),
               "str": ("STRING", ["o'hare", "back\\slash ü"]), "dt": ("DATE", [dt.date(1900, 1, 1),
                                                                          dt.date(9999, 12, 31)]),
               "bool": ("BOOLEAN", [True, False])}
    schema = ", ".join(f"`{c}` {kind}" for c, (kind, _) in columns.items())
    rows = [tuple(values[i] for _, values in columns.values()) for i in (0, 1)] + [(None,) * len(columns)]
    table = spark.createDataFrame(rows, schema).alias("t")
    for column in columns:
        for chosen in ([rows[0]], [rows[1], rows[2]]):
            predicate = touched_predicate(spark.createDataFrame(chosen, schema), [column])
            assert sorted(table.where(predicate).select(column).collect(), key=repr) == sorted(
                spark.createDataFrame(chosen, schema).select(column).collect(), key=repr), (column, predicate)
