"""HTTP / webhook destination: JSON batches POSTed to an API — the REST destination's first preset.

Wire format (one request per batch)::

    POST <url>
    {"records": [{"op": "upsert", "key": {"id": 1}, "data": {"id": 1, "name": "ann"}},
                 {"op": "delete", "key": {"id": 2}, "data": {"id": 2}}]}

How responses are read:

* 2xx — delivered, except the records the body reports as failed. The body's first list under one
  of the ``record_errors`` fields (default ``["errors", "results"]``; ``[]`` turns parsing off) is
  read: either only the failures, ``{"errors": [{"index": 3, "error": "email invalid"}]}``, or one
  result per record, ``{"results": [{"index": 0, "status": "ok"}, {"index": 1, "status": "error",
  "error": "busy", "retryable": true}]}``. An item with an ``error`` (or ``status: error``) is a
  failure of the record at ``index`` (its position in the batch; for a full result list, the
  item's own position by default). A failed record is rejected into the ledger, or retried when
  ``retryable`` is true.
* 408, 429, 5xx, connection errors and timeouts — transient: the core retries the batch with
  backoff, waiting ``Retry-After`` (seconds or an HTTP date) when the server sends one.
* 401/403 (credentials), 404/405 (wrong URL or method) — the destination is unusable: the sync fails.
* 3xx — a 307/308 to the same origin is followed with the same method and body; any other redirect
  fails the sync naming the status and the ``Location``: nothing of the batch counts as delivered.
* Other 4xx — per-record errors from the body when present, else every record of the batch is
  rejected with the status and the start of the body.

A record whose text is not UTF-8 is rejected before the request (JSON cannot carry it as it is).

Connection: an Airflow HTTP connection gives the base URL (``schema://host:port``), basic auth
(login/password; ``auth_type: bearer`` sends the password as a bearer token instead) and headers:
its extras, the Airflow HttpHook convention, or an extra named ``headers``. Extras and password are
secrets and reach the executors only through the environment.
Options: :class:`HttpOptions` — ``url`` (full) or ``endpoint`` (joined to the connection's base URL),
``method``, ``headers`` (non-secret ones), ``timeout``, ``record_errors``, ``verify``.

As a preset (:mod:`spark_jobs.sinks.rest`): one ``per: batch`` operation for every destination
operation, the response rules above as :class:`~spark_jobs.contract.rest.RestResponse` data, and one
hook, :meth:`HttpSink.render_body`, which joins the JSON Spark already wrote for each key and row.
"""

from __future__ import annotations

import json

from spark_jobs.contract.destinations import HttpOptions
from spark_jobs.contract.rest import REST_OPERATIONS, RestOperation, RestOptions, RestResponse
from spark_jobs.errors import ConfigError
from spark_jobs.sinks.base import SinkCapabilities
from spark_jobs.sinks.rest import RestRequest, RestSink
from spark_jobs.sinks.rest.transport import connection_url


class HttpSink(RestSink):
    name = "http"
    capabilities = SinkCapabilities(wants_json=True, paces_requests=True)
    options_class = HttpOptions
    options: HttpOptions

    def rest_options(self) -> RestOptions:
        options = self.options
        url = options.url or connection_url(self.config.connection, options.endpoint)
        if not url:
            raise ConfigError("The http destination needs 'url', or 'endpoint' with an HTTP connection")
        fields = [options.record_errors] if isinstance(options.record_errors, str) else options.record_errors
        response = RestResponse(records=[json.dumps(field) for field in fields],  # JMESPath quoted identifiers
                                error=None)
        batch = RestOperation(method=options.method, url=url, per="batch")
        return RestOptions(operations=dict.fromkeys(REST_OPERATIONS, batch), headers=options.headers,
                           timeout=options.timeout, verify=options.verify, response=response)

    def render_body(self, request: RestRequest) -> bytes:
        """The request body, assembled from the JSON Spark already wrote for each key and row: one
        vectorised string join per batch, no per-record serialisation in Python."""
        import pyarrow.compute as pc

        table = self.as_batch(request.records).table
        items = pc.binary_join_element_wise('{"op":"', table["_op"], '","key":', table["_key_json"], ',"data":',
                                            table["_data_json"], "}", "")
        return ('{"records":[' + ",".join(items.to_pylist()) + "]}").encode()
