"""Salesforce destination: records of one sObject, matched on an External ID field.

* upsert — sObject Collections upsert on the External ID (``PATCH .../composite/sobjects/{object}/
  {field}``, 200 records a request); a batch of ``bulk_threshold`` records or more goes through one
  Bulk API 2.0 ingest job instead (``upsert`` with ``externalIdFieldName``: create, upload the CSV, close,
  poll, read ``failedResults/``);
* insert / update — the records that exist are looked up first (SOQL on the External ID); insert
  upserts only the new ones (existing records are kept as they are), update only the existing ones
  (nothing is created);
* delete — Salesforce deletes by record Id only, so the Ids are looked up by External ID (SOQL, 200 a
  query), then deleted with sObject Collections (200 a request) or a Bulk API 2.0 ``delete`` job; a
  record already gone counts as deleted.

Matching by Salesforce's rules: a looked-up record is matched back to its key as Salesforce compares
them (:func:`match_key`, by the External ID field's described type): a Number field by its value, since
Salesforce stores it as a double and returns ``5.0`` or ``1.2345678E7`` for the key 5 or 12345678; a
text or Email field case-insensitively, unless the field is case-sensitive (Describe's
``caseSensitive``). Two keys that differ only in case are one record to a case-insensitive External ID:
the second of a request is refused as Salesforce's ``DUPLICATE_EXTERNAL_ID``. A Number value a double
cannot hold (past 2^53, or more digits than a double keeps) is refused for its record: Salesforce would
store another number.

A record Salesforce refuses goes to the reject ledger with Salesforce's own reason (``statusCode:
message (fields)`` from sObject Collections, ``sf__Error`` from a Bulk job's failed results, matched
back by External ID or Id since a job's results come in no particular order); the others are written.
With ``all_or_none`` a refused record rolls its request back: the others are sent again without it.

Field checks: before anything is sent (``prepare``) the object is described; a mapped field the object
lacks, one the integration user cannot create or update, an External ID field that is not one, or a
required field the mapping leaves out (every new record would be refused) fails the sync naming it.
The description, read once per Spark worker, also decides how each value is written, so that no value
can make Salesforce refuse a whole request of 200 (its JSON parser does that for one value of the
wrong type): ``date`` fields take ``YYYY-MM-DD`` (a time of day is refused, not cut), ``datetime``
ISO 8601 in UTC with milliseconds, ``boolean`` true/false, ``int`` integers, ``double``/``currency``/
``percent`` numbers (refused when a double cannot hold every digit), text fields text; null clears a
field (``#N/A`` in a Bulk CSV, where an empty cell would leave the field as it is).

A preset of the REST core (:mod:`spark_jobs.sinks.saas.preset`): the sObject Collections requests, the
reading of their results (one per record, in order; ``ALL_OR_NONE_OPERATION_ROLLED_BACK`` retried,
``ENTITY_IS_DELETED`` counted as deleted) and the OAuth2 client credentials auth are REST options; the
lookups and the Bulk API 2.0 jobs are the preset's code, their requests going through the same core.

Connection: Airflow's ``salesforce`` connection type, OAuth 2.0 client credentials flow — extras
``consumer_key`` and ``consumer_secret`` (the connected app's), and ``instance_url`` (the org's My
Domain URL, e.g. ``https://acme.my.salesforce.com``) or ``domain`` (``acme.my``, as simple-salesforce
reads it: ``https://acme.my.salesforce.com``); ``version`` sets the API version unless the destination's
``api_version`` does. The token is fetched once per Spark worker and again when Salesforce answers 401
(a session has no announced lifetime). Every API request goes to the ``instance_url`` the token names
(the org's instance, which need not be the URL the token was asked from). Limits ("API Request Limits
and Allocations"): a used-up 24-hour allocation (403 ``REQUEST_LIMIT_EXCEEDED`` "TotalRequests Limit
exceeded.") fails the sync at once — it frees up over hours —, while the same 403 for too many long
requests at once ("ConcurrentPerOrgLongTxn") passes as they finish, and is retried like a 503; the
describe before a sync and a worker's describe are retried too (:meth:`SaasSink.waited_out`).
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from spark_jobs.contract.rest import RestOptions, RestResponse
from spark_jobs.contract.saas import SalesforceOptions, salesforce_login_url
from spark_jobs.contract.catalogue import SALESFORCE
from spark_jobs.contract.templating import to_json
from spark_jobs.errors import ConfigError, DestinationError, RetryableError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, SinkCapabilities, SinkConfig
from spark_jobs.sinks.rest import RestRequest, RestSink
from spark_jobs.sinks.rest import responses
from spark_jobs.sinks.rest.responses import Reply
from spark_jobs.sinks.saas.preset import SaasSink, SchemaCache
from spark_jobs.sinks.saas.salesforce_fields import csv_cell, json_converter, match_key, soql_literal
from spark_jobs.sinks.saas.values import Unconvertible, text

COLLECTION_LIMIT = 200
#: Characters of External ID values one SOQL lookup carries (its URL stays far below Salesforce's limit).
QUERY_CHARS = 8000
DEFAULT_VERSION = "62.0"
TERMINAL = frozenset({"JobComplete", "Failed", "Aborted"})
#: Each object's fields, shared by the lanes and partitions of a Spark worker.
_DESCRIBED: SchemaCache[dict[str, dict[str, Any]]] = SchemaCache()
#: How sObject Collections answers are read: one result per record, in order.
_ERRORS = "join('; ', errors[*].join(': ', [statusCode, message]))"
UPSERTED = {"success": [200], "records": ["@"], "record_failed": "success == `false`", "record_error": _ERRORS,
            "record_retryable": "errors[0].statusCode == 'ALL_OR_NONE_OPERATION_ROLLED_BACK'", "record_index": None,
            "error": "join('; ', [*].join(': ', [errorCode, message]))"}
DELETED = {**UPSERTED, "record_failed": "success == `false` && errors[0].statusCode != 'ENTITY_IS_DELETED'"}

def _instance_url(extra: dict[str, Any]) -> str:
    url = salesforce_login_url(extra)
    if url:
        return url
    raise ConfigError("The salesforce destination needs the org's URL: set the connection's instance_url (your My "
                      "Domain URL, e.g. https://acme.my.salesforce.com) or domain (e.g. acme.my).")


class SalesforceSink(SaasSink):
    record = SALESFORCE
    capabilities = SinkCapabilities(batch_size=10_000, wants_json=False, paces_requests=True)
    options: SalesforceOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        self.fields: dict[str, dict[str, Any]] = {}

    def precondition(self, config: SinkConfig) -> None:
        ext = SalesforceOptions.parse(config.destination, self.name).external_id_field
        if config.key_fields != [ext]:
            raise ConfigError(
                f"The salesforce destination matches records on external_id_field {ext!r}, so the sync's key must "
                f"be that one field; it is {config.key_fields}. Map the key column to it "
                f"(field_mapping={{'<key column>': '{ext}'}}).")
        _instance_url(config.connection_extra())

    def signed_in(self, config: SinkConfig) -> SinkConfig:
        """The connected app's consumer key and secret (the salesforce connection's extras) as the login
        and password the REST core's OAuth2 client credentials auth signs in with."""
        extra = config.connection_extra()
        key, secret = str(extra.get("consumer_key") or ""), str(extra.get("consumer_secret") or "")
        if not key or not secret:
            raise ConfigError("The salesforce destination signs in with the OAuth 2.0 client credentials flow: its "
                              "connection needs the extras consumer_key and consumer_secret (the connected app's).")
        return replace(config, secrets={**config.secrets, "password": secret},
                       destination={**config.destination, "connection": {**config.connection, "login": key}})

    def api_base(self) -> str:
        """The ``instance_url`` the token names: the org's API is there, not at the URL it signed in at."""
        instance = self.auth.token_field("instance_url")
        return instance.rstrip("/") if instance else str(self.base_url)

    def transient(self, reply: Reply) -> bool:
        """403 ``REQUEST_LIMIT_EXCEEDED`` for concurrent long requests passes as they finish."""
        return _request_limit(reply) is not None and self.exhausted(reply) is None

    def exhausted(self, reply: Reply) -> str | None:
        said = _request_limit(reply)
        if said is None or "TotalRequests" not in said:
            return None
        return "the org's 24-hour API allocation is used up (it frees up as the rolling 24 hours pass)"

    @property
    def version(self) -> str:
        return self.options.api_version or str(self.config.connection_extra().get("version") or DEFAULT_VERSION)

    @property
    def _data(self) -> str:
        return f"/services/data/v{self.version}"

    def rest_options(self) -> RestOptions:
        base = _instance_url(self.config.connection_extra())
        upsert = {"method": "PATCH", "per": "batch", "response": UPSERTED,
                  "url": f"{self._data}/composite/sobjects/{self.options.object}/{self.options.external_id_field}"}
        delete = {"method": "DELETE", "url": f"{self._data}/composite/sobjects", "per": "batch", "response": DELETED}
        return RestOptions.from_dict({
            "base_url": base, "operations": {"upsert": upsert, "insert": upsert, "update": upsert, "delete": delete},
            "auth": {"type": "oauth2_client_credentials", "token_url": f"{base}/services/oauth2/token",
                     "client_auth": "body"}})

    # --- driver side -------------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        """Fail before anything is sent when the mapping does not fit the object (module docstring)."""
        fields = self.asked_on_the_driver(lambda: self._describe(fresh=True))
        options = self.options
        ext = fields.get(options.external_id_field)
        if ext is None or not ext.get("externalId"):
            raise DestinationError(
                f"Salesforce {options.object}.{options.external_id_field} is "
                + ("no field" if ext is None else "not an External ID field") + "; set external_id_field to one "
                "(a field marked External ID, e.g. Customer_Id__c). Nothing was sent.")
        problems = _mapping_problems(fields, self.config.fields, creates=self.config.mode != "update")
        if problems:
            raise DestinationError(f"Salesforce {options.object}: {'; '.join(problems)}. Fix the object or the "
                                   "field_mapping. Nothing was sent.")

    def _describe(self, fresh: bool = False) -> dict[str, dict[str, Any]]:
        return _DESCRIBED.get((self.base_url, self.options.object), self._read_describe, fresh)

    def _read_describe(self) -> dict[str, dict[str, Any]]:
        response = self.auxiliary_request("GET", f"{self._data}/sobjects/{self.options.object}/describe", ok=(200, 404))
        if response.status_code != 200:
            raise DestinationError(f"Salesforce has no object {self.options.object!r} (or the integration user "
                                   f"cannot see it): {self.auth.redact(response.text[:300])}")
        return {f["name"]: f for f in response.json().get("fields", [])}

    # --- executor side -----------------------------------------------------------------------------
    def open(self) -> None:
        super().open()
        self.fields = self.waited_out(self._describe)

    def converted(self, record: ChangeRecord) -> dict[str, Any]:
        values = {}
        for name, value in record.data.items():
            try:
                values[name] = json_converter(self.fields[name])(value)
            except Unconvertible as exc:
                raise Unconvertible(f"{name}: {exc}") from None
        return values

    def render_body(self, request: RestRequest) -> bytes | None:
        records = [{"attributes": {"type": self.options.object}, **r.data} for r in request.records]
        return to_json({"allOrNone": self.options.all_or_none, "records": records}).encode()

    def send_operation(self, op: str, records: list[ChangeRecord]) -> list[Outcome]:
        """upsert in requests of 200 or one Bulk job; insert and update after looking up which records
        exist; delete by the Ids looked up."""
        if op == "delete":
            return self._delete(records)
        send = [True] * len(records)
        if op in ("insert", "update"):
            found = self._lookup(records)
            send = [(self._key(r) in found) == (op == "update") for r in records]
        chosen = [r for r, s in zip(records, send) if s]
        results = iter(self._upsert(op, chosen) if chosen else [])
        return [next(results) if s else None for s in send]

    def _bulk(self, records: list[Any]) -> bool:
        return len(records) >= self.options.bulk_threshold

    def _upsert(self, op: str, records: list[ChangeRecord]) -> list[Outcome]:
        if self._bulk(records):
            return self._bulk_upsert(records)
        outcomes: list[Outcome] = []
        for start in range(0, len(records), COLLECTION_LIMIT):
            outcomes += RestSink._send(self, op, records[start:start + COLLECTION_LIMIT])
        return outcomes

    def _key(self, record: ChangeRecord) -> Any:
        """The record's External ID as Salesforce matches it (:func:`match_key`)."""
        ext = self.options.external_id_field
        return match_key(self.fields[ext], record.key[ext])

    def _lookup(self, records: list[ChangeRecord]) -> dict[Any, str]:
        """The Id of each record that exists, by External ID as Salesforce matches it (SOQL, a few hundred
        values a query)."""
        ext = self.options.external_id_field
        found: dict[Any, str] = {}
        for chunk in _query_chunks([r.key[ext] for r in records]):
            literals = ", ".join(soql_literal(v, self.fields[ext]) for v in chunk)
            url = f"{self._data}/query?" + urlencode(
                {"q": f"SELECT Id, {ext} FROM {self.options.object} WHERE {ext} IN ({literals})"})
            while url:
                body = self.auxiliary_request("GET", url).json()
                found.update({match_key(self.fields[ext], r[ext]): r["Id"] for r in body.get("records", [])})
                url = body.get("nextRecordsUrl") or ""
        return found

    def _delete(self, records: list[ChangeRecord]) -> list[Outcome]:
        found = self._lookup(records)
        present = [r for r in records if self._key(r) in found]
        ids = [found[self._key(r)] for r in present]
        refused = self._bulk_delete(ids) if self._bulk(records) else self._collection_delete(ids, present)
        return [refused.get(found[self._key(r)]) if self._key(r) in found else None for r in records]

    def _collection_delete(self, ids: list[str], records: list[ChangeRecord]) -> dict[str, Outcome]:
        refused: dict[str, Outcome] = {}
        for start in range(0, len(ids), COLLECTION_LIMIT):
            chunk, chosen = ids[start:start + COLLECTION_LIMIT], records[start:start + COLLECTION_LIMIT]
            url = f"{self._data}/composite/sobjects?" + urlencode({"ids": ",".join(chunk), "allOrNone": "false"})
            reply = responses.Reply.of(self.auxiliary_request("DELETE", url, ok=(200, 400)))
            outcomes = responses.outcomes(RestResponse.from_dict(DELETED), reply, chosen, self.name,
                                          f"DELETE {url}", self.auth.redact)
            refused.update({i: o for i, o in zip(chunk, outcomes) if o is not None})
        return refused

    # --- Bulk API 2.0 -------------------------------------------------------------------------------
    def _bulk_upsert(self, records: list[ChangeRecord]) -> list[Outcome]:
        header = list(records[0].data)
        rows = [[csv_cell(r.data[f]) for f in header] for r in records]
        failed = self._run_job({"operation": "upsert", "externalIdFieldName": self.options.external_id_field},
                               header, rows)
        ext = self.options.external_id_field
        position = {self._key(r): i for i, r in enumerate(records)}
        outcomes: list[Outcome] = [None] * len(records)
        for row in failed:
            sent = match_key(self.fields[ext], row[ext]) if row.get(ext) else None
            if sent not in position:
                raise DestinationError(f"salesforce: a Bulk API 2.0 job reported a failed record whose {ext} "
                                       f"{row.get(ext)!r} was not sent: {row.get('sf__Error')}")
            outcomes[position[sent]] = Rejected(f"salesforce: {row['sf__Error']}")
        return outcomes

    def _bulk_delete(self, ids: list[str]) -> dict[str, Outcome]:
        if not ids:
            return {}
        failed = self._run_job({"operation": "delete"}, ["Id"], [[i] for i in ids])
        return {row["Id"]: Rejected(f"salesforce: {row['sf__Error']}") for row in failed
                if not row["sf__Error"].startswith("ENTITY_IS_DELETED")}

    def _run_job(self, job: dict[str, Any], header: list[str], rows: list[list[str]]) -> list[dict[str, str]]:
        """One Bulk API 2.0 ingest job of ``rows``: its failed records (``failedResults/``, as dicts)."""
        created = self.auxiliary_request("POST", f"{self._data}/jobs/ingest", json_body={
            "object": self.options.object, "contentType": "CSV", "lineEnding": "LF", "columnDelimiter": "COMMA",
            **job})
        url = f"{self._data}/jobs/ingest/{created.json()['id']}"
        data = io.StringIO()
        writer = csv.writer(data, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
        self.auxiliary_request("PUT", f"{url}/batches", data=data.getvalue().encode(),
                               headers={"Content-Type": "text/csv"}, ok=(201,))
        self.auxiliary_request("PATCH", url, json_body={"state": "UploadComplete"})
        info = self._wait(url)
        if info["state"] != "JobComplete":
            raise DestinationError(f"salesforce: Bulk API 2.0 job {info['id']} {info['state']}: "
                                   f"{info.get('errorMessage', 'no reason given')}")
        return list(csv.DictReader(io.StringIO(self.auxiliary_request("GET", f"{url}/failedResults/").text)))

    def _wait(self, url: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.options.bulk_timeout
        while True:
            info: dict[str, Any] = self.auxiliary_request("GET", url).json()
            if info["state"] in TERMINAL:
                return info
            if time.monotonic() >= deadline:
                self.auxiliary_request("PATCH", url, json_body={"state": "Aborted"})
                raise RetryableError(f"salesforce: Bulk API 2.0 job {info['id']} still {info['state']} after "
                                     f"{self.options.bulk_timeout:g}s: aborted, the batch is sent again")
            time.sleep(self.options.bulk_poll_interval)


def _mapping_problems(fields: dict[str, dict[str, Any]], mapped: list[str], creates: bool) -> list[str]:
    """What keeps the mapped fields from being written (empty: nothing)."""
    missing = [f for f in mapped if f not in fields]
    locked = [f for f in mapped if f in fields
              and (not fields[f].get("updateable") or (creates and not fields[f].get("createable")))]
    required = [name for name, f in fields.items() if creates and f.get("createable") and not f.get("nillable")
                and not f.get("defaultedOnCreate") and name not in mapped]
    problems = [f"no field {missing} (the object has {sorted(fields)})"] if missing else []
    problems += [f"fields the integration user cannot write {locked}"] if locked else []
    problems += [f"required fields {required} are not mapped, so Salesforce would refuse every new record"] \
        if required else []
    return problems


def _query_chunks(values: list[Any]) -> list[list[Any]]:
    chunks: list[list[Any]] = []
    size = 0
    for value in values:
        length = len(text(value))
        if not chunks or len(chunks[-1]) >= COLLECTION_LIMIT or size + length > QUERY_CHARS:
            chunks.append([])
            size = 0
        chunks[-1].append(value)
        size += length + 4
    return chunks


def _request_limit(reply: Reply) -> str | None:
    """The message of a 403 ``REQUEST_LIMIT_EXCEEDED`` (None: the answer is none)."""
    errors = reply.body if reply.status == 403 and isinstance(reply.body, list) else []
    return next((str(e.get("message")) for e in errors
                 if isinstance(e, dict) and e.get("errorCode") == "REQUEST_LIMIT_EXCEEDED"), None)
