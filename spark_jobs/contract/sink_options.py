"""The base of every sink's options, and the keys every destination carries whatever its sink.

Apart from :mod:`.destinations` so that a family of destinations may declare its options in a module
of its own (:mod:`.rest`) that :mod:`.destinations` registers, without an import cycle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping, TypeVar, cast

from spark_jobs.contract.options import Options

SO = TypeVar("SO", bound="SinkOptions")

#: Keys of a destination that belong to every sink: the sink's name, and the connection settings
#: ``SinkOperator`` adds from ``destination_conn_id`` (read by :class:`~spark_jobs.sinks.base.SinkConfig`).
GENERIC_KEYS: dict[str, str] = {
    "type": "the sink: a registered name or module:Class",
    "connection": "public fields of the destination's Airflow connection (host, port, login, schema)",
    "secrets_env": "the environment variables that hold the connection's password and extras",
}


@dataclass(frozen=True, kw_only=True)
class SinkOptions(Options):
    """Base of every sink's options; a subclass declares one field per option (its type checks it)."""

    @classmethod
    def parse(cls: type[SO], destination: Mapping[str, Any], sink: str) -> SO:
        """The destination's options as an instance of ``cls`` (the :data:`GENERIC_KEYS` set aside);
        :class:`~spark_jobs.errors.ConfigError` naming the first unknown, missing or refused option.

        Parsed once per process: the check of a spec, the sink built on the driver and the sink of every
        sending thread on an executor ask for the same destination, and share the one (frozen) result."""
        own = {k: v for k, v in destination.items() if k not in GENERIC_KEYS}
        try:
            text = json.dumps(own, sort_keys=True)
        except (TypeError, ValueError):  # a value only known at run time (an Airflow template object)
            return cls.from_dict(own, f"The {sink} destination")
        options_class: Any = cls  # a class is hashable, whatever mypy's view of type[SO]
        return cast(SO, _parsed(options_class, text, sink))

    @classmethod
    def static_where(cls) -> str:
        return "The destination"


@lru_cache(maxsize=64)
def _parsed(cls: type[SinkOptions], text: str, sink: str) -> SinkOptions:
    """``cls`` from a destination's options as canonical JSON text, once per (class, options)."""
    return cls.from_dict(json.loads(text), f"The {sink} destination")
