"""SinkOperator: deliver a change set to a destination, then advance the consumer's committed version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from airflow.sdk import Asset, AssetAlias

from airflow_reverse_etl.alerts import RejectsCallback, alert_for, check_thresholds, notify, syncs_page_url
from airflow_reverse_etl.connections import connection_address, destination_settings
from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from airflow_reverse_etl.lineage import destination_asset_uri, destination_dataset
from airflow_reverse_etl.operators.base import DATE_ORDERED, ReverseEtlJobOperator
from airflow_reverse_etl.sink_templates import kept_from_rendering, marked, unwrapped
from spark_jobs.contract.destinations import destination_target
from spark_jobs.contract import SyncSpec, change_set_fields, resolved_at_run_time
from spark_jobs.redaction import secret_values  # import-safe: plain Python

if TYPE_CHECKING:
    from airflow.sdk import Context, XComArg


class SinkOperator(ReverseEtlJobOperator):
    """Push a change set through a pluggable sink.

    Only after every record was delivered (or rejected into the ledger) is the consumer's committed
    version moved to the change set's version; a failure or a kill leaves it, and the next run resends.

    :param changes: the upstream ``DiffOperator``'s output (``diff.output``).
    :param destination: ``{"type": "sqlite", ...}`` — the sink name (built-in, an
        ``airflow_reverse_etl.sinks`` entry point, or ``module:Class``) and its options.
    :param destination_conn_id: Airflow connection of the destination; its password reaches the sink
        through the Spark process environment only.
    :param mode: ``upsert`` (default), ``insert``, ``update`` or ``mirror`` (upsert + delete).
    :param field_mapping: ``{source column: destination field}``; when given, only mapped columns are sent.
    :param constants: ``{destination field: value}`` added to every record.
    :param batch_size: records per batch sent to the destination (default: the sink's own).
    :param concurrency: batches in flight at once inside each Spark partition.
    :param rate_limit: at most this many records per second for the whole sync.
    :param max_delete_fraction: in mirror mode, refuse a run that would delete more than this fraction
        of the destination's rows (an empty source must not wipe a CRM)...
    :param allow_mass_delete: ...unless this is set.
    :param max_reject_fraction: fail the task when more than this fraction of the records is rejected
        by the destination — after committing what was delivered, so ``on_failure_callback`` can alert
        without anything being sent twice. Rejected records are kept in ``_system/rejects`` and sent
        again on the next run either way.
    :param dry_run: write the operations the sync would send to ``plans/<consumer>/<table>`` and send
        nothing (the consumer's committed version does not move).
    :param delivery: retry settings (``max_attempts``, ``backoff_initial``, ``backoff_max``,
        ``progress_every``).
    :param keep_change_sets: after a successful sync, delete the consumer's change sets of this table
        that it has committed past, but the newest this many.
    :param on_rejects_callback: Airflow notifiers (``BaseNotifier`` subclasses such as ``SmtpNotifier``
        or ``SlackNotifier``) or callables of the task context, called after a sync that succeeded with
        rejects reaching the thresholds below; the context has ``rejects`` (counts, the destination's
        most frequent reasons, the syncs page's URL, a ready ``message``: :mod:`airflow_reverse_etl.alerts`).
    :param rejects_threshold: call it when at least this many records were rejected (default 1)...
    :param rejects_fraction_threshold: ...and, when given, at least this fraction of the records.

    Outlet: an Asset alias (:func:`destination_alias`), because the destination's Asset —
    ``postgres://host:port/db/schema/table``, ``kafka://broker/topic``, the HTTP endpoint — is only
    known once the connection is read at run time. Each sync that sends attaches it with the version
    delivered and the counts; a dry run sends nothing and records no event.

    Backfill order: by default the task ``depends_on_past`` with ``max_active_tis_per_dag=1``
    (:data:`~airflow_reverse_etl.operators.base.DATE_ORDERED`): a consumer's syncs commit one date
    after the other, oldest first.
    """

    job = SyncSpec.job
    task_defaults = DATE_ORDERED
    template_fields: Sequence[str] = (*ReverseEtlJobOperator.template_fields, "changes", "destination",
                                      "field_mapping", "constants", "plan_only")
    template_fields_renderers: ClassVar[dict[str, str]] = {"destination": "json", "field_mapping": "json"}

    def __init__(self, *, changes: dict[str, Any] | XComArg, destination: dict[str, Any],
                 destination_conn_id: str | None = None, mode: str = SyncSpec.mode,
                 field_mapping: dict[str, str] | None = None, constants: dict[str, Any] | None = None,
                 batch_size: int | None = None, concurrency: int = 1, rate_limit: float | None = None,
                 max_delete_fraction: float = SyncSpec.max_delete_fraction,
                 allow_mass_delete: bool = SyncSpec.allow_mass_delete,
                 max_reject_fraction: float | None = SyncSpec.max_reject_fraction, dry_run: bool = SyncSpec.dry_run,
                 delivery: dict[str, Any] | None = None,
                 keep_change_sets: int = SyncSpec.keep_change_sets,
                 on_rejects_callback: RejectsCallback | list[RejectsCallback] | None = None,
                 rejects_threshold: int = 1, rejects_fraction_threshold: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_thresholds(rejects_threshold, rejects_fraction_threshold)
        checked = marked(destination)  # the sink's own templates are no Airflow ones
        self.check_static(SyncSpec, destination=checked, mode=mode, field_mapping=field_mapping,
                          constants=constants, max_delete_fraction=max_delete_fraction,
                          allow_mass_delete=allow_mass_delete, max_reject_fraction=max_reject_fraction,
                          dry_run=dry_run, delivery=delivery_options(batch_size, concurrency, rate_limit, delivery),
                          keep_change_sets=keep_change_sets)
        self.changes = changes
        # Airflow renders the destination's options when the task runs, but not the templates the sink
        # renders per record (a REST destination's URL, body, headers: {{ key.id }} is no Airflow value)
        self.destination = kept_from_rendering(destination)
        self.destination_conn_id = destination_conn_id
        self.mode = mode
        self.field_mapping = field_mapping
        self.constants = constants
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.rate_limit = rate_limit
        self.max_delete_fraction = max_delete_fraction
        self.allow_mass_delete = allow_mass_delete
        self.max_reject_fraction = max_reject_fraction
        # not self.dry_run: that name is BaseOperator.dry_run(), the method that renders templates
        self.plan_only = dry_run
        self.delivery = delivery
        self.keep_change_sets = keep_change_sets
        callbacks = on_rejects_callback if isinstance(on_rejects_callback, list) else [on_rejects_callback]
        self.on_rejects_callback = [callback for callback in callbacks if callback is not None]
        self.rejects_threshold = rejects_threshold
        self.rejects_fraction_threshold = rejects_fraction_threshold
        self.outlets = [*self.outlets, destination_alias(checked, destination_conn_id, self.task_id)]

    def build_spec(self, context: Context) -> tuple[SyncSpec, dict[str, str]]:
        destination = dict(unwrapped(self.destination))  # when Airflow did not render
        refuse_secret_vars(destination)
        secrets: dict[str, str] = {}
        if self.destination_conn_id:
            settings, secrets = destination_settings(self.destination_conn_id)
            destination.update(settings)
        changes = self.changes
        if not isinstance(changes, dict):  # rendered by now: an upstream .output is the diff's result
            raise ReverseEtlConfigError(f"changes must be a DiffOperator's result (diff.output), got {changes!r}")
        return SyncSpec.of(
            **change_set_fields(changes), destination=destination, mode=self.mode,
            field_mapping=self.field_mapping, constants=self.constants,
            max_delete_fraction=self.max_delete_fraction, allow_mass_delete=self.allow_mass_delete,
            max_reject_fraction=self.max_reject_fraction, dry_run=self.plan_only,
            delivery=delivery_options(self.batch_size, self.concurrency, self.rate_limit, self.delivery),
            keep_change_sets=self.keep_change_sets,
        ), secrets

    def execute(self, context: Context) -> dict[str, Any]:
        result = super().execute(context)
        if self.on_rejects_callback:
            alert = alert_for(result, self.rejects_threshold, self.rejects_fraction_threshold, syncs_page_url())
            if alert is not None:
                notify(self.on_rejects_callback, context, alert)
        return result

    def destination_address(self) -> tuple[str, str] | None:
        """The destination's OpenLineage (namespace, name), from its options and its connection."""
        address = connection_address(self.destination_conn_id) if self.destination_conn_id else None
        return destination_dataset(self.destination, address)

    def lineage_destinations(self) -> list[tuple[str, str]]:
        address = self.destination_address()
        return [address] if address else []

    def planned_lineage(self) -> dict[str, Any]:
        changes = self.changes if isinstance(self.changes, dict) else {}
        return {"inputs": [{"uri": changes["changes_uri"]}] if changes.get("changes_uri") else []}

    def written_assets(self, result: dict[str, Any]) -> list[tuple[Asset, dict[str, Any]]]:
        address = self.destination_address()
        if result.get("dry_run") or result.get("already_delivered") or address is None:
            return []
        stats = result["stats"]
        metadata = {"version": result["to_version"], "from_version": result["from_version"],
                    **{k: stats[k] for k in ("sent", "inserted", "updated", "deleted", "rejected")}}
        return [(Asset(uri=destination_asset_uri(*address)), metadata)]

    def summarize(self, result: dict[str, Any]) -> str:
        if result.get("dry_run"):
            return (f"dry run of sync {result['table']} -> {result['destination'].get('type')} ({result['mode']}) "
                    f"v{result['to_version']}: would send {result['planned']}; plan in {result['plan']['name']}")
        if result.get("already_delivered"):
            return f"sync {result['table']} v{result['to_version']}: already delivered. {result['already_delivered']}"
        s = result["stats"]
        return (f"sync {result['table']} -> {result['destination'].get('type')} ({result['mode']}) "
                f"v{result['to_version']}: sent {s['sent']} (+{s['inserted']} ~{s['updated']} -{s['deleted']}), "
                f"rejected {s['rejected']}, retried {s['retried']}, resent from ledger {result.get('resent', 0)}, "
                f"committed={result['committed']}")


def delivery_options(batch_size: int | None, concurrency: int, rate_limit: float | None,
                     delivery: dict[str, Any] | None) -> dict[str, Any]:
    """The spec's ``delivery``: the operator's own arguments for it, then its ``delivery`` dict, which
    wins (the same at DAG parse time and when the task runs, so a bad batch size fails the import)."""
    return {"batch_size": batch_size, "concurrency": concurrency, "rate_limit": rate_limit, **(delivery or {})}


def refuse_secret_vars(destination: dict[str, Any]) -> None:
    """Refuse a destination whose ``vars`` carry a value Airflow masks as a secret (a connection's
    password rendered into them, a secret Variable): vars travel in the job spec and the task's XCom.
    A template reads the destination connection's secrets on the Spark side instead."""
    # the task SDK's masker (what airflow.sdk.log masks task logs with, and re-exports without declaring it)
    from airflow.sdk._shared.secrets_masker import redact

    variables = destination.get("vars")
    if not isinstance(variables, dict):
        return
    secret = sorted(name for name, value in variables.items()
                    if any(redact(text) != text for text in secret_values(value)))
    if secret:
        raise ReverseEtlConfigError(
            f"The destination's vars {secret} carry a value Airflow masks as a secret; vars travel in the job's spec "
            "and the task's XCom. Give the destination connection the secret (its password, or an extra) and read "
            "it in the template: {{ secrets.password }} or {{ secrets.extra.<name> }}, rendered on the Spark side "
            "from the connection.")


def destination_alias(destination: dict[str, Any], conn_id: str | None, task_id: str) -> AssetAlias:
    """The Asset alias a sync's destination Asset is attached to: named after the destination
    (sink type, target, connection) so downstream DAGs can be scheduled on it; after the task when
    the destination is templated."""
    if resolved_at_run_time(destination):
        return AssetAlias(name=f"reverse_etl:sink:{task_id}")
    target = destination_target(destination)
    database = f"{destination['database']}." if destination.get("database") else ""
    via = f"@{conn_id}" if conn_id else ""
    return AssetAlias(name=f"reverse_etl:sink:{destination.get('type')}:{database}{target}{via}")
