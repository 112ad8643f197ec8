"""REST destinations: any JSON API by configuration, and the base the built-in SaaS destinations are
presets of.

The pieces, one idea each: the options (:mod:`spark_jobs.contract.rest`, checked at DAG parse time)
and the templates' sandbox (:mod:`spark_jobs.contract.templating`) in the contract; here
:mod:`.transport` (URLs, connection headers, redirects, what a failed connection means),
:mod:`.auth` (basic, bearer, API key, OAuth2 client credentials), :mod:`.rendering` (template
context, URL, headers, body, idempotency key), :mod:`.responses` (statuses and per-record results
into outcomes) and :mod:`.sink` (:class:`RestSink`: records to requests).

Building a preset
=================
A preset is a destination whose requests are known: data, plus at most a small hook. A built-in one
is one record (:mod:`spark_jobs.contract.catalogue`): its typed options (a
:class:`~spark_jobs.contract.sink_options.SinkOptions` subclass in ``spark_jobs/contract/``, checked by
the Airflow side at DAG parse time), its connection, lineage and catalogue entry, and either

1. its requests as data — a function of its options and connection giving the
   :class:`~spark_jobs.contract.rest.RestOptions` (operations, response reading, auth): the sink is made
   from the record (:mod:`spark_jobs.sinks.presets`; the ``http`` webhook), or
2. a :class:`RestSink` subclass naming the record (``record = ...``), with its ``capabilities`` (batch
   size = the API's records per request, ``max_concurrency``...), overriding :meth:`RestSink.rest_options`
   and the hooks below (the SaaS presets, :mod:`spark_jobs.sinks.saas`).

Either is registered in the ``airflow_reverse_etl.sinks`` entry point group under the record's name.

Optional hooks, for what configuration cannot say:

* :meth:`RestSink.render_body` ``(request) -> bytes | None`` — build the body another way (Salesforce's
  records with their ``attributes``);
* :meth:`RestSink.read_response` ``(request, response) -> [None | Rejected | Retry]`` — read a
  vendor's response (raise :class:`~spark_jobs.errors.RetryableError` for a transient failure of the
  whole request, :class:`~spark_jobs.errors.DestinationError` to fail the sync);
* :meth:`~spark_jobs.sinks.base.Sink.prepare` ``(schema)`` — check the destination on the driver
  before anything is sent (call ``super().prepare(schema)``, which renders every template once for a
  made-up record and checks the headers every request carries: what fails there fails the sync).

A record whose values a template cannot place (:class:`~spark_jobs.contract.templating.TemplateValueError`)
is rejected alone, as ``Rejected(reason, sent=False)``; a response is read so that every record of the
request gets one outcome it proves (:mod:`.responses`).

A :class:`~spark_jobs.sinks.rest.rendering.RestRequest` carries the operation, the records, the
template context and the rendered method, URL, headers and body. The shared core does the rest:
batching, retries with backoff and ``Retry-After``, the reject ledger, requests-per-second and
in-flight limits for the whole sync, redirects, secrets kept out of messages.

:mod:`spark_jobs.sinks.presets` makes the ``http`` webhook, the first preset, from its record.
"""

from spark_jobs.sinks.rest.rendering import RestRequest
from spark_jobs.sinks.rest.sink import RestSink

__all__ = ["RestRequest", "RestSink"]
