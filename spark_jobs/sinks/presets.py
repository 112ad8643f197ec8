"""The destinations that are data only: a built-in destination whose record
(:mod:`spark_jobs.contract.catalogue`) describes its requests (``rest``) needs no sink class written for
it — :func:`data_preset` makes one from the record, a :class:`~spark_jobs.sinks.rest.RestSink` whose
REST description is the record's function of the sync's options and connection. The ``http`` webhook
is one (:data:`HttpSink`, the name its entry point gives).

Wire format of ``http`` (one request per batch)::

    POST <url>
    {"records": [{"op": "upsert", "change": "insert", "key": {"id": 1}, "data": {"id": 1, "name": "ann"}},
                 {"op": "delete", "change": "delete", "key": {"id": 2}, "data": {"id": 2}}]}

How its responses are read: a 2xx delivers the batch but the records its body reports as failed (the
first list under one of ``record_errors``: either only the failures, ``{"errors": [{"index": 3, "error":
"email invalid"}]}``, or one result per record, ``{"results": [{"index": 1, "status": "error", "error":
"busy", "retryable": true}]}``); 408, 429, 5xx, timeouts and refused connections are retried
(``Retry-After`` honoured); 401/403/404/405 fail the sync; redirects are followed only as 307/308 to the
same origin; other 4xx reject the batch's records with the status and the body's start (the REST core,
:mod:`spark_jobs.sinks.rest`). Connection: an Airflow HTTP connection (base URL, basic auth or
``auth_type: bearer``, headers from its extras).
"""

from __future__ import annotations

from spark_jobs.contract.catalogue import HTTP
from spark_jobs.contract.destination_record import BuiltInDestination
from spark_jobs.contract.rest import RestOptions
from spark_jobs.sinks.base import SinkCapabilities
from spark_jobs.sinks.rest import RestSink


def data_preset(record: BuiltInDestination) -> type[RestSink]:
    """The sink of a data-only destination: the REST core with the record's requests."""
    describe = record.rest
    if describe is None:
        raise TypeError(f"the {record.name} destination is no data-only preset: its record describes no requests")

    def rest_options(self: RestSink) -> RestOptions:
        return describe(self.options, self.config.connection)

    name = "".join(part.title() for part in record.name.split("_")) + "Sink"
    return type(name, (RestSink,), {"record": record, "capabilities": SinkCapabilities(**record.capabilities),
                                    "rest_options": rest_options, "__module__": __name__,
                                    "__doc__": f"The {record.name} destination, made from its record."})


HttpSink = data_preset(HTTP)
