"""What the restore and savepoint operators share: a job on one version of one table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from airflow_reverse_etl.exceptions import spec_validation
from airflow_reverse_etl.operators.base import ReverseEtlJobOperator
from spark_jobs.contract import RestoreSpec, SavepointSpec, require_one_target

if TYPE_CHECKING:
    from airflow.sdk import Context


class TableVersionOperator(ReverseEtlJobOperator):
    """A job on one version of one table, named by ``version`` or ``target_logical_date``."""

    spec_class: ClassVar[type[RestoreSpec] | type[SavepointSpec]]
    template_fields: Sequence[str] = (*ReverseEtlJobOperator.template_fields, "table", "version",
                                      "target_logical_date")

    def __init__(self, *, table: str, target_logical_date: str | None = None, version: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with spec_validation():
            require_one_target(version, target_logical_date, type(self).__name__)
        self.check_static(self.spec_class, table=table, version=version, target_logical_date=target_logical_date)
        self.table = table
        self.target_logical_date = target_logical_date
        # a template field: once rendered it is text (``""`` when its template renders empty)
        self.version: int | str | None = version

    def spec_values(self) -> dict[str, Any]:
        version = None if self.version in (None, "") else self.version
        return {"table": self.table, "version": version, "target_logical_date": self.target_logical_date}

    def build_spec(self, context: Context) -> tuple[RestoreSpec | SavepointSpec, dict[str, str]]:
        return self.spec_class.of(**self.spec_values()), {}
