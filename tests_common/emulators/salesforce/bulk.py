"""The Salesforce emulator's Bulk API 2.0 ingest jobs, a part of :class:`SalesforceApi
<tests_common.emulators.salesforce.SalesforceApi>` (its routes ``/services/data/vXX.X/jobs/ingest...``).

Bulk API 2.0 ingest (Bulk API 2.0 Developer Guide: "Create a Job", "Upload Job Data", "Close or Abort a
Job", "Get Job Info", "Get Job Successful/Failed Record Results", "Prepare CSV Files"): operations
insert, update, upsert (``externalIdFieldName`` required, else 400 ``INVALIDJOB``), delete and hardDelete
(a single ``Id`` column); ``contentType`` CSV, ``lineEnding`` LF or CRLF, ``columnDelimiter`` COMMA
(others accepted). Job data is uploaded once, while the job is ``Open`` (else 409 ``INVALIDJOBSTATE``);
``PATCH {"state": "UploadComplete"}`` queues it, ``{"state": "Aborted"}`` aborts it; the job then shows
``InProgress`` and later ``JobComplete`` (or ``Failed`` with ``errorMessage``: a header naming an
unknown field — "InvalidBatch : Field name not found : X" —, line endings that do not match the job —
"ClientInputError : LineEnding is invalid on user data. Current LineEnding setting is LF"). In CSV an
empty value leaves the field unchanged and ``#N/A`` sets it to null; booleans are true/false, dates
``YYYY-MM-DD``, datetimes ISO 8601. ``failedResults/`` is CSV ``"sf__Id","sf__Error",<the uploaded
columns>`` with ``sf__Error`` as ``STATUS_CODE:message:fields --``; ``successfulResults/`` is
``"sf__Id","sf__Created",<columns>``; "The order of records in the response is not guaranteed to match
the ordering of records in the original job data" — this emulator shuffles them (seeded), so a client
that relies on order fails here.
"""

from __future__ import annotations

import csv
import io
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from tests_common.emulators.salesforce.schema import RecordError, SObjectType, Unreadable, now, read_csv, sf_error
from tests_common.http_wire import BadJson, Reply, Request

DELIMITERS = {"COMMA": ",", "TAB": "\t", "PIPE": "|", "SEMICOLON": ";", "CARET": "^", "BACKQUOTE": "`"}


@dataclass
class Job:
    id: str
    object: str
    operation: str
    external_id_field: str | None
    line_ending: str
    delimiter: str
    version: str
    state: str = "Open"
    data: bytes | None = None
    closed_at: float = 0.0
    error_message: str | None = None
    succeeded: list[dict[str, str]] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "operation": self.operation, "object": self.object, "createdById": "005000000000001AAA",
            "createdDate": now(), "systemModstamp": now(), "state": self.state, "concurrencyMode": "Parallel",
            "contentType": "CSV", "apiVersion": float(self.version), "jobType": "V2Ingest",
            "contentUrl": f"services/data/v{self.version}/jobs/ingest/{self.id}/batches",
            "lineEnding": self.line_ending, "columnDelimiter": self.delimiter,
            "numberRecordsProcessed": len(self.succeeded) + len(self.failed),
            "numberRecordsFailed": len(self.failed), "retries": 0, "totalProcessingTime": 0,
        }
        if self.external_id_field:
            out["externalIdFieldName"] = self.external_id_field
        if self.error_message:
            out["errorMessage"] = self.error_message
        return out


DELIMITERS = {"COMMA": ",", "TAB": "\t", "PIPE": "|", "SEMICOLON": ";", "CARET": "^", "BACKQUOTE": "`"}


class BulkIngest:
    """The Bulk API 2.0 handlers of :class:`~tests_common.emulators.salesforce.SalesforceApi`, which
    gives them its objects, records and lock."""

    jobs: dict[str, Job]
    objects: dict[str, SObjectType]
    processing_delay: float
    lock: Any
    #: what the API gives its parts: the record operations of sObject Collections, and results in no order
    shuffled: Any
    _delete_error: Any
    _remove: Any
    _by_external_id: Any
    _record_errors: Any
    _create: Any

    def bulk_routes(self, data: str) -> list[tuple[str, str, Any]]:
        job = f"{data}/jobs/ingest/(?P<job>[^/]+)"
        return [("POST", f"{data}/jobs/ingest/?", self._create_job), ("PUT", f"{job}/batches/?", self._upload),
                ("PATCH", f"{job}/?", self._set_state), ("GET", f"{job}/?", self._job_info),
                ("GET", f"{job}/(?P<kind>failedResults|successfulResults)/?", self._results),
                ("DELETE", f"{job}/?", self._delete_job)]

    def _create_job(self, request: Request) -> Reply:
        try:
            body = request.json()
        except BadJson:
            return sf_error(400, "INVALIDJOB", "Unable to parse the job request")
        if not isinstance(body, dict):
            return sf_error(400, "INVALIDJOB", "Unable to parse the job request")
        problem = job_problem(body, self.objects)
        if problem:
            return sf_error(400, "INVALIDJOB", problem)
        job = Job(id="750" + secrets.token_hex(6).upper()[:12] + "AAA", object=body["object"],
                  operation=body["operation"], external_id_field=body.get("externalIdFieldName"),
                  line_ending=body.get("lineEnding", "LF"), delimiter=body.get("columnDelimiter", "COMMA"),
                  version=request.params["version"])
        with self.lock:
            self.jobs[job.id] = job
        return Reply(200, job.info())

    def _job(self, request: Request) -> Job | Reply:
        with self.lock:
            job = self.jobs.get(request.params["job"])
        return job if job is not None else sf_error(404, "NOT_FOUND", "The requested resource does not exist")

    def _upload(self, request: Request) -> Reply:
        job = self._job(request)
        if isinstance(job, Reply):
            return job
        if not (request.header("Content-Type") or "").startswith("text/csv"):
            return sf_error(400, "INVALIDBATCH", "Content-Type must be text/csv")
        with self.lock:
            if job.state != "Open" or job.data is not None:
                uploaded = "was" if job.data is not None else "was not"
                return sf_error(409, "INVALIDJOBSTATE",
                                f"Job {job.id} is not Open for data: it is {job.state} and data {uploaded} uploaded")
            job.data = request.body
        return Reply(201)

    def _set_state(self, request: Request) -> Reply:
        job = self._job(request)
        if isinstance(job, Reply):
            return job
        try:
            state = (request.json() or {}).get("state")
        except BadJson:
            state = None
        with self.lock:
            if state == "Aborted" and job.state in ("Open", "UploadComplete", "InProgress"):
                job.state = "Aborted"
            elif state == "UploadComplete" and job.state == "Open":
                job.state, job.closed_at = "UploadComplete", time.monotonic()
            else:
                return sf_error(409, "INVALIDJOBSTATE", f"Cannot move job {job.id} from {job.state} to {state}")
            return Reply(200, job.info())

    def _job_info(self, request: Request) -> Reply:
        job = self._advanced(request)
        return job if isinstance(job, Reply) else Reply(200, job.info())

    def _advanced(self, request: Request) -> Job | Reply:
        """The request's job, moved on as time has passed (its processing runs when it is looked at)."""
        job = self._job(request)
        if not isinstance(job, Reply):
            with self.lock:
                self._advance(job)
        return job

    def _advance(self, job: Job) -> None:
        if job.state not in ("UploadComplete", "InProgress"):
            return
        if time.monotonic() - job.closed_at < self.processing_delay:
            job.state = "InProgress"
            return
        job.state = "JobComplete"
        problem = self._process(job)
        if problem:
            job.state, job.error_message = "Failed", problem

    def _process(self, job: Job) -> str | None:
        """Apply the job's data; a job-level problem (the job fails) as its message."""
        if not job.data:
            return "InvalidBatch : No data was uploaded for this job"
        text = job.data.decode("utf-8")
        expected = "\r\n" if job.line_ending == "CRLF" else "\n"
        if ("\r\n" in text) != (expected == "\r\n"):
            return ("ClientInputError : LineEnding is invalid on user data. Current LineEnding setting is "
                    f"{job.line_ending}")
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=DELIMITERS[job.delimiter]))
        if not rows:
            return "InvalidBatch : No data was uploaded for this job"
        obj = self.objects[job.object]
        job.columns = rows[0]
        unknown = [c for c in rows[0] if c not in obj.fields]
        if unknown:
            return f"InvalidBatch : Field name not found : {unknown[0]}"
        key = "Id" if job.operation in ("delete", "hardDelete") else job.external_id_field
        if key and key not in rows[0]:
            return f"InvalidBatch : Field name not provided: {key}"
        seen: set[str] = set()
        for values in rows[1:]:
            row = dict(zip(rows[0], values))
            self._bulk_row(job, obj, row, seen)
        return None

    def _bulk_row(self, job: Job, obj: SObjectType, row: dict[str, str], seen: set[Any]) -> None:
        if job.operation in ("delete", "hardDelete"):
            error = self._delete_error(row["Id"])
            if error is None:
                self._remove(row["Id"], None)
                job.succeeded.append({"sf__Id": row["Id"], "sf__Created": "false", **row})
            else:
                job.failed.append({"sf__Id": "", "sf__Error": error.csv(), **row})
            return
        outcome = self._bulk_upsert(job, obj, row, seen)
        if isinstance(outcome, RecordError):
            job.failed.append({"sf__Id": "", "sf__Error": outcome.csv(), **row})
        else:
            job.succeeded.append({"sf__Id": outcome[0], "sf__Created": str(outcome[1]).lower(), **row})

    def _bulk_upsert(self, job: Job, obj: SObjectType, row: dict[str, str], seen: set[Any]
                     ) -> RecordError | tuple[str, bool]:
        ext = job.external_id_field or ""
        try:
            values = {k: read_csv(obj.fields[k], v) for k, v in row.items() if v != ""}
        except Unreadable as exc:
            name = str(exc)
            return RecordError("INVALID_TYPE_ON_FIELD_IN_RECORD",
                               f"{obj.fields[name].label}: value not of required type: {row[name]}", (name,))
        key = values.get(ext)
        if key is None:
            return RecordError("MISSING_ARGUMENT", f"{ext} not specified", (ext,))
        if obj.fields[ext].match_key(key) in seen:
            return RecordError("DUPLICATE_VALUE", f"Duplicate external id specified: {row[ext]}", (ext,))
        seen.add(obj.fields[ext].match_key(key))
        existing = self._by_external_id(obj.name, ext, key)
        errors = self._record_errors(obj, values, existing)
        if errors:
            return errors[0]
        if existing is None:
            return self._create(obj.name, values), True
        existing.update(values, LastModifiedDate=now())
        return existing["Id"], False

    def _results(self, request: Request) -> Reply:
        job = self._advanced(request)
        if isinstance(job, Reply):
            return job
        with self.lock:
            if job.state not in ("JobComplete", "Failed", "Aborted"):
                return sf_error(400, "INVALIDJOBSTATE", f"Job {job.id} is {job.state}: results are not available yet")
            failed = request.params["kind"] == "failedResults"
            rows = self.shuffled(job.failed if failed else job.succeeded)
        head = ["sf__Id", "sf__Error" if failed else "sf__Created"] + job.columns
        out = io.StringIO()
        writer = csv.DictWriter(out, head, quoting=csv.QUOTE_ALL, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        return Reply(200, out.getvalue(), content_type="text/csv")

    def _delete_job(self, request: Request) -> Reply:
        job = self._job(request)
        if isinstance(job, Reply):
            return job
        with self.lock:
            if job.state in ("Open", "UploadComplete", "InProgress"):
                return sf_error(400, "INVALIDJOBSTATE", f"Job {job.id} is {job.state}: abort it before deleting it")
            del self.jobs[job.id]
        return Reply(204)


def job_problem(body: dict[str, Any], objects: dict[str, SObjectType]) -> str | None:
    operation, obj = body.get("operation"), objects.get(str(body.get("object")))
    if operation not in ("insert", "update", "upsert", "delete", "hardDelete"):
        return f"Invalid operation: {operation}"
    if obj is None:
        return f"Entity '{body.get('object')}' is not supported by the Bulk API."
    if body.get("contentType", "CSV") != "CSV":
        return "Only CSV is supported"
    if body.get("lineEnding", "LF") not in ("LF", "CRLF") or body.get("columnDelimiter", "COMMA") not in DELIMITERS:
        return "Invalid lineEnding or columnDelimiter"
    ext = body.get("externalIdFieldName")
    if operation == "upsert" and not ext:
        return f"External ID was blank for {obj.name}. An External ID must be specified for upsert."
    if operation == "upsert" and not (ext in obj.fields and obj.fields[ext].external_id):
        return f"The field {ext} is not an external ID field on {obj.name}"
    return None
