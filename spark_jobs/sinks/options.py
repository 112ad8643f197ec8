"""Typed sink options: what a destination dict may say, checked before anything is delivered.

Each sink declares its options as a frozen dataclass derived from :class:`SinkOptions` — one field per
option, with its type, its default (none: required) and a line of documentation (:func:`option`).
:meth:`SinkOptions.parse` turns the destination dict into an instance on the Spark driver when the
sink is built, so a misspelt option (``tabel``), a value of the wrong type or a missing required
option fails the sync with a :class:`~spark_jobs.errors.ConfigError` naming it — instead of being
ignored and discovered as wrong data at the destination. This is dlt's configuration spec idea: the
options are data a program can check and list, not ``dict.get`` calls scattered through a sink.

The keys every destination carries whatever its sink (:data:`GENERIC_KEYS`: the sink type and what
``SinkOperator`` adds from the Airflow connection) are accepted here once and never declared by a
sink.

Values rendered by Airflow's Jinja templates arrive as text, so a number may be given as numeric
text (``"60"``); every other type must match as it is.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any, Literal, Mapping, Union

from spark_jobs.errors import ConfigError

#: Keys of a destination that belong to every sink: the sink's name, and the connection settings
#: ``SinkOperator`` adds from ``destination_conn_id`` (read by :class:`~spark_jobs.sinks.base.SinkConfig`).
GENERIC_KEYS: dict[str, str] = {
    "type": "the sink: a registered name or module:Class",
    "connection": "public fields of the destination's Airflow connection (host, port, login, schema)",
    "secrets_env": "the environment variables that hold the connection's password and extras",
}


def option(doc: str, default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING) -> Any:
    """Declare one option: its documentation, and its default (none given: the option is required;
    ``factory`` for a mutable default)."""
    return dataclasses.field(default=default, default_factory=factory, metadata={"doc": doc})


@dataclasses.dataclass(frozen=True, kw_only=True)
class SinkOptions:
    """Base of every sink's options. Subclasses are ``@dataclass(frozen=True, kw_only=True)`` (keyword
    only, so a subclass may add a required option after its parent's defaults)."""

    @classmethod
    def parse(cls, destination: Mapping[str, Any], sink: str) -> "SinkOptions":
        """The destination's options as an instance of ``cls``; :class:`ConfigError` naming the first
        unknown, missing or mistyped option. ``sink`` names the destination in the messages."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = [name for name in destination if name not in known and name not in GENERIC_KEYS]
        if unknown:
            raise ConfigError(_unknown_message(unknown[0], sink, known))
        hints = typing.get_type_hints(cls)
        values = {}
        for name, declared in known.items():
            if name not in destination:
                if declared.default is dataclasses.MISSING and declared.default_factory is dataclasses.MISSING:
                    raise ConfigError(f"The {sink} destination needs the option {name!r} "
                                      f"({declared.metadata.get('doc', type_name(hints[name]))})")
                continue
            try:
                values[name] = convert(destination[name], hints[name])
            except TypeError:
                raise ConfigError(f"Option {name!r} of the {sink} destination must be {type_name(hints[name])}, "
                                  f"got {destination[name]!r}") from None
        return cls(**values)

    @classmethod
    def describe(cls) -> dict[str, str]:
        """``{option: "type (default …): doc"}``, for documentation and error messages."""
        hints = typing.get_type_hints(cls)
        described = {}
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                default = f" (default {f.default!r})"
            elif f.default_factory is not dataclasses.MISSING:
                default = f" (default {f.default_factory()!r})"
            else:
                default = " (required)"
            described[f.name] = f"{type_name(hints[f.name])}{default}: {f.metadata.get('doc', '')}"
        return described


def _unknown_message(name: str, sink: str, known: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, [*known, *GENERIC_KEYS], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    return (f"The {sink} destination has no option {name!r}{hint} Its options are {sorted(known)}, "
            f"besides {sorted(GENERIC_KEYS)} which every destination takes.")


def convert(value: Any, hint: Any) -> Any:
    """``value`` as an instance of the type ``hint`` (numbers from numeric text, an int as a float, a
    tuple as a list); TypeError when it is not one."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        for arg in args:
            try:
                return convert(value, arg)
            except TypeError:
                continue
        raise TypeError(value)
    if origin is Literal:
        if value in args:
            return value
        raise TypeError(value)
    if hint is type(None):
        if value is None:
            return value
        raise TypeError(value)
    if origin is list:
        if isinstance(value, (list, tuple)):
            return [convert(item, args[0]) if args else item for item in value]
        raise TypeError(value)
    if origin is dict:
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {k: convert(v, args[1]) if args else v for k, v in value.items()}
        raise TypeError(value)
    if isinstance(value, bool) or hint is bool:  # a bool is an int to Python, never to a destination
        if hint is bool and isinstance(value, bool):
            return value
        raise TypeError(value)
    if hint in (int, float):
        if isinstance(value, (int, float)) and not (hint is int and isinstance(value, float)):
            return hint(value)
        if isinstance(value, str):
            try:
                return hint(value.strip())
            except ValueError:
                pass
        raise TypeError(value)
    if isinstance(value, hint):
        return value
    raise TypeError(value)


def type_name(hint: Any) -> str:
    """A type as a user would write it: ``str``, ``float | list[float]``, ``one of 'delta', 'parquet'``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if hint is type(None):
        return "None"
    if origin is not None:
        return f"{origin.__name__}[{', '.join(type_name(a) for a in args)}]"
    return "Any" if hint is Any else getattr(hint, "__name__", str(hint))
