"""What the commit protocol needs from S3 (:mod:`spark_jobs.delta.object_store`): the first job on a
warehouse whose store ignores conditional writes fails with a configuration error naming it, before it
writes anything; a store that honours them is probed once and remembered in the warehouse."""

from __future__ import annotations

from tests_common.object_store import BUCKET

WAREHOUSE = f"s3a://{BUCKET}/warehouse"
SNAPSHOT = {"job": "snapshot", "warehouse": WAREHOUSE, "name": "customers", "primary_key": ["id"],
            "source": {"format": "parquet", "path": "/nowhere"}, "logical_date": "2026-01-01T00:00:00+00:00",
            "run_id": "r1"}


def keys(client) -> list[str]:
    """The keys under the warehouse (moto keeps buckets per process: other modules' objects may be there)."""
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix="warehouse/").get("Contents", [])
    return sorted(item["Key"] for item in listed)


def test_a_store_that_ignores_conditional_writes_fails_the_first_job(s3_ignoring_conditional_writes):
    import boto3

    from spark_jobs.entry import run

    result = run(None, SNAPSHOT)  # the check comes before the job touches Spark

    assert result["status"] == "failed"
    error = result["error"]
    assert (error["type"], error["category"], error["retryable"]) == ("ConfigError", "config", False)
    assert WAREHOUSE in error["message"] and "If-None-Match" in error["message"]
    assert keys(boto3.client("s3")) == []  # nothing written: the probe object is gone, no marker


def test_a_store_that_honours_them_is_probed_once_per_warehouse(s3):
    from spark_jobs.delta import object_store

    object_store._checked.discard(WAREHOUSE)
    object_store.require_conditional_writes(WAREHOUSE)
    assert keys(s3) == ["warehouse/_system/storage/conditional-writes.json"]

    # Another process (a later job) reads the marker instead of probing again.
    object_store._checked.discard(WAREHOUSE)
    s3.put_object(Bucket=BUCKET, Key="warehouse/_system/storage/probe-held", Body=b"x")
    object_store.require_conditional_writes(WAREHOUSE)
    assert keys(s3) == ["warehouse/_system/storage/conditional-writes.json", "warehouse/_system/storage/probe-held"]


def test_local_warehouses_are_not_probed(tmp_path):
    from spark_jobs.delta.object_store import require_conditional_writes

    require_conditional_writes(str(tmp_path / "warehouse"))
    assert list(tmp_path.iterdir()) == []
