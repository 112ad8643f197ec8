"""Small helpers for tests: write a source, run a job in-process, read a table back sorted."""

from __future__ import annotations

from typing import Any

from spark_jobs.entry import run
from spark_jobs.delta.row_hash import without_row_hash


def job(spark, job_name: str, warehouse: str, **spec: Any) -> dict[str, Any]:
    """Run a job in the shared session exactly as the entry point would; fail the test on job failure."""
    result = run(spark, {"job": job_name, "warehouse": warehouse, **spec})
    assert result["status"] == "success", result.get("error")
    return result


def job_error(spark, job_name: str, warehouse: str, **spec: Any) -> dict[str, Any]:
    result = run(spark, {"job": job_name, "warehouse": warehouse, **spec})
    assert result["status"] == "failed", result
    return result["error"]


def write_parquet(spark, path: str, rows: list[tuple], schema: str) -> None:
    spark.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(path)


def rows_of(df, *order: str) -> list[tuple]:
    """The rows of ``df`` as tuples, sorted; a snapshot table's stored row hash is not one of its values."""
    df = without_row_hash(df)
    return [tuple(r) for r in df.orderBy(*(order or df.columns)).collect()]
