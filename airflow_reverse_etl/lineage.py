"""How the tables of a job result are named outside the lake: OpenLineage datasets and Airflow Assets.

Both are named by storage location (OpenLineage's naming convention for files and object stores),
so a catalogue that sees the same table from Spark's own OpenLineage integration joins them up. The
Delta version read or written travels as the dataset's version facet: a lineage graph that says
"v11 of B came from v20 of A", like ``_system/lineage``. A sink's destination is named the way
OpenLineage names that system (:func:`destination_dataset`): ``postgres://host:port`` +
``db.schema.table``, ``kafka://broker`` + topic, the HTTP endpoint without credentials, and a SaaS
API by its vendor and host + the object written (``hubspot://api.hubapi.com`` + ``contacts``).

OpenLineage is optional (``pip install airflow-reverse-etl[openlineage]``): it is imported only
inside :func:`operator_lineage`, which only the OpenLineage listener calls.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Sequence
from urllib.parse import urlsplit

from spark_jobs.contract.rest import connection_url
from spark_jobs.kafka_clients import brokers

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Asset
    from openlineage.client.event_v2 import Dataset
    from openlineage.client.facet_v2 import RunFacet
    from openlineage.client.facet_v2.column_lineage_dataset import ColumnLineageDatasetFacet

    #: What a task's ``get_openlineage_facets_on_*`` returns: datasets only, no run or job facets.
    Lineage = OperatorLineage[Dataset, RunFacet]

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


def table_asset(location: str) -> Asset:
    from airflow.sdk import Asset

    return Asset(uri=asset_uri(location))


def destination_dataset(destination: dict[str, Any],
                        connection: dict[str, Any] | None = None) -> tuple[str, str] | None:
    """(namespace, name) of a sink's destination, from its options and the public fields of its
    connection (host, port, schema, extra); None for a sink this module does not know (plugins).

    Credentials never appear: user info and query strings are dropped from URLs."""
    namer = _DESTINATION_NAMERS.get(str(destination.get("type")))
    if namer is None and destination.get("base_url"):  # a preset of the REST destination: its base URL
        namer = _http
    return None if namer is None else namer(destination, connection or {})


def _postgres(destination: dict[str, Any], conn: dict[str, Any]) -> tuple[str, str]:
    schema, _, table = str(destination["table"]).rpartition(".")
    database = destination.get("database") or conn.get("schema")
    return f"postgres://{conn.get('host')}:{conn.get('port') or 5432}", f"{database}.{schema or 'public'}.{table}"


def _kafka(destination: dict[str, Any], conn: dict[str, Any]) -> tuple[str, str]:
    servers = destination.get("bootstrap_servers") or (conn.get("extra") or {}).get("bootstrap.servers") or (
        brokers(conn["host"], conn.get("port")) if conn.get("host") else "unknown")
    return f"kafka://{str(servers).split(',')[0].strip()}", destination["topic"]


def _http(destination: dict[str, Any], conn: dict[str, Any]) -> tuple[str, str]:
    """A REST API (``http``, ``rest`` and its presets): its URL or base URL, else the connection's."""
    parts = urlsplit(destination.get("url") or destination.get("base_url")
                     or connection_url(conn, destination.get("endpoint")) or "")
    return f"{parts.scheme}://{_address(parts.hostname, parts.port)}", parts.path or "/"


def _address(host: str | None, port: int | None) -> str:
    return (host or "") + (f":{port}" if port else "")


def _saas(scheme: str, default_host: str, name: Callable[[dict[str, Any]], str]) -> Namer:
    """A SaaS API named ``<vendor>://<API host>`` + the object written (``salesforce://acme.my.salesforce.com``
    + ``Contact``): the host from the connection (Salesforce: its ``instance_url`` or ``domain`` extra)."""
    def namer(destination: dict[str, Any], conn: dict[str, Any]) -> tuple[str, str]:
        extra = conn.get("extra") or {}
        url = str(extra.get("instance_url") or (f"https://{extra['domain']}.salesforce.com" if extra.get("domain")
                                                else connection_url(conn, "") or default_host))
        parts = urlsplit(url if "://" in url else f"https://{url}")
        return f"{scheme}://{_address(parts.hostname, parts.port)}", name(destination)
    return namer


Namer = Callable[[dict[str, Any], dict[str, Any]], tuple[str, str]]
_DESTINATION_NAMERS: dict[str, Namer] = {
    "postgres": _postgres, "kafka": _kafka, "http": _http, "rest": _http,
    "sqlite": lambda d, c: ("sqlite", f"{os.path.abspath(d['database'])}.{d['table']}"),
    "delta": lambda d, c: dataset_name(d["path"]),
    "salesforce": _saas("salesforce", "login.salesforce.com", lambda d: str(d["object"])),
    "hubspot": _saas("hubspot", "api.hubapi.com", lambda d: str(d.get("object_type") or "contacts")),
    "braze": _saas("braze", "rest.iad-01.braze.com", lambda d: "users"),
}


def destination_asset_uri(namespace: str, name: str) -> str:
    """An Airflow Asset URI for a destination dataset, in the shape Airflow's own providers use
    (``postgres://host:port/db/schema/table``, ``kafka://broker/topic``)."""
    if namespace.startswith("postgres://"):
        return f"{namespace}/{name.replace('.', '/')}"
    if namespace in ("file", "sqlite"):
        return f"{namespace}://{name}"
    return f"{namespace}/{name.lstrip('/')}"


def operator_lineage(result: dict[str, Any] | None, destinations: Sequence[tuple[str, str]] = ()
                     ) -> Lineage:
    """OpenLineage input/output datasets of a job result, each with its Delta version as a facet,
    plus the ``destinations`` (namespace, name) a sink wrote to; every output carries the job's column
    lineage (:func:`column_lineage_facet`).

    On failure, ``result`` is what the task meant to read and write (no versions: nothing was)."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import dataset_version_dataset

    result = result or {}
    links = result.get("column_lineage") or []

    def datasets(refs: list[dict[str, Any]], cls: type[Dataset], with_columns: bool = False) -> list[Dataset]:
        # One dataset per table: a backfill lists a table once per date, the last one is the newest.
        latest = {dataset_name(ref["uri"]): ref for ref in refs if ref.get("uri")}  # sinks have no path
        out: list[Dataset] = []
        for (namespace, name), ref in latest.items():
            facets: dict[str, Any] = {}
            if ref.get("version") is not None:
                facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
                    datasetVersion=str(ref["version"]))
            columns = [c for c in links if c["output"] and dataset_name(c["output"]) == (namespace, name)]
            if with_columns and columns:
                facets["columnLineage"] = column_lineage_facet(columns)
            out.append(cls(namespace=namespace, name=name, facets=facets))
        return out

    outputs = datasets(result.get("outputs") or [], OutputDataset, with_columns=True)
    to_destination = [c for c in links if c["output"] is None]
    outputs += [OutputDataset(namespace=namespace, name=name,
                              facets={"columnLineage": column_lineage_facet(to_destination)} if to_destination else {})
                for namespace, name in destinations]
    return OperatorLineage(inputs=datasets(result.get("inputs") or [], InputDataset), outputs=outputs)


#: The product's transformations (:data:`spark_jobs.column_lineage.TRANSFORMATIONS`) as OpenLineage's
#: (type, subtype): a rename moves the value unchanged, so it is an identity under another name.
_OPENLINEAGE_TRANSFORMATIONS = {"identity": ("DIRECT", "IDENTITY"), "rename": ("DIRECT", "IDENTITY"),
                                "aggregation": ("DIRECT", "AGGREGATION")}


def column_lineage_facet(links: list[dict[str, Any]]) -> ColumnLineageDatasetFacet:
    """OpenLineage's ``ColumnLineageDatasetFacet`` of one output's column links. A constant has no
    input field: it is listed with none and says which constant it is."""
    from openlineage.client.facet_v2 import column_lineage_dataset as facet

    def input_fields(link: dict[str, Any]) -> list[facet.InputField]:
        kind, subtype = _OPENLINEAGE_TRANSFORMATIONS.get(link["transformation"], ("DIRECT", "TRANSFORMATION"))
        how = [facet.Transformation(type=kind, subtype=subtype, description=_describe(link), masking=False)]
        return [facet.InputField(*dataset_name(i["uri"]), field=i["field"], transformations=how)
                for i in link["inputs"]]

    return facet.ColumnLineageDatasetFacet(fields={
        link["field"]: facet.Fields(inputFields=input_fields(link), transformationType=link["transformation"].upper(),
                                    transformationDescription=_describe(link))
        for link in links})


def _describe(link: dict[str, Any]) -> str:
    sources = ", ".join(i["field"] for i in link["inputs"])
    return link.get("description") or {"identity": f"{sources} as it is", "rename": f"{sources} renamed",
                                       "aggregation": f"aggregate of {sources}"}.get(link["transformation"], "")
