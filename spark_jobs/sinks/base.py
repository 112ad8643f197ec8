"""The sink protocol: what a destination implements, and nothing more.

A sink is opened with its config on an executor, receives batches of :class:`ChangeRecord` (defined with
the batch, :mod:`spark_jobs.sinks.batch`, and handed on here) and says
per record whether it was delivered (``None``), rejected for good (:class:`Rejected`) or should be
tried again (:class:`Retry`). A whole batch that fails for a transient reason raises
:class:`RetryableError` (with ``retry_after`` when the destination said how long to wait); any other
exception means the destination is unusable and fails the sync, leaving the consumer's committed
version where it was. Batching, retries with backoff, stats and the reject ledger are the shared
core's job (:mod:`spark_jobs.sinks.core`), never the sink's.

Sinks must be idempotent: upsert and delete by key, so a resend after a failure duplicates nothing.
"""

from __future__ import annotations

import json
import threading
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from spark_jobs import redaction
from spark_jobs.errors import ConfigError, DestinationError, RetryableError
from spark_jobs.sinks.batch import ChangeBatch, ChangeRecord
from spark_jobs.sinks.pacing import request_pacer
from spark_jobs.contract.destination_record import BuiltInDestination
from spark_jobs.contract.destinations import DeliveryPolicy, SinkOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The sink protocol a sink author imports from this one module: what it defines, plus the record and
#: batch types (defined with the batch, :mod:`spark_jobs.sinks.batch`) and the transient error a sink
#: raises (:mod:`spark_jobs.errors`), handed on here so that the names it uses are exported explicitly.
__all__ = [
    "CAPABILITY_NAMES", "OPERATIONS", "ChangeBatch", "ChangeRecord", "FrameSink", "Outcome", "Rejected",
    "Retry", "RetryableError", "Sink", "SinkCapabilities", "SinkConfig",
]

OPERATIONS = ("upsert", "insert", "update", "delete")
#: Guards the making of a partition's pacer (rare: once per config).
_PACER_LOCK = threading.Lock()


@dataclass(frozen=True)
class Rejected:
    """The destination refused this record for a reason that a resend will not fix by itself; or, with
    ``sent=False``, the sink refused to send it as it is (a value it cannot place): that record's
    problem alone, which never makes a change set "refused whole" (:mod:`spark_jobs.jobs.sync`)."""

    reason: str
    sent: bool = True


@dataclass(frozen=True)
class Retry:
    """The destination could not take this record now; send it again after a backoff (at least
    ``retry_after`` seconds when the destination said how long to wait)."""

    reason: str
    retry_after: float | None = None


Outcome = Rejected | Retry | None


@dataclass
class SinkConfig:
    """What every sink is given. ``options`` are the destination's settings from the spec as they
    came (a sink with an ``options_class`` reads them checked and typed as ``Sink.options``);
    ``secrets`` were read from the Spark driver's environment and never written anywhere."""

    destination: dict[str, Any]
    key_fields: list[str]
    fields: list[str]
    mode: str
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    #: The version this consumer delivered last, when the change set holds only what changed since
    #: (None: it holds the whole version — a first sync or a full resync).
    delivered_version: int | None = None
    #: The sync this delivery belongs to: the snapshot table, the consumer and the version the change
    #: set brings the destination to (what an idempotency key is derived from).
    table: str = ""
    consumer: str = ""
    to_version: int | None = None
    #: Each destination field's Spark type as Spark writes it in a schema's JSON (``DataType.jsonValue()``:
    #: ``"double"``, ``"decimal(20,4)"``, ``{"type": "struct", ...}``): how a JSON batch reads the numbers of
    #: its records back (:mod:`spark_jobs.sinks.json_numbers`). Empty: every fraction as a float.
    field_types: dict[str, Any] = field(default_factory=dict)
    #: How this partition delivers: the sync's policy resolved for it (its share of the sync-wide limits,
    #: :func:`spark_jobs.jobs.delivery.resolve`), given when the sync hands the config to its sinks;
    #: None on the driver before that (its checks send no paced requests).
    delivery: DeliveryPolicy | None = None
    #: The partition's requests-per-second pacer, made on first use and shared by every sink built from
    #: this config (a partition's sending threads); not part of the config's value, and not pickled.
    _pacer: Any = field(default=None, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_pacer": None}

    def request_slot(self) -> AbstractContextManager[None]:
        """One request's slot under this partition's share of the sync's ``requests_per_second``: a
        context entered before the request is sent and left when it is answered (a destination's
        window counts it until then); no limit, no wait."""
        if self.delivery is None or not self.delivery.requests_per_second:
            return nullcontext()
        with _PACER_LOCK:
            if self._pacer is None:
                self._pacer = request_pacer(self.delivery)
        slot: AbstractContextManager[None] = self._pacer()
        return slot

    def check_may_create(self, what: str) -> None:
        """Refuse to create the missing destination ``what`` from a change set that is not the whole
        version. The consumer delivered before, so the destination was removed by hand since;
        re-created from this change set it would hold a fraction of the source, and the commit would
        say it holds all of it."""
        if self.delivered_version is not None:
            raise DestinationError(
                f"{what} does not exist, but this consumer already delivered version {self.delivered_version} "
                "to it: created now it would hold only this change set's rows. Nothing was sent. Restore it, "
                "or, to rebuild it from the whole version, run the diff with full_resync=True "
                "(DiffOperator(full_resync=True)) and sync that change set.")

    @property
    def options(self) -> dict[str, Any]:
        return self.destination

    @property
    def connection(self) -> dict[str, Any]:
        """The public fields of the destination's Airflow connection (host, port, login, schema)."""
        return dict(self.destination.get("connection") or {})

    @property
    def password(self) -> str | None:
        return self.secrets.get("password")

    def connection_extra(self) -> dict[str, Any]:
        """The connection's extras. They often hold tokens and headers, so they travel as a secret
        (JSON in an environment variable) like the password, never in the spec."""
        raw = self.secrets.get("extra")
        return json.loads(raw) if raw else {}


@dataclass(frozen=True)
class SinkCapabilities:
    """What a destination can do and how it likes to be fed: data on the sink class, declared once
    (``capabilities = SinkCapabilities(batch_size=20000)``), read by the sync job to cut, spread and
    encode the change set (dlt's destination capabilities)."""

    #: Records per batch when the sync does not say (a bulk destination wants bigger batches).
    batch_size: int = 500
    #: Most batches one partition may have in flight at once (None: what the sync asks for). A sink
    #: whose client already pipelines (Kafka's producer) says 1.
    max_concurrency: int | None = None
    #: Most partitions that may write at once (None: as many as Spark runs). A single-writer
    #: destination such as a SQLite file says 1.
    max_parallelism: int | None = None
    #: The sink sends JSON: the sync then has Spark write each row's key and data as JSON in the JVM
    #: (columns ``_key_json``/``_data_json`` of the batch's Arrow table, see
    #: :func:`spark_jobs.sinks.batch.with_json`), so no Python serialises rows one by one.
    wants_json: bool = False
    #: The destination can remove a key; without it a mirror sync (which sends deletes) is refused.
    supports_delete: bool = True
    #: The sink sends several requests per batch and sends each inside :meth:`Sink.request_slot` (a
    #: REST destination); otherwise the core paces each attempt at a batch as one request.
    paces_requests: bool = False


CAPABILITY_NAMES = tuple(f.name for f in fields(SinkCapabilities))


class Sink:
    """Base class of destinations. Subclasses set ``name``, their ``capabilities``, their
    ``options_class`` and implement :meth:`write_batch`. A built-in destination sets ``record`` instead
    of the first and the last: its one record (:mod:`spark_jobs.contract.catalogue`) names both.

    The capabilities are also readable as class attributes (``Sink.batch_size`` …), derived from
    ``capabilities``: the sync job reads them so, and a sink written before capabilities existed may
    still *declare* them so (``max_parallelism = 1``), which then becomes its capabilities.

    Options: building a sink parses the destination dict into ``options_class`` (see
    :mod:`spark_jobs.contract.destinations`), which happens on the Spark driver before anything is sent, so
    a misspelt or mistyped option fails the sync up front. A sink that declares no options class (a
    third-party sink from before typed options) keeps reading ``config.options`` as it always did;
    its options cannot be checked, since nothing says which it reads, and ``options`` is None.
    """

    name: ClassVar[str] = ""
    #: A built-in destination's record, which gives ``name`` and ``options_class``.
    record: ClassVar[BuiltInDestination | None] = None
    capabilities: ClassVar[SinkCapabilities] = SinkCapabilities()
    options_class: ClassVar[type[SinkOptions] | None] = None
    # Derived from ``capabilities`` (see the class docstring), never declared beside it.
    batch_size: ClassVar[int]
    max_concurrency: ClassVar[int | None]
    max_parallelism: ClassVar[int | None]
    wants_json: ClassVar[bool]
    supports_delete: ClassVar[bool]
    paces_requests: ClassVar[bool]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        record = cls.__dict__.get("record")
        if record is not None:
            cls.name, cls.options_class = record.name, record.options
        declared = {name: cls.__dict__[name] for name in CAPABILITY_NAMES if name in cls.__dict__}
        if declared:
            cls.capabilities = replace(cls.capabilities, **declared)
        cls._expose_capabilities()

    @classmethod
    def _expose_capabilities(cls) -> None:
        for name in CAPABILITY_NAMES:
            setattr(cls, name, getattr(cls.capabilities, name))

    def __init__(self, config: SinkConfig):
        self.config = config
        # on each executor as on the driver: what this process writes or raises is redacted of them
        redaction.remember(config.password, login=config.connection.get("login"))
        redaction.remember(*config.secrets.values())
        label = self.name or type(self).__name__
        self.options = self.options_class.parse(config.destination, label) if self.options_class else None
        if config.mode == "mirror" and not self.capabilities.supports_delete:
            raise ConfigError(f"The {label} destination cannot delete, so it cannot take a mirror sync; "
                              "use mode 'upsert'")

    def as_batch(self, records: Sequence[ChangeRecord]) -> ChangeBatch:
        """``records`` as a :class:`~spark_jobs.sinks.batch.ChangeBatch` of this sink's fields (it
        already is one when the core calls; a caller driving the sink by hand may pass records)."""
        return ChangeBatch.of(records, self.config.key_fields, self.config.fields)

    # --- driver side -------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        """Check (or create) the destination before anything is sent; ``schema`` maps each
        destination field to its Spark SQL type. Raise DestinationError naming what is wrong."""

    def count(self) -> int | None:
        """Rows currently at the destination, for mirror mode's delete guard (None: unknown)."""
        return None

    def limits(self, policy: DeliveryPolicy) -> DeliveryPolicy:
        """The sync's delivery policy with the limits this destination documents filled in where the
        sync set none — a SaaS API's requests per second for the plan its options name. The sync then
        keeps them across executors like any limit it is given."""
        return policy

    # --- executor side -----------------------------------------------------------------------
    def request_slot(self) -> AbstractContextManager[None]:
        """Enter before one request to the destination and leave when it is answered: waits until the
        sync's requests-per-second limit allows it (a destination's window counts a request until then)."""
        return self.config.request_slot()

    def open(self) -> None:
        """Connect. Called once per partition on the executor."""

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        """Send one batch; one outcome per record, in order. ``records`` is a
        :class:`~spark_jobs.sinks.batch.ChangeBatch`: iterate it for ChangeRecords, or read its Arrow
        ``table`` to build the payload without per-row Python."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the connection; called even when a batch failed."""


Sink._expose_capabilities()  # __init_subclass__ does it for every subclass; the base needs it once


class FrameSink(Sink):
    """A destination Spark writes itself (Delta, Parquet): instead of batches on executors it receives
    the whole operations frame on the driver and applies it in one distributed Spark action, which
    is atomic where the format allows. There are no per-record rejects: the write succeeds or fails.
    """

    def write_frame(self, spark: SparkSession, frame: DataFrame) -> dict[str, Any]:
        """Apply ``frame`` (destination fields plus ``_op`` and ``_change``); return the stats
        (``sent``, ``inserted``, ``updated``, ``deleted``) as a :class:`~spark_jobs.sinks.core.Stats`
        dict."""
        raise NotImplementedError

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        raise TypeError(f"Sink {self.name!r} writes whole frames on the driver, not batches")

