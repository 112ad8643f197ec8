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

Connection: Airflow's ``salesforce`` connection type, OAuth 2.0 client credentials flow — extras
``consumer_key`` and ``consumer_secret`` (the connected app's), and ``instance_url`` (the org's My
Domain URL, e.g. ``https://acme.my.salesforce.com``) or ``domain`` (``acme.my``, as simple-salesforce
reads it: ``https://acme.my.salesforce.com``); ``version`` sets the API version unless the destination's
``api_version`` does. The token is fetched once per Spark worker and again when Salesforce answers 401
(a session has no announced lifetime). A used-up daily API allocation (403 ``REQUEST_LIMIT_EXCEEDED``)
fails the sync: it does not come back within a run.
"""

from __future__ import annotations

import csv
import io
import threading
import time
from collections import defaultdict
from typing import Any, Callable, ClassVar, Sequence
from urllib.parse import urlencode

from spark_jobs.contract.saas import SalesforceOptions
from spark_jobs.errors import ConfigError, DestinationError, RetryableError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, Retry, Sink, SinkCapabilities, SinkConfig
from spark_jobs.sinks.saas.client import ApiClient, SchemaCache
from spark_jobs.sinks.saas.values import Unconvertible, as_date, boolean, exact_decimal, iso_utc, json_number, \
    number_text, text

COLLECTION_LIMIT = 200
#: Characters of External ID values one SOQL lookup carries (its URL stays far below Salesforce's limit).
QUERY_CHARS = 8000
DEFAULT_VERSION = "62.0"
NUMERIC = frozenset({"double", "currency", "percent"})
GONE = frozenset({"ENTITY_IS_DELETED"})
TERMINAL = frozenset({"JobComplete", "Failed", "Aborted"})
#: Sessions of this process, by (token URL, client id): every lane shares one.
_SESSIONS: dict[tuple[str, str], str] = {}
_LOCK = threading.Lock()
#: Each object's fields, shared by the lanes and partitions of a Spark worker.
_DESCRIBED: SchemaCache[dict[str, dict[str, Any]]] = SchemaCache()

Convert = Callable[[Any], Any]


def _integer(value: Any) -> int:
    number = exact_decimal(value)
    if number != number.to_integral_value():
        raise Unconvertible(f"{value!r} is not a whole number")
    return int(number)


def json_converter(field: dict[str, Any]) -> Convert:
    """How a value goes into a field of this type in a JSON body (the module docstring)."""
    kind = field.get("type")
    write: Convert = boolean if kind == "boolean" else _integer if kind == "int" else \
        json_number if kind in NUMERIC else (lambda v: as_date(v).isoformat()) if kind == "date" else \
        iso_utc if kind == "datetime" else text
    return lambda value: None if value is None else write(value)


def csv_cell(value: Any) -> str:
    """A converted value as a Bulk API 2.0 CSV cell: null (and empty text, which Salesforce keeps as
    null) is ``#N/A``, an empty cell would leave the field unchanged."""
    if value is None or value == "":
        return "#N/A"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number_text(value)
    return text(value)


def soql_literal(value: Any, field: dict[str, Any]) -> str:
    """A value as a SOQL literal for a field of this type (text quoted, ``\\`` and ``'`` escaped)."""
    if field.get("type") in NUMERIC or field.get("type") == "int":
        return number_text(value)
    return "'" + text(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


class SalesforceSink(Sink):
    name = "salesforce"
    capabilities = SinkCapabilities(batch_size=10_000)
    options_class = SalesforceOptions
    options: SalesforceOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        options = self.options
        if config.key_fields != [options.external_id_field]:
            raise ConfigError(
                f"The salesforce destination matches records on external_id_field {options.external_id_field!r}, "
                f"so the sync's key must be that one field; it is {config.key_fields}. Map the key column to it "
                f"(field_mapping={{'<key column>': '{options.external_id_field}'}}).")
        extra = config.connection_extra()
        self.client_id, self.secret = str(extra.get("consumer_key") or ""), str(extra.get("consumer_secret") or "")
        if not self.client_id or not self.secret:
            raise ConfigError("The salesforce destination signs in with the OAuth 2.0 client credentials flow: its "
                              "connection needs the extras consumer_key and consumer_secret (the connected app's).")
        self.version = str(extra.get("version") or DEFAULT_VERSION) if options.api_version is None \
            else options.api_version
        self.client = ApiClient("salesforce", _instance_url(extra), self._auth, renew=self._renew,
                                secrets=[self.secret])
        self.fields: dict[str, dict[str, Any]] = {}

    # --- auth ---------------------------------------------------------------------------------------
    @property
    def _session_key(self) -> tuple[str, str]:
        return (self.client.base_url, str(self.client_id))

    def _auth(self) -> dict[str, str]:
        with _LOCK:
            token = _SESSIONS.get(self._session_key)
            if token is None:
                token = _SESSIONS[self._session_key] = self._sign_in()
        self.client.secrets = [self.secret, token]
        return {"Authorization": f"Bearer {token}"}

    def _renew(self, sent: dict[str, str]) -> bool:
        with _LOCK:
            if sent.get("Authorization") == f"Bearer {_SESSIONS.get(self._session_key)}":
                _SESSIONS.pop(self._session_key, None)
        return True

    def _sign_in(self) -> str:
        form = {"grant_type": "client_credentials", "client_id": self.client_id, "client_secret": self.secret}
        response = self.client.request("POST", "/services/oauth2/token", data=form, ok=(200, 400), signed=False)
        body = _json(response)
        token = body.get("access_token") if isinstance(body, dict) else None
        if response.status_code != 200 or not token:
            raise DestinationError(self.client.redact(
                f"Salesforce refused the client credentials sign-in: HTTP {response.status_code} "
                f"{body.get('error', '') if isinstance(body, dict) else ''} "
                f"{body.get('error_description', '') if isinstance(body, dict) else response.text[:200]} (check "
                "the connection's consumer_key and consumer_secret, and that the connected app has the client "
                "credentials flow enabled with a run-as user)"))
        return str(token)

    @property
    def _data(self) -> str:
        return f"/services/data/v{self.version}"

    # --- driver side -------------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        """Fail before anything is sent when the mapping does not fit the object (module docstring)."""
        fields, options = self._describe(fresh=True), self.options
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
        return _DESCRIBED.get((self.client.base_url, self.options.object), self._read_describe, fresh)

    def _read_describe(self) -> dict[str, dict[str, Any]]:
        response = self.client.request("GET", f"{self._data}/sobjects/{self.options.object}/describe", ok=(200,))
        if response.status_code != 200:
            raise DestinationError(f"Salesforce has no object {self.options.object!r} (or the integration user "
                                   f"cannot see it): HTTP {response.status_code} {_errors(response)}")
        return {f["name"]: f for f in response.json().get("fields", [])}

    # --- executor side -----------------------------------------------------------------------------
    def open(self) -> None:
        self.client.open()
        self.fields = self._describe()

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
            chosen = [every[i] for i in positions]
            for i, outcome in zip(positions, self.OPERATIONS[op](self, chosen)):
                outcomes[i] = outcome
        return outcomes

    def _bulk(self, records: Sequence[ChangeRecord]) -> bool:
        return len(records) >= self.options.bulk_threshold

    def _upsert(self, records: list[ChangeRecord]) -> list[Outcome]:
        if self._bulk(records):
            return self._bulk_upsert(records)
        outcomes: list[Outcome] = []
        for start in range(0, len(records), COLLECTION_LIMIT):
            outcomes += self._collection_upsert(records[start:start + COLLECTION_LIMIT])
        return outcomes

    def _insert(self, records: list[ChangeRecord]) -> list[Outcome]:
        found = self._lookup(records)
        return self._some(records, [self._key(r) not in found for r in records])

    def _update(self, records: list[ChangeRecord]) -> list[Outcome]:
        found = self._lookup(records)
        return self._some(records, [self._key(r) in found for r in records])

    def _some(self, records: list[ChangeRecord], send: list[bool]) -> list[Outcome]:
        chosen = [r for r, s in zip(records, send) if s]
        results = iter(self._upsert(chosen) if chosen else [])
        return [next(results) if s else None for s in send]

    def _key(self, record: ChangeRecord) -> str:
        return text(record.key[self.options.external_id_field])

    def _converted(self, record: ChangeRecord) -> dict[str, Any]:
        values = {}
        for name, value in record.data.items():
            try:
                values[name] = json_converter(self.fields[name])(value)
            except Unconvertible as exc:
                raise Unconvertible(f"{name}: {exc}") from None
        return values

    # --- sObject Collections ------------------------------------------------------------------------
    def _collection_upsert(self, records: list[ChangeRecord]) -> list[Outcome]:
        outcomes: list[Outcome] = [None] * len(records)
        body, sent = [], []
        for i, record in enumerate(records):
            try:
                body.append({"attributes": {"type": self.options.object}, **self._converted(record)})
                sent.append(i)
            except Unconvertible as exc:
                outcomes[i] = Rejected(f"salesforce: {exc}")
        if body:
            path = f"{self._data}/composite/sobjects/{self.options.object}/{self.options.external_id_field}"
            response = self.client.request("PATCH", path, json={"allOrNone": self.options.all_or_none,
                                                                "records": body}, ok=(200,))
            for i, outcome in zip(sent, _results(response, len(sent))):
                outcomes[i] = outcome
        return outcomes

    def _lookup(self, records: list[ChangeRecord]) -> dict[str, str]:
        """The Id of each record that exists, by External ID (SOQL, a few hundred values a query)."""
        ext = self.options.external_id_field
        found: dict[str, str] = {}
        for chunk in _query_chunks([self._key(r) for r in records]):
            literals = ", ".join(soql_literal(v, self.fields[ext]) for v in chunk)
            path = f"{self._data}/query?" + urlencode(
                {"q": f"SELECT Id, {ext} FROM {self.options.object} WHERE {ext} IN ({literals})"})
            while path:
                response = self.client.request("GET", path, ok=(200,))
                if response.status_code != 200:
                    raise DestinationError(f"salesforce: looking records up by {ext} failed: HTTP "
                                           f"{response.status_code} {_errors(response)}")
                body = response.json()
                found.update({text(r[ext]): r["Id"] for r in body.get("records", [])})
                path = body.get("nextRecordsUrl") or ""
        return found

    def _delete(self, records: list[ChangeRecord]) -> list[Outcome]:
        found = self._lookup(records)
        ids = [found.get(self._key(r)) for r in records]
        present = sorted({i for i in ids if i})
        refused = self._bulk_delete(present) if self._bulk(records) else self._collection_delete(present)
        return [refused.get(i) if i else None for i in ids]

    def _collection_delete(self, ids: list[str]) -> dict[str, Outcome]:
        refused: dict[str, Outcome] = {}
        for start in range(0, len(ids), COLLECTION_LIMIT):
            chunk = ids[start:start + COLLECTION_LIMIT]
            query = urlencode({"ids": ",".join(chunk), "allOrNone": "false"})
            response = self.client.request("DELETE", f"{self._data}/composite/sobjects?{query}", ok=(200,))
            refused.update({i: o for i, o in zip(chunk, _results(response, len(chunk))) if o is not None})
        return refused

    # --- Bulk API 2.0 -------------------------------------------------------------------------------
    def _bulk_upsert(self, records: list[ChangeRecord]) -> list[Outcome]:
        outcomes: list[Outcome] = [None] * len(records)
        rows, keys = [], []
        for i, record in enumerate(records):
            try:
                rows.append([csv_cell(v) for v in self._converted(record).values()])
                keys.append(i)
            except Unconvertible as exc:
                outcomes[i] = Rejected(f"salesforce: {exc}")
        if rows:
            header = list(records[keys[0]].data)
            failed = self._run_job({"operation": "upsert", "externalIdFieldName": self.options.external_id_field},
                                   header, rows)
            ext = self.options.external_id_field
            by_key = {self._key(records[i]): i for i in keys}
            for row in failed:
                if row.get(ext) not in by_key:
                    raise DestinationError(f"salesforce: a Bulk API 2.0 job reported a failed record whose {ext} "
                                           f"{row.get(ext)!r} was not sent: {row.get('sf__Error')}")
                outcomes[by_key[row[ext]]] = Rejected(f"salesforce: {row['sf__Error']}")
        return outcomes

    def _bulk_delete(self, ids: list[str]) -> dict[str, Outcome]:
        if not ids:
            return {}
        failed = self._run_job({"operation": "delete"}, ["Id"], [[i] for i in ids])
        return {row["Id"]: Rejected(f"salesforce: {row['sf__Error']}") for row in failed
                if row["sf__Error"].split(":", 1)[0] not in GONE}

    def _run_job(self, job: dict[str, Any], header: list[str], rows: list[list[str]]) -> list[dict[str, str]]:
        """One Bulk API 2.0 ingest job of ``rows``: its failed records (``failedResults/``, as dicts)."""
        created = self.client.request("POST", f"{self._data}/jobs/ingest", ok=(200,), json={
            "object": self.options.object, "contentType": "CSV", "lineEnding": "LF", "columnDelimiter": "COMMA",
            **job})
        if created.status_code != 200:
            raise DestinationError(f"salesforce: creating a Bulk API 2.0 job failed: HTTP {created.status_code} "
                                   f"{_errors(created)}")
        job_id = created.json()["id"]
        url = f"{self._data}/jobs/ingest/{job_id}"
        data = io.StringIO()
        writer = csv.writer(data, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
        self._expect(self.client.request("PUT", f"{url}/batches", data=data.getvalue().encode(), ok=(201,),
                                         headers={"Content-Type": "text/csv"}), job_id, "uploading its data")
        self._expect(self.client.request("PATCH", url, json={"state": "UploadComplete"}, ok=(200,)), job_id,
                     "closing it")
        info = self._wait(url, job_id)
        if info["state"] != "JobComplete":
            raise DestinationError(f"salesforce: Bulk API 2.0 job {job_id} {info['state']}: "
                                   f"{info.get('errorMessage', 'no reason given')}")
        failed = self.client.request("GET", f"{url}/failedResults/", ok=(200,))
        self._expect(failed, job_id, "reading its failed records")
        return list(csv.DictReader(io.StringIO(failed.text)))

    def _wait(self, url: str, job_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.options.bulk_timeout
        while True:
            response = self.client.request("GET", url, ok=(200,))
            self._expect(response, job_id, "polling it")
            info: dict[str, Any] = response.json()
            if info["state"] in TERMINAL:
                return info
            if time.monotonic() >= deadline:
                self.client.request("PATCH", url, json={"state": "Aborted"}, ok=(200,))
                raise RetryableError(f"salesforce: Bulk API 2.0 job {job_id} still {info['state']} after "
                                     f"{self.options.bulk_timeout:g}s: aborted, the batch is sent again")
            time.sleep(self.options.bulk_poll_interval)

    def _expect(self, response: Any, job_id: str, doing: str) -> None:
        if response.status_code not in (200, 201):
            raise DestinationError(f"salesforce: Bulk API 2.0 job {job_id}: {doing} failed: HTTP "
                                   f"{response.status_code} {_errors(response)}")

    OPERATIONS: ClassVar[dict[str, Callable[["SalesforceSink", list[ChangeRecord]], list[Outcome]]]] = {
        "upsert": _upsert, "insert": _insert, "update": _update, "delete": _delete}


def _instance_url(extra: dict[str, Any]) -> str:
    if extra.get("instance_url"):
        return str(extra["instance_url"]).rstrip("/")
    if extra.get("domain"):
        return f"https://{extra['domain']}.salesforce.com"
    raise ConfigError("The salesforce destination needs the org's URL: set the connection's instance_url (your My "
                      "Domain URL, e.g. https://acme.my.salesforce.com) or domain (e.g. acme.my).")


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


def _query_chunks(values: list[str]) -> list[list[str]]:
    chunks: list[list[str]] = []
    size = 0
    for value in values:
        if not chunks or len(chunks[-1]) >= COLLECTION_LIMIT or size + len(value) > QUERY_CHARS:
            chunks.append([])
            size = 0
        chunks[-1].append(value)
        size += len(value) + 4
    return chunks


def _results(response: Any, count: int) -> list[Outcome]:
    """Per record, from a sObject Collections answer (a list of ``{success, errors}`` in order); a
    request refused whole rejects every record with Salesforce's errors."""
    body = _json(response)
    if response.status_code != 200 or not isinstance(body, list) or len(body) != count:
        return [Rejected(f"salesforce: HTTP {response.status_code}: {_errors(response)}")] * count
    return [_outcome(item) for item in body]


def _outcome(item: dict[str, Any]) -> Outcome:
    if item.get("success"):
        return None
    errors = item.get("errors") or [{}]
    codes = {e.get("statusCode") for e in errors}
    if codes <= GONE:
        return None
    reason = "; ".join(f"{e.get('statusCode')}: {e.get('message')}" + (f" ({', '.join(e['fields'])})"
                       if e.get("fields") else "") for e in errors)
    if codes == {"ALL_OR_NONE_OPERATION_ROLLED_BACK"}:
        return Retry(f"salesforce: {reason}")
    return Rejected(f"salesforce: {reason}")


def _json(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _errors(response: Any) -> str:
    body = _json(response)
    if isinstance(body, list):
        return "; ".join(f"{e.get('errorCode')}: {e.get('message')}" for e in body if isinstance(e, dict))
    return str(response.text[:300])
