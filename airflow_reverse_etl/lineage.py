"""How the tables of a job result are named outside the lake: OpenLineage datasets and Airflow Assets.

Both are named by storage location (OpenLineage's naming convention for files and object stores),
so a catalogue that sees the same table from Spark's own OpenLineage integration joins them up. The
Delta version read or written travels as the dataset's version facet: a lineage graph that says
"v11 of B came from v20 of A", like ``_system/lineage``. A sink's destination is named the way
OpenLineage names that system (:func:`destination_dataset`, by the namer each built-in destination's
record names, :mod:`spark_jobs.contract.catalogue`): ``postgres://host:port`` + ``db.schema.table``,
``kafka://broker`` + topic, the HTTP endpoint without credentials, and a SaaS API by its vendor and host
+ the object written (``hubspot://api.hubapi.com`` + ``contacts``).

OpenLineage is optional (``pip install airflow-reverse-etl[openlineage]``): it is imported only
inside :func:`operator_lineage`, which only the OpenLineage listener calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from spark_jobs.contract.catalogue import built_in
from spark_jobs.contract.destination_record import dataset_name, http_name

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Asset
    from openlineage.client.event_v2 import Dataset
    from openlineage.client.facet_v2 import RunFacet
    from openlineage.client.facet_v2.column_lineage_dataset import ColumnLineageDatasetFacet

    #: What a task's ``get_openlineage_facets_on_*`` returns: datasets only, no run or job facets.
    Lineage = OperatorLineage[Dataset, RunFacet]

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
    record = built_in(str(destination.get("type")))
    namer = record.lineage if record is not None else http_name if destination.get("base_url") else None
    return None if namer is None else namer(destination, connection or {})  # a REST preset: its base URL


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
