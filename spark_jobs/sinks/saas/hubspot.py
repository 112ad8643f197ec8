"""HubSpot destination: CRM v3 objects (contacts, companies, deals, custom objects) found by a property
with unique values.

* upsert — ``POST /crm/v3/objects/{type}/batch/upsert`` with ``idProperty``: created or updated;
* insert — a batch read by ``idProperty`` first; records that exist are kept as they are, the others
  upserted (so a resend creates nothing twice);
* update — the same read; records that do not exist are left alone (nothing created);
* delete — the same read gives HubSpot's record ids, which ``batch/archive`` takes (it takes no
  ``idProperty``); a record already gone counts as deleted.

Matching by HubSpot's rules: a read's results come in no promised order and carry the record's stored
values, so each is matched back to its key as HubSpot matches them (:meth:`HubSpotSink.match`): an
email case-insensitively (HubSpot keeps it in lower case), and a contact also by its secondary emails
(``hs_additional_emails``), which a read by email finds too; any other unique property by its exact
value. Two email keys that differ only in case are one contact to HubSpot.

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

A preset of the REST core (:mod:`spark_jobs.sinks.saas.preset`): the requests and the reading of the
207s are REST options (per-record errors matched to their records by ``objectWriteTraceId``, which is
the record's key); the lookups of insert, update and delete are the preset's code.

Connection: ``reverse_etl_hubspot`` (or any connection) whose password is a private app's access token
(``Authorization: Bearer``); its host, when set, replaces ``https://api.hubapi.com`` (a proxy, or the
test emulator). Rate: unless the sync sets ``delivery.requests_per_second``, it sends at most
``burst_limit`` × ``limit_share`` requests in any rolling 10 seconds for the whole sync, as HubSpot counts
them (``requests_window`` 10: a window's allowance may go at once; the core keeps the limit across
executors); a 429 is waited out (``Retry-After``, else the window HubSpot's
``X-HubSpot-RateLimit-*`` headers describe) and the batch sent again — on every endpoint, the property
read before a sync included (:meth:`SaasSink.waited_out`) — except the daily limit's (``policyName:
DAILY``), which lasts until midnight in the account's time zone: it fails the sync at once, naming it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.contract.rest import RestOptions
from spark_jobs.contract.saas import HubSpotOptions, hubspot_api_url
from spark_jobs.contract.catalogue import HUBSPOT
from spark_jobs.contract.templating import to_json
from spark_jobs.errors import ConfigError, DestinationError
from spark_jobs.sinks.base import ChangeRecord, Outcome, SinkCapabilities, SinkConfig
from spark_jobs.sinks.rest import RestRequest
from spark_jobs.sinks.rest.responses import Reply
from spark_jobs.sinks.saas.preset import SaasSink, SchemaCache
from spark_jobs.sinks.saas.values import Unconvertible, boolean, epoch_millis, midnight_millis, number_text, text

BATCH_LIMIT = 100
#: HubSpot counts requests over a rolling window of this many seconds (the burst limit is per window).
WINDOW_S = 10.0
#: Object types whose records HubSpot finds by email, though the property is not marked unique.
BY_EMAIL = frozenset({"contacts", "0-1"})
#: A contact's secondary emails (``;``-separated), which a read by email matches too.
ADDITIONAL_EMAILS = "hs_additional_emails"
#: Properties of each (API, object type), shared by the lanes and partitions of a Spark worker.
_PROPERTIES: SchemaCache[dict[str, dict[str, Any]]] = SchemaCache()

Convert = Callable[[Any], Any]


def converter(prop: dict[str, Any]) -> Convert:
    """How a value is written to a property of this type (the module docstring); null clears it."""
    kind = prop.get("type")
    write: Convert = {"date": midnight_millis, "datetime": epoch_millis, "number": number_text,
                      "bool": lambda v: "true" if boolean(v) else "false"}.get(str(kind), text)
    return lambda value: "" if value is None else write(value)


def trace_id(value: Any) -> str:
    """A record's ``objectWriteTraceId``: its key as the REST core matches it back (text as it is,
    anything else as JSON)."""
    return value if isinstance(value, str) else to_json(value)


class HubSpotSink(SaasSink):
    record = HUBSPOT
    capabilities = SinkCapabilities(batch_size=BATCH_LIMIT, wants_json=False, paces_requests=True)
    options: HubSpotOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        self.convert: dict[str, Convert] = {}
        self.archive_ids: dict[str, str] = {}
        self.by_email = self.options.id_property == "email" and self.options.object_type in BY_EMAIL

    def precondition(self, config: SinkConfig) -> None:
        id_property = HubSpotOptions.parse(config.destination, self.name).id_property
        if config.key_fields != [id_property]:
            raise ConfigError(
                f"The hubspot destination finds records by id_property {id_property!r}, so the sync's key must be "
                f"that one field; it is {config.key_fields}. Map the key column to it "
                f"(field_mapping={{'<key column>': '{id_property}'}}).")

    @property
    def _objects(self) -> str:
        return f"/crm/v3/objects/{self.options.object_type}"

    def rest_options(self) -> RestOptions:
        write = {"method": "POST", "url": f"{self._objects}/batch/upsert", "per": "batch", "batch_size": BATCH_LIMIT,
                 "response": {"success": [200, 207], "records": ["errors"], "record_failed": "`true`",
                              "record_error": "join(': ', [category, message])", "record_index": None,
                              "match_result": "context.objectWriteTraceId",
                              "match_record": f'key."{self.options.id_property}"'}}
        archive = {"method": "POST", "url": f"{self._objects}/batch/archive", "per": "batch",
                   "batch_size": BATCH_LIMIT, "response": {"success": [200, 204]}}
        return RestOptions.from_dict({
            "base_url": hubspot_api_url(self.config.connection), "auth": {"type": "bearer"},
            "operations": {"upsert": write, "insert": write, "update": write, "delete": archive}})

    def limits(self, policy: DeliveryPolicy) -> DeliveryPolicy:
        if policy.requests_per_second is not None:
            return policy
        return replace(policy, requests_per_second=self.options.burst_limit * self.options.limit_share / WINDOW_S,
                       requests_window=WINDOW_S)

    def retry_wait(self, reply: Reply, headers: Any) -> float | None:
        """A 429 without ``Retry-After``: HubSpot's rolling window
        (``X-HubSpot-RateLimit-Interval-Milliseconds``), after which every request that filled it has
        left it. Long, but rare: the sync paces itself below the limit."""
        interval = headers.get("X-HubSpot-RateLimit-Interval-Milliseconds")
        return int(interval) / 1000 if reply.status == 429 and interval and interval.isdigit() else None

    def exhausted(self, reply: Reply) -> str | None:
        """A 429 of the daily limit (``policyName: DAILY``): it lasts until midnight."""
        if reply.status == 429 and isinstance(reply.body, dict) and reply.body.get("policyName") == "DAILY":
            return "the account's daily API limit is used up (it resets at midnight in the account's time zone)"
        return None

    # --- driver side -------------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        """Fail before anything is sent when a mapped field is no writable property of the object."""
        properties = self.asked_on_the_driver(lambda: self._properties(fresh=True))
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
        return _PROPERTIES.get((self.base_url, self.options.object_type), self._read_properties, fresh)

    def _read_properties(self) -> dict[str, dict[str, Any]]:
        response = self.auxiliary_request("GET", f"/crm/v3/properties/{self.options.object_type}", ok=(200, 400, 404))
        if response.status_code != 200:
            raise DestinationError(f"HubSpot has no object type {self.options.object_type!r}: HTTP "
                                   f"{response.status_code} {self.auth.redact(response.text[:300])}")
        return {p["name"]: p for p in response.json().get("results", [])}

    # --- executor side -----------------------------------------------------------------------------
    def open(self) -> None:
        super().open()
        properties = self.waited_out(self._properties)
        self.convert = {f: converter(properties.get(f, {})) for f in self.config.fields}

    def converted(self, record: ChangeRecord) -> dict[str, Any]:
        values = {}
        for name, value in record.data.items():
            if name == self.options.id_property:
                continue
            try:
                values[name] = self.convert[name](value)
            except Unconvertible as exc:
                raise Unconvertible(f"{name}: {exc}") from None
        return values

    def render_body(self, request: RestRequest) -> bytes | None:
        if request.op == "delete":
            inputs: list[dict[str, Any]] = [{"id": self.archive_ids[self.match(self._id(r))]}
                                            for r in request.records]
        else:
            inputs = [{"idProperty": self.options.id_property, "id": self._id(r),
                       "objectWriteTraceId": trace_id(r.key[self.options.id_property]), "properties": r.data}
                      for r in request.records]
        return to_json({"inputs": inputs}).encode()

    def _id(self, record: ChangeRecord) -> str:
        return text(record.key[self.options.id_property])

    def match(self, value: str) -> str:
        """``value`` of the id property as HubSpot matches it: an email in lower case, else as it is."""
        return value.lower() if self.by_email else value

    def send_operation(self, op: str, records: list[ChangeRecord]) -> list[Outcome]:
        """upsert as one request; insert, update and delete after reading which records exist."""
        if op == "upsert":
            return super().send_operation(op, records)
        found = self._found(records)
        send = [(self.match(self._id(r)) in found) == (op != "insert") for r in records]
        self.archive_ids = found
        chosen = [r for r, s in zip(records, send) if s]
        results = iter(super().send_operation(op, chosen) if chosen else [])
        return [next(results) if s else None for s in send]

    def _found(self, records: list[ChangeRecord]) -> dict[str, str]:
        """HubSpot's record id of each record that exists, by its ``id_property`` value as HubSpot matches
        it (:meth:`match`; a contact by each of its emails)."""
        id_property = self.options.id_property
        names = [id_property, ADDITIONAL_EMAILS] if self.by_email else [id_property]
        response = self.auxiliary_request("POST", f"{self._objects}/batch/read", ok=(200, 207), json_body={
            "idProperty": id_property, "inputs": [{"id": self._id(r)} for r in records], "properties": names})
        found = {}
        for result in response.json().get("results", []):
            values = [str(result["properties"].get(n) or "") for n in names]
            for value in ";".join(values).split(";") if self.by_email else values:
                if value:
                    found[self.match(value)] = str(result["id"])
        return found
