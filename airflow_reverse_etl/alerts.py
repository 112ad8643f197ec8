"""Alerts on rejects: a sync that delivered but had records refused ends green (the refused ones wait
in the reject ledger for the next run), so nobody would look. ``SinkOperator(on_rejects_callback=...)``
calls Airflow notifiers — ``BaseNotifier`` subclasses such as the SMTP provider's ``SmtpNotifier`` or
the Slack provider's ``SlackNotifier`` — or plain callables with the task context, as Airflow calls
``on_failure_callback``, when a sync's rejects reach the operator's thresholds.

The context carries ``rejects`` (:class:`RejectAlert` as a dict), so a notifier's templated fields
can say what happened::

    SmtpNotifier(to="data-team@example.com",
                 subject="{{ rejects.count }} records refused by {{ rejects.destination }}",
                 html_content="{{ rejects.message }}")

``rejects.reasons`` are the destination's most frequent reasons, grouped with the records' values
taken out by the sync job (``SyncResult.reject_reasons``): an alert carries counts and reasons, never
a record's data. ``rejects.syncs_url`` is the provider's syncs page in the Airflow UI, where the
ledger's records are listed.

A sync that rejects more than ``max_reject_fraction`` fails its task instead (after committing what
was delivered): that is ``on_failure_callback``'s case. A notifier that fails is logged and does not
fail the task, which has delivered and committed.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence, Union

from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from spark_jobs.contract.destinations import destination_label

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.bases.notifier import BaseNotifier

log = logging.getLogger(__name__)

#: What ``on_rejects_callback`` takes: a notifier or a callable of the context, or a list of them.
RejectsCallback = Union["BaseNotifier", Callable[..., Any]]


@dataclass(frozen=True)
class RejectAlert:
    """What a notifier is told (``context["rejects"]``)."""

    count: int  # records rejected by this run
    total: int  # records the run sent or tried to (the plan, resends included)
    fraction: float
    sent: int
    table: str
    consumer: str
    destination: str  # the sink type and its target (``rest:https://api.example.com/v2``), no credentials
    to_version: int
    reasons: list[dict[str, Any]]  # [{"reason": ..., "count": ...}], most frequent first
    syncs_url: str
    message: str  # all of the above in a few lines


def syncs_page_url() -> str:
    """The syncs page in the Airflow UI: ``[api] base_url`` and the UI plugin's route."""
    from airflow.sdk import conf

    from airflow_reverse_etl.ui.plugin import UI_ROUTE  # the plugin module loads Airflow's plugin manager

    base = conf.get("api", "base_url", fallback=None) or "http://localhost:8080/"
    return f"{base.rstrip('/')}/plugin/{UI_ROUTE}"


def check_thresholds(count: int, fraction: float | None) -> None:
    """Refuse thresholds that can never or always fire, when the DAG is parsed."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ReverseEtlConfigError(f"rejects_threshold={count!r} is not allowed; expected an integer >= 1")
    if fraction is not None and (isinstance(fraction, bool) or not 0 <= fraction <= 1):
        raise ReverseEtlConfigError(f"rejects_fraction_threshold={fraction!r} is not allowed; expected a number "
                                    "between 0 and 1")


def alert_for(result: dict[str, Any], count_threshold: int, fraction_threshold: float | None,
              syncs_url: str) -> RejectAlert | None:
    """The alert a sync result calls for: rejects at least ``count_threshold`` and (when given) at
    least ``fraction_threshold`` of the records; None for a dry run or a run below them."""
    if result.get("dry_run") or result.get("already_delivered"):
        return None
    count = int(result["stats"]["rejected"])
    total = max(sum(result["planned"].values()), count)
    fraction = count / total if total else 0.0
    if count < count_threshold or (fraction_threshold is not None and fraction < fraction_threshold):
        return None
    destination = destination_label(result["destination"])
    reasons = list(result.get("reject_reasons") or [])
    summary = (f"{count} of {total} records ({fraction:.1%}) of {result['table']} (version {result['to_version']}) "
               f"were rejected by {destination} (consumer {result['consumer']}); {result['stats']['sent']} were "
               "delivered and committed. The rejected ones are in the reject ledger and are sent again on the "
               "next run.")
    lines = [summary, *(f"  {r['count']} × {r['reason']}" for r in reasons), f"Syncs page: {syncs_url}"]
    return RejectAlert(count, total, fraction, int(result["stats"]["sent"]), result["table"], result["consumer"],
                       destination, int(result["to_version"]), reasons, syncs_url, "\n".join(lines))


def notify(callbacks: Sequence[RejectsCallback], context: Context, alert: RejectAlert) -> None:
    """Call each callback with the task context plus ``rejects``; one that fails is logged. A notifier
    renders its templated fields in place, so each call gets a copy: the next run's alert (``dag.test``
    runs several in one process) renders the templates, not the last run's text."""
    alert_context: dict[str, Any] = {**context, "rejects": asdict(alert)}
    for callback in callbacks:
        try:
            copy.copy(callback)(alert_context)
        except Exception:
            log.exception("The rejects callback %r failed; the sync itself succeeded", callback)
