"""Delta/Parquet publish sink on real Spark: MERGE by key for every mode, field mapping, one Delta
commit per sync, Parquet rewrite-and-swap, schema mismatches named by column, and a rerun after a
sync that wrote but never committed (killed between the two) leaving the same table."""

from tests_common.jobs import rows_of
from tests_common.pipeline import Pipeline

ROWS = [(1, "ann", "oslo"), (2, "bob", "lima"), (3, "cid", "rome")]
NEXT = [(1, "ANN", "oslo"), (3, "cid", "rome"), (4, "dan", "kyiv")]


def read(spark, path, fmt="delta"):
    frame = spark.read.format("delta").load(path) if fmt == "delta" else spark.read.parquet(path)
    return rows_of(frame.select("id", "name", "city"), "id")


def test_every_mode_merges_by_key(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    p.step(ROWS)
    modes = ("upsert", "mirror", "insert", "update")
    targets = {mode: {"type": "delta", "path": str(tmp_path / f"pub-{mode}")} for mode in modes}
    for mode in modes:  # one consumer per published table
        p.sync(p.diff(mode), targets[mode])
    p.step(NEXT)
    for mode in modes:
        result = p.sync(p.diff(mode), targets[mode], mode=mode, allow_mass_delete=True)
        assert result["stats"]["sent"] == sum(result["planned"].values())
    assert read(spark, targets["upsert"]["path"]) == sorted(set(ROWS[1:] + NEXT))
    assert read(spark, targets["mirror"]["path"]) == NEXT
    assert read(spark, targets["insert"]["path"]) == ROWS + [(4, "dan", "kyiv")]
    assert read(spark, targets["update"]["path"]) == [(1, "ANN", "oslo"), (2, "bob", "lima"), (3, "cid", "rome")]


def test_parquet_publish_rewrites_and_swaps(spark, warehouse, tmp_path):
    path = str(tmp_path / "pub-parquet")
    target = {"type": "delta", "format": "parquet", "path": path}
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(ROWS), target)
    p.sync(p.step(NEXT), target, mode="mirror")
    assert read(spark, path, "parquet") == NEXT
    assert sorted(x.name for x in tmp_path.iterdir() if x.name.startswith("pub-parquet")) == ["pub-parquet"]


def test_mapping_one_commit_per_sync_and_a_rerun_changes_nothing(spark, warehouse, tmp_path):
    from spark_jobs.delta.lake import history

    path = str(tmp_path / "published")
    target = {"type": "delta", "path": path}
    options = {"field_mapping": {"id": "customer_id", "city": "town"}, "constants": {"source": "lake"}}
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(ROWS), target, **options)
    changes = p.step(NEXT)
    # Killed after the MERGE but before the consumer commit: the next run sends the same changes.
    p.sync(changes, target, mode="mirror", commit=False, **options)
    once = rows_of(spark.read.format("delta").load(path), "customer_id")
    p.sync(changes, target, mode="mirror", **options)
    assert rows_of(spark.read.format("delta").load(path), "customer_id") == once == [
        (1, "oslo", "lake"), (3, "rome", "lake"), (4, "kyiv", "lake")]
    assert [e["operation"] for e in history(path)][:3] == ["MERGE", "MERGE", "MERGE"]


def test_a_type_mismatch_names_the_column(spark, warehouse, tmp_path):
    path = str(tmp_path / "published")
    spark.createDataFrame([(1, 5, "x")], "id INT, name INT, city STRING").write.format("delta").save(path)
    p = Pipeline(spark, warehouse, tmp_path)
    error = p.sync_error(p.step(ROWS), {"type": "delta", "path": path})
    assert error["type"] == "DestinationError"
    assert "Column 'name'" in error["message"] and "int" in error["message"] and "string" in error["message"]
