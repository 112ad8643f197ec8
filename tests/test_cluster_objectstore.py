"""The Airflow side of a warehouse on object storage: the hook's job spec and result files on
``s3a://`` go through fsspec (s3fs) to a real S3-compatible HTTP server on 127.0.0.1 (moto's server).

The Spark side of ``s3a://`` (hadoop-aws + the AWS SDK bundle) is documented in the README, not tested
here: the SDK bundle jar alone is several hundred MB.
"""

from __future__ import annotations

import json
import socket

import pytest

BUCKET = "lake"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint():
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    """Credentials and endpoint only through the standard AWS environment, as on a real deployment."""
    import boto3
    import s3fs

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "aretl-test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aretl-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    s3fs.S3FileSystem.clear_instance_cache()
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    yield client
    for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)
    s3fs.S3FileSystem.clear_instance_cache()


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

