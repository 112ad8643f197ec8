"""MERGE target pruning by key (spark_jobs.delta.key_pruning): a MERGE of few source rows lists their keys in
its ON clause, exactly (quotes, backslashes, composite keys), and matches the same rows as without the
list (a full extract's new keys, which the table lacks, are left out of it); past the limit, or for a key type
without exact literals, the ON clause stays as it was."""

import datetime as dt

from spark_jobs.delta import key_pruning
from spark_jobs.delta.key_pruning import listed_keys
from tests_common.jobs import job, rows_of, write_parquet

SCHEMA = "region STRING, code STRING, amount INT"
DAY_1 = [("eu", "o'neil", 1), ("eu", "back\\slash", 2), ("us", "`tick`", 3), ("us", "plain", 4)]
DAY_2 = [("eu", "o'neil", 10), ("us", "`tick`", 3), ("us", "plain", 4), ("eu", "new\\'one", 5)]


def snapshot_twice(spark, warehouse, tmp_path) -> tuple[dict, str]:
    """Record DAY_1 then DAY_2 (one update, one delete, one insert, each with a quote or backslash in
    its key); return the second run's result and its MERGE's predicate as the Delta log has it."""
    src, uri = str(tmp_path / "src"), f"{warehouse}/snapshots/orders"
    for date, rows in (("2026-01-01", DAY_1), ("2026-01-02", DAY_2)):
        write_parquet(spark, src, rows, SCHEMA)
        result = job(spark, "snapshot", warehouse, name="orders", primary_key=["region", "code"],
                     source={"format": "parquet", "path": src}, logical_date=date, run_id=f"run-{date}")
    merge = spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").where("operation = 'MERGE'").first()
    assert rows_of(spark.read.format("delta").load(uri)) == sorted(DAY_2)
    return result, merge["operationParameters"]["predicate"]


def test_a_snapshot_merge_lists_its_keys_and_changes_exactly_the_changed_rows(spark, warehouse, tmp_path):
    result, predicate = snapshot_twice(spark, warehouse, tmp_path)
    assert (result["inserted"], result["updated"], result["deleted"]) == (1, 1, 1)
    assert " IN (" in predicate, predicate  # the list reached the MERGE; the rows above prove it exact
    assert "o'neil" in predicate and "new" not in predicate, predicate  # an inserted key matches nothing: not listed


def test_past_the_limit_the_on_clause_stays_as_it_was(spark, warehouse, tmp_path, monkeypatch):
    # the second run MERGEs three change rows, two of keys the table has (the only ones listed)
    monkeypatch.setattr(key_pruning, "MAX_LISTED_KEYS", 1)
    result, predicate = snapshot_twice(spark, warehouse, tmp_path)
    assert (result["inserted"], result["updated"], result["deleted"]) == (1, 1, 1)
    assert " IN (" not in predicate, predicate


def test_what_the_list_holds(spark):
    keys = spark.createDataFrame([(1, dt.date(2026, 1, 2)), (2, None)], "id BIGINT, day DATE")
    assert listed_keys(keys, ["id"]) == "t.`id` IN (1L, 2L)"  # each literal of its column's exact type
    assert listed_keys(keys, ["id", "day"]) == "(t.`id`, t.`day`) IN ((1L, DATE'2026-01-02'))"  # a null matches nothing
    assert listed_keys(keys.where("id = 2"), ["id", "day"]) == "FALSE"
    # a double's printed value may round: no list rather than a list that misses a row
    assert listed_keys(spark.createDataFrame([(1.5,)], "x DOUBLE"), ["x"]) is None


def test_a_composite_key_with_a_bigint_merges_on_every_run(spark, warehouse, tmp_path):
    """Issue 33 §1: ``(region STRING, id BIGINT)`` — the key of every JDBC bigserial id beside a
    region — failed every MERGE after the first, on the full path and the Change Data Feed path alike,
    with DATATYPE_MISMATCH: the key list wrote ``2`` as an INT inside a struct compared with a BIGINT."""
    schema = "region STRING, id BIGINT, name STRING"
    src = str(tmp_path / "src")
    day_1, day_2 = [("eu", 1, "a"), ("eu", 2, "b"), ("us", 3, "c")], [("eu", 2, "B"), ("us", 3, "c"), ("us", 4, "d")]
    spark.createDataFrame(day_1, schema).write.format("delta").option("delta.enableChangeDataFeed", "true").save(src)
    sources = {"full": {"format": "delta", "path": src, "cdf": False}, "fast": {"format": "delta", "path": src}}
    for name, source in sources.items():
        job(spark, "snapshot", warehouse, name=name, primary_key=["region", "id"], source=source,
            logical_date="2026-01-01", run_id=f"{name}-1")
    spark.createDataFrame(day_2, schema).write.format("delta").mode("overwrite").save(src)
    for name, source in sources.items():
        result = job(spark, "snapshot", warehouse, name=name, primary_key=["region", "id"], source=source,
                     logical_date="2026-01-02", run_id=f"{name}-2")
        assert result["read"] == ("full_extract" if name == "full" else "change_data_feed")
        assert (result["inserted"], result["updated"], result["deleted"]) == (1, 1, 1), name
        assert rows_of(spark.read.format("delta").load(f"{warehouse}/snapshots/{name}")) == sorted(day_2)
