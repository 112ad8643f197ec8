"""TableSavepointOperator: protect a table version from VACUUM."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from airflow_reverse_etl.operators.table_version import TableVersionOperator
from spark_jobs.contract import SavepointSpec

if TYPE_CHECKING:
    from airflow.sdk import Context


class TableSavepointOperator(TableVersionOperator):
    """Savepoint a table version (by logical date or number) so maintenance never vacuums it.

    Returns (XCom) ``{table, version, logical_date, savepoint}``.
    """

    job = SavepointSpec.job
    spec_class = SavepointSpec
    template_fields: Sequence[str] = (*TableVersionOperator.template_fields, "savepoint_name")

    def __init__(self, *, savepoint_name: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_static(SavepointSpec, savepoint_name=savepoint_name)
        self.savepoint_name = savepoint_name

    def build_spec(self, context: Context) -> tuple[SavepointSpec, dict[str, str]]:
        return SavepointSpec.of(**self.spec_values(), savepoint_name=self.savepoint_name), {}

    def summarize(self, result: dict[str, Any]) -> str:
        return f"savepoint {result['savepoint']}: {result['table']} v{result['version']} ({result['logical_date']})"
