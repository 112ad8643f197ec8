"""How the tables of a job result are named outside the lake: OpenLineage datasets and Airflow Assets.

Both are named by storage location (OpenLineage's naming convention for files and object stores),
so a catalogue that sees the same table from Spark's own OpenLineage integration joins them up. The
Delta version read or written travels as the dataset's version facet: a lineage graph that says
"v11 of B came from v20 of A", like ``_system/lineage``.

OpenLineage is optional (``pip install airflow-reverse-etl[openlineage]``): it is imported only
inside :func:`operator_lineage`, which only the OpenLineage listener calls.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

# Hadoop's connector schemes name the same stores as OpenLineage's plain ones.
_SCHEMES = {"s3a": "s3", "s3n": "s3", "gs": "gs", "abfss": "abfss", "wasbs": "wasbs"}


def dataset_name(location: str) -> tuple[str, str]:
    """(namespace, name) of a storage location: ``("file", "/abs/path")`` or ``("s3://bucket", "key")``."""
    parts = urlsplit(location)
    if parts.scheme in ("", "file") or len(parts.scheme) == 1:  # plain path (or a Windows drive letter)
        path = parts.path if parts.scheme == "file" else location
        return "file", os.path.abspath(path)
    scheme = _SCHEMES.get(parts.scheme, parts.scheme)
    return f"{scheme}://{parts.netloc}", parts.path.lstrip("/")


def asset_uri(location: str) -> str:
    """The Airflow Asset URI of a table location (local paths become ``file://`` URIs)."""
    namespace, name = dataset_name(location)
    return f"file://{name}" if namespace == "file" else f"{namespace}/{name}"


def table_asset(location: str):
    from airflow.sdk import Asset

    return Asset(uri=asset_uri(location))


def operator_lineage(result: dict[str, Any] | None):
    """OpenLineage input/output datasets of a job result, each with its Delta version as a facet."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import dataset_version_dataset

    def datasets(refs: list[dict[str, Any]], cls):
        # One dataset per table: a backfill lists a table once per date, the last one is the newest.
        latest = {dataset_name(ref["uri"]): ref for ref in refs if ref.get("uri")}  # sinks have no path
        out = []
        for (namespace, name), ref in latest.items():
            facets = {}
            if ref.get("version") is not None:
                facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
                    datasetVersion=str(ref["version"]))
            out.append(cls(namespace=namespace, name=name, facets=facets))
        return out

    result = result or {}
    return OperatorLineage(inputs=datasets(result.get("inputs") or [], InputDataset),
                           outputs=datasets(result.get("outputs") or [], OutputDataset))
