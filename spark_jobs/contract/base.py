"""What every job spec and job result shares: the run identity and the JSON round trip.

A spec is a set of :class:`~spark_jobs.contract.options.Options`: its fields declare their default
and their check, the same checks run on the Airflow side at DAG parse time (:meth:`JobSpec.check_static`,
on the operator arguments that are not templated) and on the Spark side before any Spark work.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from spark_jobs.contract.layout import Warehouse
from spark_jobs.contract.options import Options, option, optional, text
from spark_jobs.errors import ConfigError

S = TypeVar("S", bound="JobSpec")


@dataclass(frozen=True, kw_only=True)
class JobSpec(Options):
    """The run identity every job carries; subclasses add the job's own fields.

    ``warehouse`` may be empty while an operator builds the spec (the hook fills in the configured
    root); a job reading :attr:`lake` without one fails with a :class:`ConfigError`.
    """

    job: ClassVar[str] = ""
    #: The function that runs the job, as ``"module:function"`` (the job registry: the entry point
    #: imports it when the job runs; a path, not an import, so the contract never imports pyspark).
    runner: ClassVar[str] = ""
    warehouse: str = option("", text)
    run_id: str | None = option(None, optional(text))
    logical_date: str | None = option(None, optional(text))
    dag_id: str | None = option(None, optional(text))
    task_id: str | None = option(None, optional(text))

    @classmethod
    def static_where(cls) -> str:
        return f"{cls.job} spec"

    @property
    def lake(self) -> Warehouse:
        return Warehouse(self.warehouse)

    @classmethod
    def from_dict(cls: type[S], data: Any, where: str | None = None) -> S:
        """The spec from its JSON form (:meth:`Options.from_dict`), which may name its job."""
        if not isinstance(data, dict):
            raise ConfigError(f"A {cls.job} spec is a JSON object, got {type(data).__name__}")
        values = dict(data)
        job = values.pop("job", cls.job)
        if job != cls.job:
            raise ConfigError(f"A {cls.job} spec cannot run job {job!r}")
        return super().from_dict(values, where or cls.static_where())

    @classmethod
    def of(cls: type[S], **values: Any) -> S:
        """The spec from keyword arguments, ``None`` meaning the default (as operators pass them)."""
        return cls.from_dict(values)

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, **super().to_dict()}


@dataclass(frozen=True, kw_only=True)
class JobResult:
    """A job's result; :meth:`to_dict` is the task's XCom. Fields marked ``omit_none`` only appear
    when set (a sink's ``plan`` on a dry run, its ``delivery_s`` otherwise).

    ``column_lineage``, common to the jobs that have one, is filled in by the entry point after the job
    succeeded (:mod:`spark_jobs.column_lineage`)."""

    column_lineage: list[dict[str, Any]] | None = field(default=None, metadata={"omit_none": True})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if not (f.metadata.get("omit_none") and getattr(self, f.name) is None)}


def omitted_when_none() -> Any:
    return field(default=None, metadata={"omit_none": True})
