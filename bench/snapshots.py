"""Scenarios 1 and 2: the snapshot job's two paths, each timed with the diff that follows, against a
plain Spark join (and DuckDB) of the same two versions in the same run.

1. a full extract (``full_extract``): snapshot + diff of the source's second version;
2. the Change Data Feed fast path (``change_data_feed``): the source is a Delta table with a Change
   Data Feed, changed by ``changed`` rows; the same change through the full path (``cdf: false``) is
   timed beside it, so the two paths' times are compared on one table, one change and one run.

:mod:`bench.run` runs both at ``--rows``; :mod:`bench.scaling` runs them at several table and change
sizes for the curves of issue 46.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench import data
from bench.data import Mutation
from bench.harness import job, start_consumer, timed
from bench.references import duckdb_diff, spark_join_diff


def full_extract(spark, con, work: Path, before: str, after: str, expected: dict, duckdb: bool = True) -> dict:
    """Scenario 1: snapshot + diff of a full extract vs a plain Spark join (and DuckDB) of the same
    two versions."""
    wh = str(work / "s1-warehouse")
    shutil.rmtree(wh, ignore_errors=True)
    source = lambda path: {"format": "parquet", "path": path}  # noqa: E731
    job(spark, "snapshot", wh, name="bench", primary_key=["id"], source=source(before),
        logical_date="2026-01-01", run_id="v1")
    start_consumer(spark, wh, "snapshots/bench", 0)
    snap_s, snap = timed(job, spark, "snapshot", wh, name="bench", primary_key=["id"], source=source(after),
                         logical_date="2026-01-02", run_id="v2")
    diff_s, diff = timed(job, spark, "diff", wh, table="snapshots/bench", consumer="bench")
    join_s, join = timed(spark_join_diff, spark, before, after, str(work / "s1-spark-join"))
    project = round(snap_s + diff_s, 3)
    result = {
        "figures": {"snapshot_s": snap_s, "diff_s": diff_s, "project_s": project, "spark_join_s": join_s,
                    "snapshot_rows": snap["rows"]},
        "ratios": {"s1.project_vs_spark_join": round(project / join_s, 2)},
        "correct": {"project": diff["counts"] == expected, "spark_join": join == expected},
    }
    if duckdb:
        duck_s, duck = timed(duckdb_diff, con, before, after, str(work / "s1-duckdb.parquet"))
        result["figures"]["duckdb_s"] = duck_s
        result["ratios"].update({"s1.project_vs_duckdb": round(project / duck_s, 2),
                                 "s1.spark_join_vs_duckdb": round(join_s / duck_s, 2)})
        result["correct"]["duckdb"] = duck == expected
    return result


def apply_changes(spark, table: str, changes: str) -> None:
    """Apply a mutation's changed rows to the Delta source (one MERGE: a source commit with CDF)."""
    from delta.tables import DeltaTable

    cols = {f"`{c}`": f"s.`{c}`" for c in data.COLUMNS}
    (DeltaTable.forPath(spark, table).alias("t").merge(spark.read.parquet(changes).alias("s"), "t.id = s.id")
     .whenMatchedDelete(condition="s._deleted").whenMatchedUpdate(set=cols)
     .whenNotMatchedInsert(condition="NOT s._deleted", values=cols).execute())


def mutation_of(rows: int, changed: int) -> Mutation:
    """``changed`` rows of ``rows`` changed: half updated, a quarter deleted, a quarter new."""
    fraction = changed / rows
    return Mutation(update=fraction / 2, insert=fraction / 4, delete=fraction / 4)


def change_data_feed(spark, con, work: Path, rows: int, before: str, seed: int, changed: int | None = None,
                     duckdb: bool = True) -> dict:
    """Scenario 2: the Change Data Feed fast path on ``changed`` rows (default 0.1% of ``rows``) against
    the full path on the same change, a plain Spark join of the same two versions, and DuckDB's."""
    changed = changed or rows // 1000
    tag = f"s2-{changed}"
    after, changes = str(work / f"{tag}-after.parquet"), str(work / f"{tag}-changes.parquet")
    expected = data.mutate(con, before, rows, after, mutation_of(rows, changed), seed, changes_path=changes)
    wh, src = str(work / f"{tag}-warehouse"), str(work / f"{tag}-source")
    shutil.rmtree(wh, ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)
    spark.read.parquet(before).write.format("delta").option("delta.enableChangeDataFeed", "true").save(src)
    for name, cdf in (("fast", True), ("full", False)):
        job(spark, "snapshot", wh, name=name, primary_key=["id"], source={"format": "delta", "path": src, "cdf": cdf},
            logical_date="2026-01-01", run_id="v1")
        start_consumer(spark, wh, f"snapshots/{name}", 0)
    apply_changes(spark, src, changes)

    def project(name, cdf):
        snap = job(spark, "snapshot", wh, name=name, primary_key=["id"],
                   source={"format": "delta", "path": src, "cdf": cdf}, logical_date="2026-01-02", run_id="v2")
        return snap, job(spark, "diff", wh, table=f"snapshots/{name}", consumer="bench")

    fast_s, (fast_snap, fast_diff) = timed(project, "fast", True)
    full_s, (_, full_diff) = timed(project, "full", False)
    join_s, join = timed(spark_join_diff, spark, before, after, str(work / f"{tag}-spark-join"))
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(wh, ignore_errors=True)
    result = {
        "figures": {"fast_path_s": fast_s, "full_path_s": full_s, "spark_join_s": join_s, "changed_rows": changed,
                    "read": fast_snap["read"]},
        "ratios": {"s2.fast_path_vs_full_path": round(fast_s / full_s, 2),
                   "s2.fast_path_vs_spark_join": round(fast_s / join_s, 2),
                   "s2.full_path_vs_spark_join": round(full_s / join_s, 2)},
        "correct": {"fast_path": fast_diff["counts"] == expected and fast_snap["read"] == "change_data_feed",
                    "full_path": full_diff["counts"] == expected, "spark_join": join == expected},
    }
    if duckdb:
        duck_s, duck = timed(duckdb_diff, con, before, after, str(work / f"{tag}-duckdb.parquet"))
        result["figures"]["duckdb_s"] = duck_s
        result["ratios"]["s2.fast_path_vs_duckdb"] = round(fast_s / duck_s, 2)
        result["correct"]["duckdb"] = duck == expected
    return result
