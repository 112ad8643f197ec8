"""Restore and savepoint operators: move a table back to a logical date's version, or protect one."""

from __future__ import annotations

from typing import Any, Sequence

from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from airflow_reverse_etl.operators.base import ReverseEtlJobOperator
from spark_jobs.timetravel import table_rel


class _TableVersionOperator(ReverseEtlJobOperator):
    """A job on one version of one table, named by ``version`` or ``target_logical_date``."""

    template_fields: Sequence[str] = (*ReverseEtlJobOperator.template_fields, "table", "version",
                                      "target_logical_date")

    def __init__(self, *, table: str, target_logical_date: str | None = None, version: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if (target_logical_date is None) == (version is None):
            raise ReverseEtlConfigError(f"{type(self).__name__}: give exactly one of target_logical_date or version")
        self.table = table
        self.target_logical_date = target_logical_date
        self.version = version

    def build_spec(self, context):
        version = None if self.version in (None, "") else int(self.version)
        return {"table": self.table, "version": version, "target_logical_date": self.target_logical_date}, {}


class TableRestoreOperator(_TableVersionOperator):
    """Restore a table (``customers`` = ``snapshots/customers``) to the version of a logical date.

    The restore is one new Delta commit tagged with the target date, recorded in ``_system/lineage``;
    afterwards the later dates can be snapshotted again, in order (replay). Returns (XCom)
    ``{table, uri, version, restored_version, logical_date, reused, inputs, outputs}``.
    """

    job = "restore"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if "{{" not in self.table:
            self.declare_outlets(table_rel(self.table))

    def summarize(self, result):
        return (f"restore {result['table']} to {result['logical_date']} (v{result['restored_version']}) "
                f"as version {result['version']}{' (already done)' if result['reused'] else ''}")


class TableSavepointOperator(_TableVersionOperator):
    """Savepoint a table version (by logical date or number) so maintenance never vacuums it.

    Returns (XCom) ``{table, version, logical_date, savepoint}``.
    """

    job = "savepoint"
    template_fields: Sequence[str] = (*_TableVersionOperator.template_fields, "savepoint_name")

    def __init__(self, *, savepoint_name: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.savepoint_name = savepoint_name

    def build_spec(self, context):
        spec, secrets = super().build_spec(context)
        return {**spec, "savepoint_name": self.savepoint_name}, secrets

    def summarize(self, result):
        return f"savepoint {result['savepoint']}: {result['table']} v{result['version']} ({result['logical_date']})"
