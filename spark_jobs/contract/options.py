"""The one way options are declared and checked: job specs, the wide table and its sources, sink
options and the delivery policy.

A set of options is a frozen dataclass derived from :class:`Options`; each field is declared with
:func:`option`: its default (none: required), its check, and a line of documentation. A check
normalizes the value (``"id"`` -> ``["id"]``, ``"false"`` -> ``False``) or raises :class:`Invalid`
saying what is allowed; a field declared without a check is checked by its type annotation
(:func:`check_for`), so a sink's options read as plain typed fields. Every refusal is a
:class:`ConfigError` in one form, naming where, the field and the value::

    sync spec: mode='merge' is not allowed; expected one of upsert, insert, update, mirror
    The sqlite destination: unknown option(s) ['tabel'] (did you mean 'table'?); the options are [...]
    Wide table w, source 's1' needs the option 'columns' (a list of column names, or ...)

The checks run when an instance is built (:meth:`Options.from_dict`, or the constructor itself), so
the same values give the same answer on the Airflow side at DAG parse time
(:meth:`Options.check_static`) and on the Spark side before any Spark work. Values rendered by
Airflow's Jinja templates arrive as text, so ``"true"``/``"false"`` and numeric text count as the
boolean or the number they spell, in every set of options.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from datetime import date
from typing import Any, Callable, Literal, TypeVar, Union

from spark_jobs.contract.layout import path_name_problem, relative_path_problem
from spark_jobs.errors import ConfigError

Check = Callable[[Any], Any]
OptionsT = TypeVar("OptionsT", bound="Options")
REQUIRED: Any = dataclasses.MISSING


class Invalid(ValueError):
    """Raised by a check with what the field allows; turned into a ConfigError naming the field."""


def option(default: Any = REQUIRED, check: Check | None = None, *, factory: Callable[[], Any] | None = None,
           doc: str = "") -> Any:
    """A field with its default (``factory`` for lists and dicts; neither: required), its check (none:
    the field's type annotation checks it) and its documentation (shown when it is missing)."""
    metadata = {"check": check, "doc": doc}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


# --- checks ---------------------------------------------------------------------------------------

def optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def anything(value: Any) -> Any:
    return value


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
    return str(value)


def relative_path(value: Any) -> str:
    """A place under the warehouse, named relative to it (``snapshots/customers``)."""
    problem = relative_path_problem(value)
    if problem:
        raise Invalid(f"a path under the warehouse made of names; this one {problem}")
    return str(value)


def names(value: Any) -> list[str]:
    """Column names: one name or a list of them."""
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise Invalid("a column name or a list of column names")
    return list(value)


def required_names(value: Any) -> list[str]:
    given = names(value)
    if not given:
        raise Invalid("one or more column names")
    return given


def name_map(value: Any) -> dict[str, str]:
    """``{name: name}``: non-empty names on both sides."""
    given = mapping(value)
    if not all(isinstance(k, str) and k and isinstance(v, str) and v for k, v in given.items()):
        raise Invalid("a mapping of column names to column names")
    return given


def integer(value: Any) -> int:
    """A whole number (numeric text counts; ``True`` and ``2.5`` do not)."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise Invalid("an integer")
    try:
        return int(value.strip() if isinstance(value, str) else value)
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


def positive(value: Any) -> float:
    if number(value) <= 0:
        raise Invalid("a number > 0")
    return float(value)


def non_negative_integer(value: Any) -> int:
    if integer(value) < 0:
        raise Invalid("an integer >= 0")
    return integer(value)


def at_least_one(value: Any) -> int:
    if integer(value) < 1:
        raise Invalid("an integer >= 1")
    return integer(value)


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


def one_of(*allowed: Any) -> Check:
    def check(value: Any) -> Any:
        if value not in allowed:
            raise Invalid(f"one of {', '.join(str(a) for a in allowed)}")
        return value
    return check


def list_of(item: Check) -> Check:
    def check(value: Any) -> list[Any]:
        if not isinstance(value, (list, tuple)):
            raise Invalid("a list")
        return [item(v) for v in value]
    return check


def mapping_of(item: Check) -> Check:
    def check(value: Any) -> dict[str, Any]:
        value = mapping(value)
        if not all(isinstance(k, str) for k in value):
            raise Invalid("a mapping with text keys")
        return {k: item(v) for k, v in value.items()}
    return check


def any_of(*checks: Check) -> Check:
    """The first check that takes the value; refused, the value is told every shape allowed."""
    def check(value: Any) -> Any:
        refusals = []
        for each in checks:
            try:
                return each(value)
            except Invalid as refused:
                refusals.append(str(refused))
        raise Invalid(" or ".join(refusals))
    return check


def instance_of(cls: type) -> Check:
    def check(value: Any) -> Any:
        if not isinstance(value, cls):
            raise Invalid(f"a {cls.__name__}")
        return value
    return check


def none(value: Any) -> None:
    if value is not None:
        raise Invalid("null")


#: The check of each plain annotation; containers and unions are built from these (:func:`check_for`).
SCALAR_CHECKS: dict[Any, Check] = {bool: flag, int: integer, float: number, str: text, Any: anything,
                                   type(None): none}


def check_for(hint: Any) -> Check:
    """The check a type annotation implies: ``bool`` is :func:`flag`, ``float`` :func:`number`,
    ``Literal[...]`` :func:`one_of`, ``X | None`` optional, ``list[X]``/``dict[str, X]`` check each
    item; any other class: an instance of it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return one_of(*args)
    if origin in (Union, types.UnionType):
        if type(None) in args:
            rest = [a for a in args if a is not type(None)]
            return optional(check_for(rest[0] if len(rest) == 1 else Union[tuple(rest)]))
        return any_of(*(check_for(a) for a in args))
    if origin is list:
        return list_of(check_for(args[0]) if args else anything)
    if origin is dict:
        return mapping_of(check_for(args[1]) if args else anything)
    if hint in SCALAR_CHECKS:
        return SCALAR_CHECKS[hint]
    return instance_of(origin or hint)


class SinkTemplate(str):
    """A template a sink renders per record (a REST destination's URL, body, header), not one Airflow
    renders when the task runs: its ``{{ … }}`` does not make an argument unknown at DAG parse time."""


def resolved_at_run_time(value: Any) -> bool:
    """Whether an operator argument is only known when the task runs: it is (or holds) a Jinja
    template, or an object Airflow resolves then (an upstream task's output, an ``XComArg``)."""
    if isinstance(value, SinkTemplate):
        return False
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(resolved_at_run_time(k) or resolved_at_run_time(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(resolved_at_run_time(v) for v in value)
    return not isinstance(value, (int, float, bool, date, type(None)))


# --- applying the checks --------------------------------------------------------------------------

def checked(where: str, name: str, check: Check, value: Any) -> Any:
    """``value`` as field ``name``'s check normalizes it; a refused value is a ConfigError naming both."""
    try:
        return check(value)
    except Invalid as allowed:
        raise ConfigError(f"{where}: {name}={value!r} is not allowed; expected {allowed}") from None


_FIELD_CHECKS: dict[type, dict[str, Check]] = {}


def field_checks(cls: type) -> dict[str, Check]:
    """Each field's check: the one it declares, else the one its type annotation implies (worked
    out once per class)."""
    if cls not in _FIELD_CHECKS:
        declared = {f.name: f.metadata.get("check") for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls) if not all(declared.values()) else {}
        _FIELD_CHECKS[cls] = {name: check or check_for(hints[name]) for name, check in declared.items()}
    return _FIELD_CHECKS[cls]


def check_fields(obj: Any, where: str) -> None:
    """Run the check of every field of the frozen dataclass ``obj``, storing the normalized values."""
    for name, check in field_checks(type(obj)).items():
        object.__setattr__(obj, name, checked(where, name, check, getattr(obj, name)))


def unknown_options(where: str, given: Any, known: list[str]) -> ConfigError | None:
    """The error for the options of ``given`` that are not ``known`` (a close known one is suggested),
    or None: a misspelt option fails instead of being silently ignored."""
    unknown = [name for name in given if name not in known]
    if not unknown:
        return None
    close = difflib.get_close_matches(str(unknown[0]), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"{where}: unknown option(s) {unknown}{hint}; the options are {sorted(known)}")


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _plain(value: Any) -> Any:
    """JSON-ready form of a field value (nested options have ``to_dict``)."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value.to_dict() if hasattr(value, "to_dict") else value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """Base of every set of options: checked when built, frozen, with a JSON round trip.

    Subclasses are ``@dataclass(frozen=True, kw_only=True)`` (keyword only, so a subclass may add a
    required option after its parent's defaults), declare their fields with :func:`option` and may
    add rules across fields in :meth:`validate`."""

    def __post_init__(self) -> None:
        check_fields(self, self.where())
        self.validate()

    def where(self) -> str:
        """What the messages call these options (``sync spec``, ``Wide table w``)."""
        return self.static_where()

    def validate(self) -> None:
        """Rules across fields (overridden where there are some)."""

    @classmethod
    def from_dict(cls: type[OptionsT], data: Any, where: str | None = None) -> OptionsT:
        """The options from their JSON form; a null value means "the default". An unknown or
        missing option or a refused value is a ConfigError saying ``where``."""
        where = where or cls.static_where()
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a mapping of options, got {type(data).__name__}")
        known = {f.name: f for f in dataclasses.fields(cls)}
        error = unknown_options(where, data, list(known))
        if error:
            raise error
        values = {k: v for k, v in data.items() if v is not None}
        missing = [f for name, f in known.items() if _required(f) and name not in values]
        if missing:
            raise ConfigError(f"{where} needs the option {missing[0].name!r} ({missing[0].metadata.get('doc')})")
        checks = field_checks(cls)
        return cls(**{name: checked(where, name, check, values[name]) for name, check in checks.items()
                      if name in values})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def check_static(cls, **values: Any) -> None:
        """Check operator arguments at DAG parse time, field by field; ``None`` (the default) and
        values only known at run time are left to the check made when the task runs."""
        checks = field_checks(cls)
        for name, value in values.items():
            if value is not None and not resolved_at_run_time(value):
                checked(cls.static_where(), name, checks[name], value)

    @classmethod
    def static_where(cls) -> str:
        """What messages call these options before they are built (:meth:`from_dict`, :meth:`check_static`)."""
        return cls.__name__
