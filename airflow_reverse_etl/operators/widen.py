"""WidenTableOperator: merge sources into a wide Delta table by partial update and left joins."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from airflow_reverse_etl.exceptions import ReverseEtlConfigError, spec_validation
from airflow_reverse_etl.operators.base import DATE_ORDERED, ReverseEtlJobOperator
from spark_jobs.contract import WidenSpec
from spark_jobs.contract.wide_table import parse  # plain Python: no pyspark import

if TYPE_CHECKING:
    from airflow.sdk import Context


def version_of(source_table: str, value: Any) -> int | None:
    """The exact version an upstream task produced: its XCom (``{"table", "version"}``) or an int."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, dict):
        if value.get("table") != source_table:
            raise ReverseEtlConfigError(f"The upstream result for {source_table} is about table {value.get('table')!r}")
        version: int | None = value["version"]
        return version
    raise ReverseEtlConfigError(f"Expected an upstream result or a version for {source_table}, got {value!r}")


class WidenTableOperator(ReverseEtlJobOperator):
    """Merge some (default: all) sources of a wide table into ``<warehouse>/wide/<name>``.

    Full-join sources (sharing the wide key) are merged with Paimon ``partial-update`` semantics:
    nulls do not overwrite, ``sequence_field`` and ``sequence_groups`` order rows per key, deletes are
    refused unless ``ignore_delete``, retracted by sequence groups or (``remove_row_on_delete``)
    removing the wide row, optional per-field ``aggregations``; a changelog source (``row_kind_field``)
    retracts the values its ``-U``/``-D`` rows carry. Left-join sources are joined through a foreign key
    (from a full join or another left join) with a reverse index each, so late, changed or deleted
    right rows reach every wide row referencing them. The wide table has
    Change Data Feed on, so ``DiffOperator(snapshot=widen.output)`` publishes it.

    The wide-table spec is validated here, at DAG parse time, and again by the Spark job before it
    reads anything. See :mod:`spark_jobs.contract.wide_table` for its shape.

    :param wide_table: the wide-table spec.
    :param sources: the names of the sources this task merges (default: all, full joins first).
    :param inputs: ``{source name: upstream SnapshotOperator output}`` (or a version number): each
        source is read up to exactly that version; a source without one is read at its latest.

    Returns (XCom) ``{table, version, primary_key, sources: {name: {from_version, to_version}},
    stats, inputs, outputs}``: ``table``/``version`` are the wide table's, ready for ``DiffOperator``.
    """

    job = WidenSpec.job
    task_defaults = DATE_ORDERED  # a wide table's versions follow logical dates, like a snapshot's
    template_fields: Sequence[str] = (*ReverseEtlJobOperator.template_fields, "inputs")
    ui_color = "#fdf2e8"

    def __init__(self, *, wide_table: dict[str, Any], sources: list[str] | None = None,
                 inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with spec_validation():
            self.wide = parse(wide_table)
        self.wide_table = wide_table
        self.sources = [self.wide.source(name).name for name in sources] if sources else None
        unknown = [name for name in inputs or {} if name not in {s.name for s in self.wide.sources}]
        if unknown:
            raise ReverseEtlConfigError(f"Wide table {self.wide.name}: inputs for unknown source(s) {unknown}")
        self.inputs = inputs or {}
        self.declare_outlets(self.wide.rel)

    def build_spec(self, context: Context) -> tuple[WidenSpec, dict[str, str]]:
        versions = {name: version_of(self.wide.source(name).table, value) for name, value in self.inputs.items()}
        return WidenSpec.of(wide=self.wide, sources=self.sources,
                            versions={k: v for k, v in versions.items() if v is not None}), {}

    def event_counts(self, result: dict[str, Any]) -> dict[str, Any]:
        return {count: sum(part[count] for part in result["stats"].values()) for count in ("inserted", "updated")}

    def summarize(self, result: dict[str, Any]) -> str:
        parts = ", ".join(f"{name} v{s['from_version']}..v{s['to_version']}" for name, s in result["sources"].items())
        stats = ", ".join(f"{part}: +{s['inserted']} ~{s['updated']}" for part, s in result["stats"].items())
        return f"widen {result['table']} -> v{result['version']} ({parts}) {stats}"
