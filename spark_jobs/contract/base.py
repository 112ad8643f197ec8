"""What every job spec and job result shares: the run identity, field checks, the JSON round trip.

A spec field declares its default and its check (:func:`option`); the check normalizes the value
(``"id"`` -> ``["id"]``) or says what is allowed, and :class:`ConfigError` names the field and the
bad value. The same checks run on the Airflow side at DAG parse time (:meth:`JobSpec.check_static`,
on the operator arguments that are not templated) and on the Spark side before any Spark work.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import date
from typing import Any, Callable, ClassVar, TypeVar

from spark_jobs.contract.layout import Warehouse, path_name_problem, relative_path_problem
from spark_jobs.errors import ConfigError

Check = Callable[[Any], Any]
S = TypeVar("S", bound="JobSpec")


class Invalid(ValueError):
    """Raised by a check with what the field allows; turned into a ConfigError naming the field."""


def option(default: Any = None, check: Check | None = None, *, factory: Callable[[], Any] | None = None) -> Any:
    """A spec field with its default (``factory`` for lists and dicts) and its check."""
    metadata = {"check": check} if check else {}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid("a string")
    return value


def required_text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid("a non-empty string")
    return value


def path_name(value: Any) -> str:
    """A name that becomes a folder under the warehouse (:func:`~spark_jobs.contract.layout.path_name_problem`)."""
    problem = path_name_problem(value)
    if problem:
        raise Invalid(f"a name that can be a folder under the warehouse; this one {problem}")
    return value


def relative_path(value: Any) -> str:
    """A place under the warehouse, named relative to it (``snapshots/customers``)."""
    problem = relative_path_problem(value)
    if problem:
        raise Invalid(f"a path under the warehouse made of names; this one {problem}")
    return value


def names(value: Any) -> list[str]:
    """Column names: one name or a list of them."""
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise Invalid("a column name or a list of column names")
    return list(value)


def required_names(value: Any) -> list[str]:
    value = names(value)
    if not value:
        raise Invalid("one or more column names")
    return value


def integer(value: Any) -> int:
    if isinstance(value, bool):
        raise Invalid("an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise Invalid("an integer") from None


def number(value: Any) -> float:
    if isinstance(value, bool):
        raise Invalid("a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise Invalid("a number") from None


def non_negative(value: Any) -> float:
    if number(value) < 0:
        raise Invalid("a number >= 0")
    return float(value)


def fraction(value: Any) -> float:
    if not 0 <= number(value) <= 1:
        raise Invalid("a number between 0 and 1")
    return float(value)


def flag(value: Any) -> bool:
    """A boolean; a rendered template gives text, so ``"true"``/``"false"`` count too."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise Invalid("true or false")


def mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid("a mapping")
    return dict(value)


def one_of(*allowed: str) -> Check:
    def check(value: Any) -> str:
        if value not in allowed:
            raise Invalid(f"one of {', '.join(allowed)}")
        return value
    return check


def resolved_at_run_time(value: Any) -> bool:
    """Whether an operator argument is only known when the task runs: it is (or holds) a Jinja
    template, or an object Airflow resolves then (an upstream task's output, an ``XComArg``)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(resolved_at_run_time(k) or resolved_at_run_time(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(resolved_at_run_time(v) for v in value)
    return not isinstance(value, (int, float, bool, date, type(None)))


def checked(where: str, name: str, check: Check, value: Any) -> Any:
    """``value`` as field ``name``'s check normalizes it; a refused value is a ConfigError naming both."""
    try:
        return check(value)
    except Invalid as allowed:
        raise ConfigError(f"{where}: {name}={value!r} is not allowed; expected {allowed}") from None


def check_fields(obj: Any, where: str) -> None:
    """Run the check of every field of the frozen dataclass ``obj`` (declared with :func:`option`),
    storing the normalized values: a job spec, or a part of one with fields of its own (a source)."""
    for f in fields(obj):
        check = f.metadata.get("check")
        if check is not None:
            object.__setattr__(obj, f.name, checked(where, f.name, check, getattr(obj, f.name)))


def known_values(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    """The keyword arguments of dataclass ``cls`` from its JSON form: a null value means "the
    default"; unknown keys are refused, so a misspelt option fails instead of being silently ignored."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; the keys are {sorted(known)}")
    return {k: v for k, v in data.items() if v is not None}


def _plain(value: Any) -> Any:
    """JSON-ready form of a field value (nested specs such as the wide table have ``to_dict``)."""
    return value.to_dict() if hasattr(value, "to_dict") else value


@dataclass(frozen=True, kw_only=True)
class JobSpec:
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

    def __post_init__(self) -> None:
        check_fields(self, f"{self.job} spec")
        self.validate()

    @classmethod
    def _checked(cls, name: str, check: Check, value: Any) -> Any:
        return checked(f"{cls.job} spec", name, check, value)

    def validate(self) -> None:
        """Rules across fields (overridden where a job has some)."""

    @property
    def lake(self) -> Warehouse:
        return Warehouse(self.warehouse)

    @classmethod
    def from_dict(cls: type[S], data: dict[str, Any]) -> S:
        """The spec from its JSON form. A null value means "the default"; unknown keys are refused,
        so a misspelt option fails instead of being silently ignored."""
        if not isinstance(data, dict):
            raise ConfigError(f"A {cls.job} spec is a JSON object, got {type(data).__name__}")
        values = dict(data)
        job = values.pop("job", cls.job)
        if job != cls.job:
            raise ConfigError(f"A {cls.job} spec cannot run job {job!r}")
        return cls(**known_values(cls, values, f"{cls.job} spec"))

    @classmethod
    def of(cls: type[S], **values: Any) -> S:
        """The spec from keyword arguments, ``None`` meaning the default (as operators pass them)."""
        return cls.from_dict(values)

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, **{f.name: _plain(getattr(self, f.name)) for f in fields(self)}}

    @classmethod
    def check_static(cls, **values: Any) -> None:
        """Check operator arguments at DAG parse time, field by field; ``None`` (the default) and
        values only known at run time are left to the check the spec makes when the task runs."""
        by_name = {f.name: f for f in fields(cls)}
        for name, value in values.items():
            check = by_name[name].metadata.get("check")
            if check is not None and value is not None and not resolved_at_run_time(value):
                cls._checked(name, check, value)


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
