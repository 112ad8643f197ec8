"""Driving a SaaS destination (Salesforce, HubSpot, Braze) in the test process, without Spark, the way
the sync job does: the sink built on the driver and checked there (``prepare``), then each partition's
Arrow batches — typed as Spark's ``mapInArrow`` hands them over (``int64`` for a BIGINT, ``decimal128``
for a DECIMAL, ``date32``, ``timestamp[us, UTC]``) — through :func:`spark_jobs.sinks.core.deliver_partition`,
the executors' own entry, with a fresh sink per partition. A few cells of the same matrix go through the
real sync job (tests/spark_jobs/sinks/saas/); this is what makes the rest cheap."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Callable

import pyarrow as pa

from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.sinks.base import Sink, SinkConfig
from spark_jobs.sinks.core import deliver_partition
from spark_jobs.sinks.saas.braze import BrazeSink
from spark_jobs.sinks.saas.hubspot import HubSpotSink
from spark_jobs.sinks.saas.salesforce import SalesforceSink
from tests_common.delivery import Delivered
from tests_common.emulators.braze import BrazeApi
from tests_common.emulators.hubspot import HubSpotApi
from tests_common.emulators.salesforce import SalesforceApi

#: Fast retries: a transient answer is sent again at once (the vendor's own wait still wins).
FAST = {"backoff_initial": 0.01, "backoff_max": 2.0}
META = [pa.field("_op", pa.string()), pa.field("_change", pa.string()), pa.field("_key", pa.string())]


@dataclass
class Destination:
    """One emulated destination as a sync sees it: the sink class and how its config is made."""

    sink: type[Sink]
    options: dict[str, Any]
    secrets: dict[str, str]

    def config(self, key: str, fields: list[str], mode: str) -> SinkConfig:
        return SinkConfig(destination={"type": self.sink.name, **self.options}, key_fields=[key], fields=fields,
                          mode=mode, secrets=self.secrets, table="snapshots/customers", consumer="crm", to_version=1)


def salesforce(api: SalesforceApi, external_id_field: str = "Customer_Id__c", **options: Any) -> Destination:
    """The emulator's Contact with the connected app ``sync-app`` (added here)."""
    api.add_client("sync-app", "sync-secret")
    extra = {"consumer_key": "sync-app", "consumer_secret": "sync-secret", "instance_url": api.login_url}
    return Destination(SalesforceSink, {"object": "Contact", "external_id_field": external_id_field,
                                        "connection": {"conn_type": "salesforce"}, "bulk_poll_interval": 0.02,
                                        **options}, {"extra": json.dumps(extra)})


def hubspot(api: HubSpotApi, id_property: str = "email", **options: Any) -> Destination:
    """The emulator's contacts with the private app token ``pat-sync`` (added here)."""
    api.add_token("pat-sync")
    return Destination(HubSpotSink, {"object_type": "contacts", "id_property": id_property,
                                     "connection": {"host": api.url}, **options}, {"password": "pat-sync"})


def braze(api: BrazeApi, **options: Any) -> Destination:
    """The emulator's workspace with the REST API key ``braze-sync`` (added here)."""
    api.add_key("braze-sync")
    return Destination(BrazeSink, {"connection": {"host": api.url}, **options}, {"password": "braze-sync"})


def change(op: str, key: dict[str, Any], data: dict[str, Any] | None = None, change: str | None = None
           ) -> dict[str, Any]:
    """One operation as a row of the sync's frame: its fields (a delete's others null) and the meta columns."""
    kind = change or ("delete" if op == "delete" else "insert")
    ident = json.dumps(key, default=str, separators=(",", ":"))
    return {**(data or {}), **key, "_op": op, "_change": kind, "_key": ident}


def sync(destination: Destination, schema: pa.Schema, rows: list[dict[str, Any]], mode: str,
         partitions: int = 1, **policy: Any) -> Delivered:
    """``rows`` (:func:`change`) synced to ``destination`` as the job would: prepare on the driver, then
    ``partitions`` partitions, each through ``deliver_partition`` with its own sink. ``schema``: the
    destination fields' Arrow types, the key first."""
    fields = schema.names
    config = destination.config(fields[0], fields, mode)
    destination.sink(config).prepare({f.name: str(f.type) for f in schema})
    full = pa.schema([*schema, *META])
    parts = [rows[i::partitions] for i in range(partitions)]
    stats: dict[str, Any] = {}
    rejects: list[tuple[str, str]] = []
    share = DeliveryPolicy(**{"batch_size": destination.sink.capabilities.batch_size, **FAST, **policy})
    for part in parts:  # each partition's sinks pace their requests by its share, as an executor task's do
        paced = replace(config, delivery=share)
        done = _partition(lambda paced=paced: destination.sink(paced), pa.RecordBatch.from_pylist(part, schema=full),
                          fields, share)
        stats = _summed(stats, done.stats)
        rejects += done.rejects
    return Delivered(stats, rejects)


def _partition(make_sink: Callable[[], Sink], batch: pa.RecordBatch, fields: list[str], policy: DeliveryPolicy
               ) -> Delivered:
    table = pa.Table.from_batches(list(deliver_partition([batch], make_sink, policy, fields[:1], fields)))
    kinds, keys, errors = (table.column(c).to_pylist() for c in ("kind", "key", "error"))
    stats = json.loads(table.column("stats").to_pylist()[-1])
    return Delivered(stats, [(k, e) for kind, k, e in zip(kinds, keys, errors) if kind == "reject"])


def _summed(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    out = dict(total)
    for name, value in more.items():
        if isinstance(value, dict):
            before = out.get(name, {})
            out[name] = {k: before.get(k, 0) + value.get(k, 0) for k in {*before, *value}}
        else:
            out[name] = out.get(name, 0) + value
    return out
