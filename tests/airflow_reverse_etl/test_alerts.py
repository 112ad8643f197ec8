"""When a sync's rejects call for an alert, and what the alert says (no Spark: job results as the
sync job returns them). The notifier end to end, with a real SMTP server: tests/system/test_rest_api_dag.py."""

import pytest

from airflow_reverse_etl.alerts import alert_for, check_thresholds, notify
from airflow_reverse_etl.exceptions import ReverseEtlConfigError


def result(rejected: int, planned: int = 100, **extra):
    return {"table": "snapshots/customers", "consumer": "crm", "to_version": 7, "dry_run": False,
            "destination": {"type": "rest", "base_url": "https://user:pw@api.example.com/v1"},
            "planned": {"upsert": planned}, "stats": {"rejected": rejected, "sent": planned - rejected},
            "reject_reasons": [{"reason": "HTTP 422: email '…' is not a valid address", "count": rejected}], **extra}


@pytest.mark.parametrize(("rejected", "count", "fraction", "alerts"), [
    (0, 1, None, False), (1, 1, None, True), (9, 10, None, False), (10, 10, None, True),
    (10, 1, 0.2, False), (20, 1, 0.2, True), (20, 30, 0.2, False),
])
def test_an_alert_needs_both_thresholds(rejected, count, fraction, alerts):
    assert (alert_for(result(rejected), count, fraction, "http://airflow/plugin/reverse-etl") is not None) == alerts


def test_dry_runs_and_runs_another_run_delivered_never_alert():
    assert alert_for(result(5, dry_run=True), 1, None, "") is None
    assert alert_for(result(5, already_delivered="by run x"), 1, None, "") is None


def test_the_alert_has_counts_reasons_and_the_page_but_no_credentials():
    alert = alert_for(result(3), 1, None, "http://airflow/plugin/reverse-etl")
    assert (alert.count, alert.total, alert.sent, alert.fraction) == (3, 100, 97, 0.03)
    assert alert.destination == "rest:https://api.example.com/v1"
    assert alert.message.splitlines() == [
        ("3 of 100 records (3.0%) of snapshots/customers (version 7) were rejected by rest:https://api.example.com/v1 "
        "(consumer crm); 97 were delivered and committed. The rejected ones are in the reject ledger and are sent "
        "again on the next run."),
        "  3 × HTTP 422: email '…' is not a valid address",
        "Syncs page: http://airflow/plugin/reverse-etl"]


def test_a_failing_notifier_is_logged_and_the_others_still_called(caplog):
    called = []

    def broken(context):
        raise RuntimeError("smtp down")

    notify([broken, lambda context: called.append(context["rejects"]["count"])], {"ti": None},
           alert_for(result(2), 1, None, ""))
    assert called == [2] and "The rejects callback" in caplog.text and "smtp down" in caplog.text


@pytest.mark.parametrize(("count", "fraction"), [(0, None), (True, None), (1, 1.5), (1, -0.1)])
def test_thresholds_that_cannot_work_are_refused_at_parse_time(count, fraction):
    with pytest.raises(ReverseEtlConfigError):
        check_thresholds(count, fraction)
