"""HubSpot destination: CRM v3 objects (contacts, companies, deals, custom objects) found by a property
with unique values.

* upsert — ``POST /crm/v3/objects/{type}/batch/upsert`` with ``idProperty``: created or updated;
* insert — a batch read by ``idProperty`` first; records that exist are kept as they are, the others
  upserted (so a resend creates nothing twice);
* update — the same read; records that do not exist are left alone (nothing created);
* delete — the same read gives HubSpot's record ids, which ``batch/archive`` takes (it takes no
  ``idProperty``); a record already gone counts as deleted.

At most 100 records a request (the batch endpoints' limit). Every upsert input carries an
``objectWriteTraceId``, so a record HubSpot refuses fails alone — a 207 Multi-Status naming it — and
goes to the reject ledger with HubSpot's message, the others being written.

Field checks: before anything is sent (``prepare``), the object's properties are read from the
properties API; a mapped field that is no property of the object, or a read-only one, fails the sync
naming it, instead of one refused batch per 100 records. The same answer, read once per Spark worker,
decides how each value is written (HubSpot's property types): ``date`` as the epoch milliseconds of
midnight UTC (a time of day is refused rather than cut), ``datetime`` as epoch milliseconds, ``bool``
as ``true``/``false``, ``number`` as plain decimal text with every digit, everything else as text; a
null clears the property (HubSpot's ``""``).

Connection: any Airflow connection whose password is a private app's access token (``Authorization:
Bearer``); its host, when set, replaces ``https://api.hubapi.com`` (a proxy, or the test emulator).
Rate: the sync paces itself to ``burst_limit`` × ``limit_share`` requests per 10 seconds for the whole
sync; a 429 is waited out (``Retry-After``, else the window HubSpot's ``X-HubSpot-RateLimit-*`` headers
describe) and the batch sent again.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, ClassVar, Sequence

from spark_jobs.contract.saas import HubSpotOptions
from spark_jobs.errors import ConfigError, DestinationError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, Sink, SinkCapabilities, SinkConfig
from spark_jobs.sinks.saas.client import ApiClient, SchemaCache
from spark_jobs.sinks.saas.values import Unconvertible, boolean, epoch_millis, midnight_millis, number_text, text

API = "https://api.hubapi.com"
BATCH_LIMIT = 100
#: Object types whose records HubSpot finds by email, though the property is not marked unique.
BY_EMAIL = frozenset({"contacts", "0-1"})
#: Properties of each (API, object type), shared by the lanes and partitions of a Spark worker.
_PROPERTIES: SchemaCache[dict[str, dict[str, Any]]] = SchemaCache()

Convert = Callable[[Any], Any]


def converter(prop: dict[str, Any]) -> Convert:
    """How a value is written to a property of this type (the module docstring); null clears it."""
    kind = prop.get("type")
    write: Convert = {"date": midnight_millis, "datetime": epoch_millis, "number": number_text,
                      "bool": lambda v: "true" if boolean(v) else "false"}.get(str(kind), text)
    return lambda value: "" if value is None else write(value)


class HubSpotSink(Sink):
    name = "hubspot"
    capabilities = SinkCapabilities(batch_size=BATCH_LIMIT)
    options_class = HubSpotOptions
    options: HubSpotOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        if config.key_fields != [self.options.id_property]:
            raise ConfigError(
                f"The hubspot destination finds records by id_property {self.options.id_property!r}, so the sync's "
                f"key must be that one field; it is {config.key_fields}. Map the key column to it "
                f"(field_mapping={{'<key column>': '{self.options.id_property}'}}).")
        self.client = self._client()
        self.convert: dict[str, Convert] = {}

    def _client(self) -> ApiClient:
        token = self.config.password or ""
        connection = self.config.connection
        base = API
        if connection.get("host"):
            host = connection["host"] if "://" in connection["host"] else \
                f"{connection.get('schema') or 'https'}://{connection['host']}"
            base = f"{host.rstrip('/')}:{connection['port']}" if connection.get("port") else host
        return ApiClient("hubspot", base, lambda: {"Authorization": f"Bearer {token}"}, secrets=[token],
                         wait_hint=_window_left)

    @property
    def _objects(self) -> str:
        return f"/crm/v3/objects/{self.options.object_type}"

    # --- driver side -------------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        """Fail before anything is sent when a mapped field is no writable property of the object."""
        properties = self._properties(fresh=True)
        options = self.options
        key = properties.get(options.id_property)
        by_email = key is not None and key["name"] == "email" and options.object_type in BY_EMAIL
        if key is None or not (key.get("hasUniqueValue") or by_email):
            raise DestinationError(
                f"HubSpot {options.object_type} cannot be found by {options.id_property!r}: "
                + ("no such property" if key is None else "its values are not unique (hasUniqueValue is false)")
                + "; set id_property to a property with unique values (email for contacts). Nothing was sent.")
        missing = [f for f in self.config.fields if f not in properties]
        read_only = [f for f in self.config.fields if f in properties and f != options.id_property
                     and (properties[f].get("modificationMetadata") or {}).get("readOnlyValue")]
        if missing or read_only:
            problems = ([f"no property {missing} (the object has {sorted(properties)})"] if missing else []) + \
                       ([f"read-only {read_only}"] if read_only else [])
            raise DestinationError(f"HubSpot {options.object_type}: the sync maps fields HubSpot cannot write: "
                                   f"{'; '.join(problems)}. Create them in HubSpot or change field_mapping. "
                                   "Nothing was sent.")

    def _properties(self, fresh: bool = False) -> dict[str, dict[str, Any]]:
        return _PROPERTIES.get((self.client.base_url, self.options.object_type), self._read_properties, fresh)

    def _read_properties(self) -> dict[str, dict[str, Any]]:
        response = self.client.request("GET", f"/crm/v3/properties/{self.options.object_type}", ok=(200,))
        if response.status_code != 200:
            raise DestinationError(f"HubSpot has no object type {self.options.object_type!r}: HTTP "
                                   f"{response.status_code} {self.client.redact(response.text[:300])}")
        return {p["name"]: p for p in response.json().get("results", [])}

    # --- executor side -----------------------------------------------------------------------------
    def open(self) -> None:
        self.client.open()
        properties = self._properties()
        self.convert = {f: converter(properties.get(f, {})) for f in self.config.fields}

    def close(self) -> None:
        self.client.close()

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        batch = self.as_batch(records)
        by_op: dict[str, list[int]] = defaultdict(list)
        for i, op in enumerate(batch.ops):
            by_op[op].append(i)
        outcomes: list[Outcome] = [None] * len(batch)
        every = batch.records
        for op, positions in by_op.items():
            for start in range(0, len(positions), BATCH_LIMIT):
                chunk = positions[start:start + BATCH_LIMIT]
                for i, outcome in zip(chunk, self.OPERATIONS[op](self, [every[i] for i in chunk])):
                    outcomes[i] = outcome
        return outcomes

    def _upsert(self, records: list[ChangeRecord]) -> list[Outcome]:
        outcomes: list[Outcome] = [None] * len(records)
        inputs, sent = [], []
        for i, record in enumerate(records):
            try:
                inputs.append({"idProperty": self.options.id_property, "id": self._id(record),
                               "objectWriteTraceId": str(i), "properties": self._properties_of(record)})
                sent.append(i)
            except Unconvertible as exc:
                outcomes[i] = Rejected(f"hubspot: {exc}")
        if inputs:
            response = self.client.request("POST", f"{self._objects}/batch/upsert", json={"inputs": inputs},
                                           ok=(200, 207))
            for i, reason in _refused(response, sent).items():
                outcomes[i] = Rejected(f"hubspot: {reason}")
        return outcomes

    def _id(self, record: ChangeRecord) -> str:
        return text(record.key[self.options.id_property])

    def _properties_of(self, record: ChangeRecord) -> dict[str, Any]:
        values = {}
        for name, value in record.data.items():
            if name == self.options.id_property:
                continue
            try:
                values[name] = self.convert[name](value)
            except Unconvertible as exc:
                raise Unconvertible(f"{name}: {exc}") from None
        return values

    def _found(self, records: list[ChangeRecord]) -> dict[str, str]:
        """HubSpot's record id of each record that exists, by its ``id_property`` value."""
        id_property = self.options.id_property
        inputs = [{"id": self._id(r)} for r in records]
        response = self.client.request("POST", f"{self._objects}/batch/read", ok=(200, 207),
                                       json={"idProperty": id_property, "inputs": inputs, "properties": [id_property]})
        if response.status_code not in (200, 207):
            raise DestinationError(f"hubspot: reading {len(inputs)} records by {id_property} failed: HTTP "
                                   f"{response.status_code} {self.client.redact(response.text[:300])}")
        return {str(r["properties"].get(id_property)): str(r["id"]) for r in response.json().get("results", [])}

    def _delete(self, records: list[ChangeRecord]) -> list[Outcome]:
        found = self._found(records)
        if found:
            response = self.client.request("POST", f"{self._objects}/batch/archive", ok=(204, 200),
                                           json={"inputs": [{"id": i} for i in found.values()]})
            if response.status_code not in (200, 204):
                return [Rejected(f"hubspot: archive refused: HTTP {response.status_code} "
                                 f"{_message(response)}")] * len(records)
        return [None] * len(records)

    def _insert(self, records: list[ChangeRecord]) -> list[Outcome]:
        found = self._found(records)
        return self._some(records, [self._id(r) not in found for r in records])

    def _update(self, records: list[ChangeRecord]) -> list[Outcome]:
        found = self._found(records)
        return self._some(records, [self._id(r) in found for r in records])

    def _some(self, records: list[ChangeRecord], send: list[bool]) -> list[Outcome]:
        """Upsert the records ``send`` marks; the others are done as they are (kept, or left alone)."""
        chosen = [r for r, s in zip(records, send) if s]
        results = iter(self._upsert(chosen) if chosen else [])
        return [next(results) if s else None for s in send]

    OPERATIONS: ClassVar[dict[str, Callable[["HubSpotSink", list[ChangeRecord]], list[Outcome]]]] = {
        "upsert": _upsert, "insert": _insert, "update": _update, "delete": _delete}


def _refused(response: Any, traces: list[int]) -> dict[int, str]:
    """The records a batch upsert refused, by position, with HubSpot's reason: from a 207's errors,
    or every record of a request refused whole."""
    if response.status_code == 200:
        return {}
    body = _json(response)
    if response.status_code != 207:
        return {i: f"HTTP {response.status_code}: {_message(response)}" for i in traces}
    refused = {}
    for error in body.get("errors", []):
        reason = f"{error.get('category', 'error')}: {error.get('message', error)}"
        for trace in (error.get("context") or {}).get("objectWriteTraceId", []):
            refused[int(trace)] = reason
    return refused


def _json(response: Any) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _message(response: Any) -> str:
    body = _json(response)
    return str(body.get("message") or response.text[:300])


def _window_left(response: Any) -> float | None:
    """How long a 429 asks to wait when it has no ``Retry-After``: HubSpot's rolling window
    (``X-HubSpot-RateLimit-Interval-Milliseconds``), after which every request that filled it has left
    it. Long, but rare: the sync paces itself below the limit."""
    interval = response.headers.get("X-HubSpot-RateLimit-Interval-Milliseconds")
    return int(interval) / 1000 if interval and interval.isdigit() else None
