"""The Airflow side of a warehouse on object storage: the hook's job spec and result files on
``s3a://`` go through fsspec (s3fs) to a real S3-compatible HTTP server on 127.0.0.1 (moto's server).

The Spark side of ``s3a://`` (hadoop-aws + the AWS SDK bundle) is documented in
docs/guides/clusters-and-object-stores.md, not tested here: the SDK bundle jar alone is several hundred MB.
"""

from __future__ import annotations

import json

from tests_common.object_store import BUCKET


def test_job_spec_and_result_live_in_an_s3a_warehouse(s3):
    from airflow_reverse_etl.hooks.spark_job import SparkJobHook

    hook = SparkJobHook(warehouse=f"s3a://{BUCKET}/warehouse/")
    job_dir = hook._job_dir("sync")
    assert job_dir.startswith(f"s3a://{BUCKET}/warehouse/_system/jobs/") and job_dir.endswith("-sync-" + job_dir[-8:])
    key = job_dir.removeprefix(f"s3a://{BUCKET}/")

    spec = {"job": "sync", "warehouse": hook.warehouse, "table": "snapshots/customers", "to_version": 3}
    hook._write_json(f"{job_dir}/spec.json", spec)
    stored = json.loads(s3.get_object(Bucket=BUCKET, Key=f"{key}/spec.json")["Body"].read())
    assert stored == spec

    assert hook._read_result(f"{job_dir}/result.json") is None  # the driver has not written it yet
    result = {"status": "success", "job": "sync", "stats": {"sent": 3}}
    s3.put_object(Bucket=BUCKET, Key=f"{key}/result.json", Body=json.dumps(result).encode())
    assert hook._read_result(f"{job_dir}/result.json") == result

