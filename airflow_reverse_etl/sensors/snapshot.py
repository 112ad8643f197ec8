"""SnapshotSensor: wait until a snapshot (or any Delta table) has a version for a logical date, or a
version >= N. Reads the Delta log through fsspec in both modes, so waiting never costs a Spark job."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Sequence

from airflow.configuration import conf
from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowSensorTimeout

from airflow_reverse_etl import config
from airflow_reverse_etl.delta_log import find_version
from airflow_reverse_etl.exceptions import ReverseEtlConfigError, ReverseEtlInfrastructureError, error_class
from airflow_reverse_etl.operators.base import logical_date_of
from airflow_reverse_etl.triggers.delta_version import DeltaVersionTrigger
from spark_jobs.contract import table_rel

if TYPE_CHECKING:
    from airflow.sdk import Context


class SnapshotSensor(BaseSensorOperator):
    """Wait for a Delta version.

    :param table: snapshot name (``customers`` means ``snapshots/customers``) or a warehouse-relative
        table (``wide/orders``).
    :param logical_date: wait for the version recorded for this logical date (default: this run's,
        unless ``min_version`` is given).
    :param min_version: wait until the table's latest version is >= this.
    :param warehouse: warehouse root (default ``[reverse_etl] warehouse``).
    :param deferrable: wait in the triggerer (:class:`.DeltaVersionTrigger`) instead of a worker slot.
    :param timeout: seconds before the task fails with a message naming the table and the condition.

    A storage outage while reading the log counts as "not yet" (logged; the trigger also backs off);
    a problem waiting cannot fix (access denied, not a Delta table, a corrupt log) fails the task
    without retries, naming the table.

    Returns (XCom) ``{table, uri, version, logical_date}`` — a downstream ``DiffOperator`` given it
    reads exactly that version.
    """

    template_fields: Sequence[str] = ("table", "logical_date", "min_version", "warehouse")
    ui_color = "#fdf3e8"

    def __init__(self, *, table: str, logical_date: str | None = None, min_version: int | None = None,
                 warehouse: str | None = None,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if logical_date is not None and min_version is not None:
            raise ReverseEtlConfigError("SnapshotSensor: give logical_date or min_version, not both")
        self.table = table
        self.logical_date = logical_date
        self.min_version = min_version
        self.warehouse = warehouse
        self.deferrable = deferrable

    def _target(self, context: Context) -> tuple[str, str, str | None, int | None]:
        rel = table_rel(self.table)
        uri = f"{config.warehouse_uri(self.warehouse)}/{rel}"
        if self.min_version is not None:
            return rel, uri, None, int(self.min_version)
        return rel, uri, str(self.logical_date or logical_date_of(context)), None

    @staticmethod
    def _xcom(rel: str, uri: str, found: dict[str, Any]) -> dict[str, Any]:
        return {"table": rel, "uri": uri, "version": found["version"], "logical_date": found.get("logical_date")}

    def _find(self, uri: str, date: str | None, min_version: int | None) -> dict[str, Any] | None:
        """The version if it is there; None while it is not, or while the storage is unavailable."""
        try:
            return find_version(uri, date, min_version)
        except ReverseEtlInfrastructureError as exc:
            self.log.warning("%s; will look again", exc)
            return None

    def poke(self, context: Context) -> PokeReturnValue | bool:
        rel, uri, date, min_version = self._target(context)
        found = self._find(uri, date, min_version)
        if not found:
            self.log.info("Not yet: %s", self._trigger(uri, date, min_version).describe())
            return False
        return PokeReturnValue(is_done=True, xcom_value=self._xcom(rel, uri, found))

    def _trigger(self, uri: str, date: str | None, min_version: int | None, deadline: float | None = None
                 ) -> DeltaVersionTrigger:
        return DeltaVersionTrigger(uri=uri, logical_date=date, min_version=min_version,
                                   poll_interval=self.poke_interval, deadline=deadline)

    def execute(self, context: Context) -> Any:
        rel, uri, date, min_version = self._target(context)
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as exc:
                raise AirflowSensorTimeout(f"Timed out waiting for "
                                           f"{self._trigger(uri, date, min_version).describe()}: {exc}") from exc
        found = self._find(uri, date, min_version)
        if found:  # already there: no need to hand over to the triggerer
            return self._xcom(rel, uri, found)
        self.defer(trigger=self._trigger(uri, date, min_version, deadline=time.time() + self.timeout),
                   method_name="execute_complete",
                   timeout=timedelta(seconds=self.timeout + 60))  # the trigger's own deadline says why

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event["status"] == "found":
            rel, uri, _, _ = self._target(context)
            return self._xcom(rel, uri, event)
        if event["status"] == "timeout":
            raise AirflowSensorTimeout(event["message"])
        raise error_class(event.get("category"))(event.get("message") or f"Unexpected trigger event {event}")
