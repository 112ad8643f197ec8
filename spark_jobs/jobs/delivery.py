"""Where a sync's delivery runs and how wide: the delivery policy resolved against the sink and the
cluster, and the Spark side of running :func:`~spark_jobs.sinks.core.deliver_partition` over the
operations — in the executors, or, for a change set of at most ``driver_max_records`` records, from
the driver (:func:`on_driver`), which saves the Spark job, its Python workers and the checkpoint a
small sync would otherwise pay for (the default is measured: bench/README.md). :func:`deliver_frame`
picks between them, and :func:`deliver_change_set` is a sync's delivery step (its plan in, what it did
out); a destination Spark writes itself (:class:`~spark_jobs.sinks.base.FrameSink`) gets the
whole frame in one Spark write instead.

Limits for the whole sync (``delivery``: ``rate_limit`` records/s, ``requests_per_second``,
``max_in_flight``) are kept across executors by fixing how many partitions deliver and dividing:

* the operations are brought to *D* equal partitions (a round-robin repartition: equal within one
  record per partition they came in), D = min(the cluster's default parallelism, ``max_in_flight``,
  the sink's ``max_parallelism``), so that no more than D tasks ever deliver — at once or in turn —
  and none finishes early leaving its share unused;
* each gets 1/D of each rate, shared by its threads (:mod:`spark_jobs.sinks.pacing`: a token bucket,
  or for requests counted over a known ``requests_window`` W, ⌊rate × W / D⌋ slots), and at most
  ``max_in_flight // D`` threads (``concurrency`` capped), each with one request at a time.

How exact that is: requests in flight never exceed ``max_in_flight``; over any window of T seconds
the destination receives at most ``rate × (T + 1)`` records, or ``rate × T + D`` requests (each bucket
starts empty; a bucket of records holds at most one second's worth, one of requests a single
request) — with ``requests_window`` W, at most ``rate × W`` requests in any W seconds. It is a ceiling
and nearly a target (equal partitions); a cluster with fewer task slots than D runs them in turn. A
Spark task retried after a lost executor (or speculation, off by default) sends beside the share it
replaces; its batches are sent again by key, which the API absorbs.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Callable

from spark_jobs import errors, progress
from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.errors import JobError
from spark_jobs.sinks.base import FrameSink, Sink, SinkConfig
from spark_jobs.sinks.batch import with_json
from spark_jobs.sinks.core import OUTCOME_DDL, Stats, deliver_partition

#: The refused records a delivery returns, wherever it ran (the reject ledger's input).
REFUSED_COLUMNS = ("key", "op", "change", "error", "attempts")
REFUSED_DDL = "key STRING, op STRING, change STRING, error STRING, attempts INT"

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from spark_jobs.jobs.sync_plan import SyncPlan


@dataclass(frozen=True)
class Delivery:
    """The resolved policy (rates per delivering partition), how many partitions deliver (None: as
    many as the operations have; only limits need the count fixed), and whether the driver delivers:
    then it is the one delivering "partition" and the policy holds the whole sync's rates."""

    policy: DeliveryPolicy
    partitions: int | None = None
    on_driver: bool = False


def resolve(policy: DeliveryPolicy, sink_cls: type[Sink], running_at_once: Callable[[], int],
            records: int | None = None) -> Delivery:
    """``policy`` (the spec's ``delivery``, checked with the spec) resolved against the sink — its
    batch size when none is given, at most its concurrency — and the cluster: the sync-wide limits
    divided over the delivering partitions (the module docstring; ``running_at_once`` is asked only
    when there is a limit: it runs a Spark job). ``records`` (the plan's count) at most
    ``driver_max_records``: the driver delivers, alone."""
    concurrency = min(policy.concurrency, sink_cls.max_concurrency or policy.concurrency)
    policy = replace(policy, batch_size=policy.batch_size or sink_cls.batch_size, concurrency=concurrency)
    if records is not None and records <= policy.driver_max_records:
        return Delivery(_shared(policy, 1), 1, on_driver=True)
    if not (policy.rate_limit or policy.requests_per_second or policy.max_in_flight):
        return Delivery(policy)
    slots = running_at_once()  # a Spark job: asked once
    partitions = max(1, min(slots, policy.max_in_flight or slots, sink_cls.max_parallelism or slots))
    return Delivery(_shared(policy, partitions), partitions)


def _shared(policy: DeliveryPolicy, partitions: int) -> DeliveryPolicy:
    """The share of one of ``partitions`` delivering partitions."""
    def share(rate: float | None) -> float | None:
        return rate / partitions if rate else None

    concurrency = min(policy.concurrency, max(1, policy.max_in_flight // partitions)) if policy.max_in_flight \
        else policy.concurrency
    return replace(policy, rate_limit=share(policy.rate_limit), requests_per_second=share(policy.requests_per_second),
                   concurrency=concurrency)


def cluster_parallelism(spark: SparkSession) -> int:
    """The cluster's default parallelism, found with the DataFrame API alone (no RDD, no SparkContext:
    the same code runs over Spark Connect): a ``range`` without a partition count gets as many
    partitions as ``SparkContext.defaultParallelism`` reports. The operations are brought to that many
    partitions (or fewer) whatever they came in, so their own count is never asked (a Spark job over
    the whole change set)."""
    from pyspark.sql import functions as F

    ids = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("_partition"))
    # projected first: Spark refuses a non-deterministic expression inside an aggregate
    return int(ids.agg(F.max("_partition")).collect()[0][0] or 0) + 1


#: How Python's traceback ends with one of our errors: ``spark_jobs.errors.<Class>: <message>``.
_JOB_ERROR_LINE = re.compile(r"spark_jobs\.errors\.(\w+): ([^\n]+)")


def executor_job_error(exc: Exception) -> JobError | None:
    """A JobError a sink raised on an executor, raised again on the driver so the task fails with the
    sink's own type and explanation (the destination, the cause); None for any other failure.

    Spark gives no better handle than text for it (checked against pyspark 4.2): the executor's
    Python worker sends the JVM only its formatted traceback, so the driver gets a stage failure
    whose cause is Spark's ``PythonException`` — the same error condition for every Python error, no
    exception object, in a classic session and over Spark Connect alike — and pyspark itself reads
    that text back to show the traceback (``recover_python_exception``). So the last traceback line
    naming a class of :mod:`spark_jobs.errors` is read, and the class is taken only if it is a JobError."""
    found = _JOB_ERROR_LINE.findall(str(exc))
    if not found:
        return None
    name, message = found[-1]
    error_cls = getattr(errors, name, None)
    if not (isinstance(error_cls, type) and issubclass(error_cls, JobError)):
        return None
    error = error_cls(message.strip())
    error.__cause__ = exc
    return error


def in_executors(frame: DataFrame, sink_cls: type[Sink], config: SinkConfig, key_fields: list[str],
                 delivery: Delivery) -> tuple[Stats, DataFrame]:
    """Run the sink over every partition; return (stats, refused records).

    The outcome rows are materialized once by an eager local checkpoint (kept in the executors, no
    scratch files to clean up), so the destination is written exactly once however often the
    outcomes are read afterwards; only the per-partition stats rows are collected."""
    from pyspark.sql import functions as F

    frame = delivering_partitions(frame, delivery, sink_cls)
    if sink_cls.wants_json:
        frame = with_json(frame, key_fields, config.fields)
    deliver = partial(deliver_partition, make_sink=partial(sink_cls, config), policy=delivery.policy,
                      key_fields=key_fields, fields=config.fields)
    try:
        outcomes = frame.mapInArrow(deliver, OUTCOME_DDL).localCheckpoint(eager=True)
    except Exception as exc:
        raise (executor_job_error(exc) or exc) from exc

    stats = Stats()
    for row in outcomes.where(F.col("kind") == "stats").select("stats").collect():  # one per partition
        stats.add(json.loads(row["stats"]))
    refused = outcomes.where(F.col("kind") == "reject").select(*REFUSED_COLUMNS)
    return stats, refused


def delivering_partitions(frame: DataFrame, delivery: Delivery, sink_cls: type[Sink]) -> DataFrame:
    """``frame`` in the partitions that deliver it. Under a sync-wide limit each partition sends at a
    fixed share of it, so they are made equal (a round-robin repartition to D): merged partitions of
    unequal size would leave the small ones' share unused once they are done (5 % of HubSpot's limit
    in bench scenario 11), and fewer partitions than D would leave shares unused from the start. The
    shuffle costs well under a second of a delivery that a limit makes last minutes. A bound on
    parallelism alone (the sink's ``max_parallelism``) merges partitions, with no shuffle: it loses
    nothing to uneven sizes."""
    if delivery.partitions:
        return frame.repartition(delivery.partitions)
    if sink_cls.max_parallelism:
        return frame.coalesce(sink_cls.max_parallelism)
    return frame


def on_driver(spark: SparkSession, frame: DataFrame, sink_cls: type[Sink], config: SinkConfig,
              key_fields: list[str], delivery: Delivery) -> tuple[Stats, DataFrame] | None:
    """Deliver ``frame`` from this process — the job's driver (the task process over Spark Connect) —
    with the executors' own code (:func:`~spark_jobs.sinks.core.deliver_partition`: the same batches,
    retries, rate limits and outcomes) and no Spark job of its own beyond reading the rows. Returns
    (stats, refused records), or None when the frame holds more than ``driver_max_records`` rows after
    all (then the executors deliver it).

    Bringing the rows here is the one place a sync collects its data to the driver. It is bounded:
    at most ``driver_max_records + 1`` rows are ever read (``limit``), whatever the plan said, so the
    rule that nothing proportional to a table's size is collected still holds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    limit = delivery.policy.driver_max_records
    if sink_cls.wants_json:
        frame = with_json(frame, key_fields, config.fields)
    table = frame.limit(limit + 1).toArrow()
    if table.num_rows > limit:
        return None
    outcomes = pa.Table.from_batches(list(deliver_partition(
        table.to_batches(), partial(sink_cls, config), delivery.policy, key_fields, config.fields)))
    stats = Stats()
    stats.add(json.loads(outcomes.column("stats")[-1].as_py()))
    refused = outcomes.filter(pc.equal(outcomes.column("kind"), "reject")).select(list(REFUSED_COLUMNS))
    return stats, spark.createDataFrame(refused.to_pylist(), REFUSED_DDL)


@dataclass(frozen=True)
class Delivered:
    """What a sync's delivery did: its stats, the records refused for good (the ledger's input), where
    it ran (``driver``, ``executors``, None when there was nothing to send), its wall time (reading the
    operations, sending, the acknowledgements — not the planning, ledger or commit around it) and the
    policy it ran under."""

    stats: Stats
    refused: DataFrame
    where: str | None
    seconds: float
    delivery: Delivery


def deliver_change_set(spark: SparkSession, plan: SyncPlan, label: str) -> Delivered:
    """Deliver the plan's operations under its spec's policy, resolved against the sink and the cluster
    (the module docstring), with progress lines in the log; an empty change set without resends
    reads nothing and runs no Spark job."""
    sink, spec = plan.sink, plan.spec
    records = None if isinstance(sink, FrameSink) else plan.records
    resolved = resolve(sink.limits(spec.delivery), type(sink), partial(cluster_parallelism, spark), records)
    started = time.monotonic()
    with progress.reporting(spark, f"sink {spec.table} -> {label}", plan.records, resolved.policy.progress_every):
        if plan.records or plan.ledger is not None:
            stats, refused, where = deliver_frame(spark, sink, plan.frame, plan.config, plan.key_fields, resolved)
        else:
            stats, refused, where = Stats(), no_refusals(spark), None
    return Delivered(stats, refused, where, round(time.monotonic() - started, 3), resolved)


def deliver_frame(spark: SparkSession, sink: Sink, frame: DataFrame, config: SinkConfig, key_fields: list[str],
                  policy: Delivery) -> tuple[Stats, DataFrame, str | None]:
    """Send ``frame`` through the sink — from the driver when the policy says so and the frame is
    as small as planned, else from the executors; return (stats, refused records, where it ran)."""
    if isinstance(sink, FrameSink):
        stats = Stats()
        stats.add(sink.write_frame(spark, frame.drop("_key")))
        return stats, no_refusals(spark), "executors"  # one Spark write
    config = replace(config, delivery=policy.policy)  # the sinks pace their requests by the partition's share
    delivered = on_driver(spark, frame, type(sink), config, key_fields, policy) if policy.on_driver else None
    if delivered is not None:
        return (*delivered, "driver")
    return (*in_executors(frame, type(sink), config, key_fields, policy), "executors")


def no_refusals(spark: SparkSession) -> DataFrame:
    """The refused records of a delivery that refused none (or sent nothing)."""
    return spark.createDataFrame([], REFUSED_DDL)
