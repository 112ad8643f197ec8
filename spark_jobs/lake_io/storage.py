"""How delta-rs (the ``deltalake`` package) names and reaches the warehouse, for the driver-side Delta
API (:mod:`spark_jobs.lake_io`), through which the jobs' drivers write the small system tables and the
Airflow side's UI reads them.

delta-rs reads object stores through its own client (``object_store``), configured from the same
place as every other reader of the warehouse: the standard environment (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_REGION``, ...), which is also where the Spark side's S3A credential chain
finds them. Two things differ from Hadoop's and fsspec's spelling and are derived here: Hadoop's
``s3a://`` is ``s3://`` (:func:`storage_uri`), and an ``http://`` endpoint (a test server, MinIO
without TLS) must be allowed explicitly (:func:`storage_options`).
"""

from __future__ import annotations

import os


def storage_uri(uri: str) -> str:
    """delta-rs names object stores by their own scheme: Hadoop's ``s3a://`` is ``s3://`` there.

    >>> storage_uri("s3a://lake/wh/_system/runs")
    's3://lake/wh/_system/runs'
    """
    return "s3://" + uri[len("s3a://"):] if uri.startswith("s3a://") else uri


def storage_options() -> dict[str, str]:
    """What delta-rs needs beyond the standard environment it reads by itself: permission to talk
    plain HTTP when the configured endpoint is ``http://`` (delta-rs refuses it by default, where
    boto3 and Hadoop follow the endpoint's scheme). Never credentials: those stay in the environment."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    return {"AWS_ALLOW_HTTP": "true"} if endpoint.startswith("http://") else {}
