"""What every reverse-ETL operator shares: submitting its Spark job and returning the job result.

Subclasses say which job they run, check the arguments known at DAG parse time against the contract
(:mod:`spark_jobs.contract`) in ``__init__`` and build the typed spec in :meth:`build_spec`; this base
adds the run's identity (run id, logical date, dag/task), submits through :class:`SparkJobHook` in ``execute()``
(never in ``__init__``), logs a one-line summary and returns the result as the task's XCom.

What Airflow shows of a run comes from that result too: the Asset events of the tables the task
wrote (with the Delta version and the job's counts as event metadata), the OpenLineage datasets (on
success and on failure) and the extra links (:mod:`airflow_reverse_etl.links`).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Sequence

from airflow.providers.common.compat.openlineage.utils.spark import (
    inject_parent_job_information_into_spark_properties,
)
from airflow.providers.common.compat.sdk import ResumableJobMixin
from airflow.sdk import Asset, AssetAlias, BaseOperator, conf

from airflow_reverse_etl.exceptions import ReverseEtlConfigError, ReverseEtlInfrastructureError, spec_validation
from airflow_reverse_etl.hooks.cluster_driver import ACTIVE, FINISHED, ClusterDriver
from airflow_reverse_etl.hooks.spark_connect_runner import TaskAttempt
from airflow_reverse_etl.hooks.spark_job import SparkJobHook
from airflow_reverse_etl.triggers.spark_driver import SparkDriverTrigger
from airflow_reverse_etl.lineage import operator_lineage, table_asset
from airflow_reverse_etl.links import JobResultLink, JobSpecLink, SparkApplicationLink
from spark_jobs.contract import JobSpec, resolved_at_run_time

if TYPE_CHECKING:
    from pydantic import JsonValue

    from airflow_reverse_etl.lineage import Lineage
    from airflow.sdk import Context
    from airflow.sdk.types import RuntimeTaskInstanceProtocol

log = logging.getLogger(__name__)


#: Task defaults of the operators whose runs must follow logical dates: a snapshot or wide table's
#: versions follow its logical dates, and a consumer's diffs and syncs move its position forward one
#: date at a time. ``depends_on_past`` makes the task of date D wait until the task of the DAG's
#: previous run succeeded (or was skipped), so under catchup and ``airflow backfill create`` (which
#: create many runs at once) they run one at a time, oldest date first; ``max_active_tis_per_dag=1``
#: keeps two runs of the task apart even when a user clears several dates at once. Chosen over a
#: per-table pool: it needs no set-up in the Airflow instance and it orders, where a pool of one slot
#: only serialises (in any order). A DAG's ``default_args`` or the operator's own arguments override
#: them; two DAGs writing one table are not ordered by Airflow, and the loser of such a race fails
#: with the retryable ``ReverseEtlConcurrentWriteError``.
DATE_ORDERED = {"depends_on_past": True, "max_active_tis_per_dag": 1}


def provider_pool() -> dict[str, str]:
    """``{"pool": name}`` when ``[reverse_etl] pool`` is set, else nothing (Airflow's ``default_pool``).

    The operators' jobs share the Spark side — one Connect server or one cluster — which a fleet of
    pipelines would otherwise hand as many concurrent jobs as Airflow has worker slots: a pool sized
    to that server makes the fleet queue in Airflow instead (docs/guides/clusters-and-object-stores.md,
    "Sizing"). A task's own ``pool=`` or its DAG's ``default_args`` win. Read when the DAG is parsed,
    like every operator default taken from Airflow's configuration."""
    from airflow_reverse_etl import config

    name = config.pool()
    return {"pool": name} if name else {}


def logical_date_of(context: Context) -> str:
    """The run's logical date as ISO text. A run without one (a manual or asset-triggered run in
    Airflow 3) records its versions under its ``run_after`` instant instead, as design §7 decides;
    the task log says so, since that date is then what the snapshot's history shows. What follows,
    with nothing else added for such runs (docs/guides/live-syncs.md):

    - a retry of the run (or of its snapshot task) has the same ``run_after``: the snapshot finds the
      version recorded for it and returns it without reading the source again;
    - runs never record out of order: a run's ``run_after`` older than the newest date the table
      recorded is refused like any past logical date (``on_past_date``), never written behind it.
      ``run_after`` is when Airflow queued the run, so with ``max_active_runs=1`` (the live DAGs'
      setting) the runs of a DAG start, and record, in that order;
    - a run reads a Delta source at its head (the snapshot pins the version it read and records it as
      ``source_version``), so a burst of commits is one run, and a run after it finds nothing new:
      an empty snapshot commit, an empty diff, nothing to send;
    - scheduled runs (their logical date, which for Airflow 3's default cron timetable is also when
      they run) and event-driven runs of one table share one line of dates in time order.

    Runs with a logical date (backfill, rebuild, SCD2 history) are untouched."""
    logical_date = context.get("logical_date")
    if logical_date is not None:
        return logical_date.isoformat()
    run_after = context["dag_run"].run_after.isoformat()
    log.info("This run has no logical date: its versions are recorded under its run_after, %s", run_after)
    return run_after


def task_attempt(context: Context) -> TaskAttempt | None:
    """The attempt running: the task instance (dag, task, run, map index, and the run's start, so
    that two deployments — or a run cleared and started again — never name the same one) and its
    try number. Over Spark Connect a retry uses it to stop what a killed attempt left running. None
    when ``execute()`` is called outside a task run (no task instance)."""
    ti, dag_run = context.get("ti"), context.get("dag_run")
    if ti is None or dag_run is None:
        return None
    started = dag_run.start_date or dag_run.run_after
    return TaskAttempt(task=f"{ti.dag_id}/{ti.task_id}/{ti.run_id}/{ti.map_index}@{started.isoformat()}",
                       try_number=ti.try_number)


class ReverseEtlJobOperator(ResumableJobMixin, BaseOperator):
    """Base of the operators that run a :mod:`spark_jobs` job.

    Where the Spark connection runs jobs in cluster deploy mode on a standalone master (a ``spark://``
    connection with the ``deploy-mode`` extra ``cluster``), the job's driver runs on a worker of the
    cluster, not in the task (:mod:`airflow_reverse_etl.hooks.cluster_driver`), and the task is
    *durable*, as the apache-spark provider's ``SparkSubmitOperator`` (Airflow's
    :class:`~airflow.sdk.ResumableJobMixin`): the driver's submission id is kept in the task state
    store, so a retry after the worker was lost reattaches to the running driver (or takes the result
    of the one that finished) instead of running the job again, and ``on_kill`` kills the driver. With
    ``deferrable`` the task also frees its worker slot while the driver runs
    (:class:`~airflow_reverse_etl.triggers.spark_driver.SparkDriverTrigger`). In client mode (the
    driver is the task's child process) and over Spark Connect (the task is the client) there is
    nothing to defer to or reattach: the job runs in the task (docs/guides/clusters-and-object-stores.md).

    :param spark_conn_id: Spark connection; without it jobs run on ``local[*]``.
    :param warehouse: warehouse root (default ``[reverse_etl] warehouse``).
    :param spark_conf: extra Spark settings for this job.
    :param openlineage_inject_parent_job_info: hand the task's OpenLineage identity to the Spark job
        (``spark.openlineage.parentJobName`` etc., as the apache-spark provider's operators do), so
        the events of Spark's own OpenLineage listener nest under this task. Default:
        ``[openlineage] spark_inject_parent_job_info``. Transport settings are never injected: they
        may hold an API key, and Spark settings end up in argv.
    :param deferrable: in cluster deploy mode, wait for the driver in the triggerer instead of the
        worker. Default: ``[operators] default_deferrable``.
    :param durable: in cluster deploy mode, keep the driver's id so that a retry reattaches to it
        (default True; Airflow 3.3+, ignored before).
    :param poll_interval: seconds between two looks at a cluster-mode driver's state while deferred.
    """

    #: the task state store's key of the cluster-mode driver (renaming it breaks in-flight retries)
    external_id_key = "spark_driver"
    job: ClassVar[str]
    #: task defaults of this operator (e.g. :data:`DATE_ORDERED`); arguments override them
    task_defaults: ClassVar[dict[str, Any]] = {}
    template_fields: Sequence[str] = ("warehouse", "spark_conf")
    ui_color = "#e8f4fd"
    operator_extra_links = (SparkApplicationLink(), JobResultLink(), JobSpecLink())

    def __init__(self, *, spark_conn_id: str = "spark_default", warehouse: str | None = None,
                 spark_conf: dict[str, Any] | None = None,
                 openlineage_inject_parent_job_info: bool = conf.getboolean(
                     "openlineage", "spark_inject_parent_job_info", fallback=False),
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 poll_interval: float = 5.0,
                 **kwargs: Any) -> None:
        # Airflow hands the DAG's default_args in kwargs["default_args"]: they win over task_defaults
        overridden = {**(kwargs.get("default_args") or {}), **kwargs}
        defaults = {**self.task_defaults, **provider_pool()}
        super().__init__(**{k: v for k, v in defaults.items() if k not in overridden}, **kwargs)
        self.spark_conn_id = spark_conn_id
        self.warehouse = warehouse
        self.spark_conf = spark_conf
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self._hook: SparkJobHook | None = None
        self._result: dict[str, Any] | None = None
        self._job: tuple[JobSpec, dict[str, str]] | None = None  # cluster mode: what submit_job submits
        self._polled: dict[str, Any] = {}  # cluster mode: the result poll_until_complete took

    @staticmethod
    def check_static(spec_class: type[JobSpec], **values: Any) -> None:
        """Check the arguments known when the DAG is parsed (templates and upstream outputs are
        skipped) against the contract, so a bad spec fails the DAG import, not a run."""
        with spec_validation():
            spec_class.check_static(**values)

    def build_spec(self, context: Context) -> tuple[JobSpec, dict[str, str]]:
        """Return (the job's typed spec without the run identity, secrets as {env var: value})."""
        raise NotImplementedError

    def summarize(self, result: dict[str, Any]) -> str:
        return f"{self.job} done"

    def event_counts(self, result: dict[str, Any]) -> dict[str, Any]:
        """The job's counts, carried by each Asset event of the task beside the Delta version."""
        return {}

    def written_assets(self, result: dict[str, Any]) -> list[tuple[Asset, dict[str, Any]]]:
        """(Asset, event metadata) of each table the job wrote, at the version it wrote: by default
        the result's outputs (one per table; a backfill's last date is its newest version)."""
        newest = {ref["uri"]: ref for ref in result.get("outputs") or [] if ref.get("uri")}
        counts = self.event_counts(result)
        return [(table_asset(uri), {"version": ref.get("version"), **counts}) for uri, ref in newest.items()]

    def job_spark_conf(self, context: Context) -> dict[str, Any]:
        """The Spark settings of this run: the operator's, plus the OpenLineage parent job when asked."""
        spark_conf = dict(self.spark_conf or {})
        if self.openlineage_inject_parent_job_info:
            spark_conf = inject_parent_job_information_into_spark_properties(spark_conf, context)
        return spark_conf

    def execute(self, context: Context) -> dict[str, Any]:
        with self.skipping_expected(context):
            return self.run_job(context)

    @contextmanager
    def skipping_expected(self, context: Context) -> Iterator[None]:
        """Let :meth:`skip_if_expected` turn a configuration error the operator expects into a skip,
        whether the job ran in ``execute()`` or resumed from its trigger."""
        try:
            yield
        except ReverseEtlConfigError as exc:
            self.skip_if_expected(context, exc)
            raise

    def skip_if_expected(self, context: Context, error: ReverseEtlConfigError) -> None:
        """Raise ``AirflowSkipException`` when ``error`` means "nothing to do" for this operator."""

    def run_job(self, context: Context) -> dict[str, Any]:
        with spec_validation():  # rendered templates are checked here: a bad value fails without retries
            spec, secrets = self.build_spec(context)
        spec = replace(spec, run_id=context["run_id"], logical_date=logical_date_of(context),
                       dag_id=self.dag_id, task_id=self.task_id)
        self._hook = self.job_hook(context)
        if not self._hook.cluster_deploy_mode():
            return self.finish(context, self._hook.run_job(spec, secrets=secrets, name=self.job_name,
                                                           attempt=task_attempt(context)))
        self._job = (spec, secrets)
        if self.deferrable:  # defers, unless an earlier attempt's driver has finished
            return self.finish(context, self.defer_to_driver(context))
        # the mixin returns get_job_result(), or nothing when it reattached: then what the poll took
        return self.finish(context, self.execute_resumable(context) or self._polled)

    @property
    def job_name(self) -> str:
        return f"{self.dag_id}.{self.task_id}"

    def job_hook(self, context: Context) -> SparkJobHook:
        return SparkJobHook(conn_id=self.spark_conn_id, warehouse=self.warehouse,
                            spark_conf=self.job_spark_conf(context))

    def finish(self, context: Context, result: dict[str, Any]) -> dict[str, Any]:
        """Log the job's summary, record its Asset events, return it as the task's XCom."""
        self.log.info("%s (%.1fs in Spark)", self.summarize(result), result.get("duration_s", 0))
        self._result = result
        self.record_asset_events(context, result)
        return result

    # -- cluster deploy mode: durable (ResumableJobMixin) and deferrable ----------------------------
    def submit_job(self, context: Context) -> JsonValue:
        assert self._hook is not None and self._job is not None, "execute() sets them"
        spec, secrets = self._job
        return self._hook.submit_driver(spec, secrets, name=self.job_name).to_json()

    def get_job_status(self, external_id: JsonValue, context: Context) -> str:
        assert self._hook is not None
        return self._hook.driver_state(ClusterDriver.from_json(external_id))

    def is_job_active(self, status: str) -> bool:
        return status in ACTIVE

    def is_job_succeeded(self, status: str) -> bool:
        return status == FINISHED

    def poll_until_complete(self, external_id: JsonValue, context: Context) -> None:
        """Wait for the driver and take its result (or raise its failure)."""
        assert self._hook is not None
        self._polled = self._hook.wait_for_driver(ClusterDriver.from_json(external_id))

    def get_job_result(self, external_id: JsonValue, context: Context) -> dict[str, Any]:
        """The result the poll took, or (a driver that had finished before this attempt) the one it wrote."""
        assert self._hook is not None
        return self._polled or self._hook.driver_result(ClusterDriver.from_json(external_id))

    def defer_to_driver(self, context: Context) -> dict[str, Any]:
        """Defer to a :class:`SparkDriverTrigger` on the driver of this task instance: the one an
        earlier attempt left running (the task state store keeps it, as for a durable retry), else a
        new submission, kept there before deferring. A driver an earlier attempt left that has
        finished (its worker was lost after the job ended) is not run again: its result is returned,
        as the mixin's non-deferrable path returns it."""
        assert self._hook is not None
        store = context.get("task_state_store") if self.durable else None
        kept = store.get(self.external_id_key) if store is not None else None
        status = self.get_job_status(kept, context) if kept else None
        if status == FINISHED:
            self.log.info("Taking the result of the driver an earlier attempt submitted, which has finished")
            return self._hook.driver_result(ClusterDriver.from_json(kept))
        if status in ACTIVE:
            driver = ClusterDriver.from_json(kept)
            self.log.info("Deferring to the driver an earlier attempt submitted: %s", driver.driver_id)
        else:
            driver = ClusterDriver.from_json(self.submit_job(context))
            if store is not None:
                store.set(self.external_id_key, driver.to_json())
        self.defer(trigger=SparkDriverTrigger(driver=driver.to_json(), poll_interval=self.poll_interval),
                   method_name="execute_complete")

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resumed from :class:`SparkDriverTrigger`: the driver ended; its result is the task's."""
        driver = ClusterDriver.from_json(event["driver"])
        if event.get("error"):
            raise ReverseEtlInfrastructureError(event["error"])
        self._hook = self.job_hook(context)
        with self.skipping_expected(context):
            if event.get("result") is None:
                return self.finish(context, self._hook.driver_result(driver, event.get("state")))
            return self.finish(context, self._hook.checked_result(driver.job_dir, event["result"]))

    def record_asset_events(self, context: Context, result: dict[str, Any]) -> None:
        """Give each written table's Asset event its metadata (Delta version, counts). A table that is
        a declared outlet gets it on its own event; otherwise the Asset is attached to the task's
        declared Asset alias, if any (tables only named at run time, such as a sink's destination).
        Nothing to record when ``execute()`` is called outside a task run (no ``outlet_events``)."""
        events = context.get("outlet_events")
        if events is None:
            return
        declared = {outlet.uri for outlet in self.outlets if isinstance(outlet, Asset)}
        aliases = [outlet for outlet in self.outlets if isinstance(outlet, AssetAlias)]
        for asset, metadata in self.written_assets(result):
            if asset.uri in declared:
                events[asset].extra.update(metadata)
                continue
            for alias in aliases:
                events[alias].add(asset, extra=metadata)

    def declare_outlets(self, *tables: str) -> None:
        """Add the Airflow Assets of the warehouse tables (relative names) this task writes, so
        data-aware DAGs can be scheduled on them. Skipped for names only known at run time."""
        from airflow_reverse_etl import config

        if resolved_at_run_time([self.warehouse, *tables]):
            return
        root = config.warehouse_uri(self.warehouse)
        self.outlets = [*self.outlets, *(table_asset(f"{root}/{rel}") for rel in tables)]

    def get_openlineage_facets_on_complete(
            self, task_instance: RuntimeTaskInstanceProtocol) -> Lineage:
        """OpenLineage datasets of the tables this run read and wrote, at their exact Delta versions."""
        return operator_lineage(self._result, self.lineage_destinations())

    def lineage_destinations(self) -> list[tuple[str, str]]:
        """OpenLineage (namespace, name) of the systems outside the lake the task writes to (sinks)."""
        return []

    def planned_lineage(self) -> dict[str, Any]:
        """What the task meant to read and write, for a run that failed before a result: its
        declared table outlets (no versions)."""
        return {"outputs": [{"uri": outlet.uri} for outlet in self.outlets if isinstance(outlet, Asset)]}

    def get_openlineage_facets_on_failure(
            self, task_instance: RuntimeTaskInstanceProtocol) -> Lineage:
        """OpenLineage datasets of a failed run: the ones the job reported, else the planned ones."""
        return operator_lineage(self._result or self.planned_lineage(), self.lineage_destinations())

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()
