"""The provider's UI view of sync history and pending rejects (:mod:`airflow_reverse_etl.ui`): its
Spark-free reader against tables the real jobs wrote (deletion vectors included), its summary, and
the view in a real `airflow standalone` opened by a real headless Chromium.

The history is written once, into the standalone instance's warehouse (the one its API server reads
through ``[reverse_etl] warehouse``): one Spark pass serves every test here.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from html import unescape

import pytest

from airflow_reverse_etl.ui import summary
from airflow_reverse_etl.ui.plugin import UI_ROUTE, URL_PREFIX
from airflow_reverse_etl.ui.app import table_rows
from tests_common.paths import REPO
from tests_common.sync_history import REFUSED, has_deletion_vectors, write_sync_history


@pytest.fixture(scope="module")
def history(airflow_standalone_starting, spark, tmp_path_factory):
    """Written while the instance boots (its API server reads the warehouse only when the view is
    opened): the start-up and the Spark jobs overlap."""
    return write_sync_history(spark, airflow_standalone_starting.warehouse, tmp_path_factory.mktemp("sync-history"))


def _comparable(row, columns):
    """The row comparable across readers: Spark returns naive UTC timestamps, delta-rs aware ones."""
    def plain(value):
        if isinstance(value, datetime) and value.tzinfo:
            return value.astimezone(timezone.utc).replace(tzinfo=None)
        return value

    return tuple(str(plain(row[c])) for c in columns)


def test_the_reader_sees_what_spark_sees_including_deletion_vectors(spark, history):
    rejects_uri = f"{history.warehouse}/_system/rejects"
    assert has_deletion_vectors(rejects_uri), "the history must leave a deletion vector in the ledger"
    for name, columns in (("runs", summary.RUN_COLUMNS), ("rejects", summary.REJECT_COLUMNS)):
        expected = sorted(_comparable(row, columns) for row in history.spark_rows(spark, name))
        read = table_rows(f"{history.warehouse}/_system/{name}", columns)
        assert sorted(_comparable(row, columns) for row in read) == expected
    pending = {(r["consumer"], r["key"]): r for r in table_rows(rejects_uri, summary.REJECT_COLUMNS)
               if r["table"] == history.table}
    assert sorted(pending) == [("crm", '{"id":5}'), ("marketing", '{"id":3}')]
    assert REFUSED in pending["crm", '{"id":5}']["error"] and pending["crm", '{"id":5}']["attempts"] == 2
    assert pending["marketing", '{"id":3}']["attempts"] == 3


def test_the_plugin_is_registered_both_ways_airflow_loads_provider_plugins():
    """The ``airflow.plugins`` entry point (always loaded) and ``get_provider_info()["plugins"]``
    (loaded with ``lazy_discover_providers`` off) name the same class."""
    from configparser import ConfigParser
    from importlib import import_module

    from airflow_reverse_etl.get_provider_info import get_provider_info
    from airflow_reverse_etl.ui.plugin import ReverseEtlUiPlugin

    setup = ConfigParser()
    setup.read(REPO / "setup.cfg")
    [entry] = setup["options.entry_points"]["airflow.plugins"].strip().splitlines()
    name, target = (part.strip() for part in entry.split("="))
    assert target.replace(":", ".") == f"{ReverseEtlUiPlugin.__module__}.{ReverseEtlUiPlugin.__qualname__}"
    [declared] = get_provider_info()["plugins"]
    assert declared["name"] == name == ReverseEtlUiPlugin.name
    module, _, cls = declared["plugin-class"].rpartition(".")
    assert getattr(import_module(module), cls) is ReverseEtlUiPlugin


def test_a_table_never_written_reads_as_no_rows(tmp_path):
    assert table_rows(str(tmp_path / "_system" / "rejects"), summary.REJECT_COLUMNS) == []


def _expected_syncs(spark, history) -> dict[str, summary.Sync]:
    runs = [r for r in history.spark_rows(spark, "runs") if r["table"] == history.table]
    rejects = [r for r in history.spark_rows(spark, "rejects") if r["table"] == history.table]
    return {s.consumer: s for s in summary.summarise(runs, rejects)}


def test_the_summary_counts_each_sync_per_logical_day(spark, history):
    syncs = _expected_syncs(spark, history)
    assert sorted(syncs) == ["crm", "marketing"]
    crm, marketing = syncs["crm"], syncs["marketing"]
    assert [d.day for d in crm.days] == ["2026-01-01", "2026-01-02", "2026-01-03"]
    assert crm.runs == 3 and crm.failed == 1 and [d.failed for d in crm.days] == [0, 0, 1]
    assert crm.pending_rejects == 1 and marketing.pending_rejects == 1
    assert crm.destination == "sqlite:customers" and marketing.destination == "sqlite:contacts"
    runs = history.spark_rows(spark, "runs")
    for sync in (crm, marketing):
        its_runs = [r for r in runs if r["table"] == history.table and r["consumer"] == sync.consumer]
        assert sync.totals == {c: sum(r[c] for r in its_runs) for c in summary.OPERATIONS + summary.OUTCOMES}
    assert crm.totals["rejected"] == 4 and marketing.totals["deleted"] == 1 and marketing.failed == 0
    # a rerun of a delivered version is a run, not a failure, and sends nothing
    assert marketing.runs == 4 and [d.failed for d in marketing.days] == [0, 0, 0]


def _card(dom: str, table: str, consumer: str) -> str:
    match = re.search(rf'<section class="card sync" data-table="{re.escape(table)}" '
                      rf'data-consumer="{re.escape(consumer)}">(.*?)</section>', dom, re.S)
    assert match, f"no card for {table} -> {consumer} in the view"
    return match.group(1)


def _figure(card: str, name: str) -> int:
    match = re.search(rf"<span>{name} <b>(\d+)</b></span>", card)
    assert match, f"no {name} figure in {card[:300]}"
    return int(match.group(1))


def test_the_view_in_airflow_shows_syncs_counts_and_rejects(spark, history, airflow_standalone, chromium,
                                                           test_output):
    plugins = airflow_standalone.api("GET", "/plugins")["plugins"]
    assert any(p["name"] == "reverse_etl" for p in plugins), (
        f"the provider's UI plugin is not loaded ({[p['name'] for p in plugins]}): reinstall the package "
        "(make setup) so its airflow.plugins entry point is registered")

    # The Airflow UI page of the menu entry frames the view ...
    page = chromium.dom(f"{airflow_standalone.url}/plugin/{UI_ROUTE}")
    assert re.search(r'<iframe[^>]*src="reverse-etl/"', page) and 'title="Reverse ETL syncs"' in page

    # ... which shows each sync with the counts of the run history and the pending rejects' errors.
    view = chromium.dom(f"{airflow_standalone.url}{URL_PREFIX}/")
    for consumer, expected in _expected_syncs(spark, history).items():
        card = _card(view, history.table, consumer)
        assert _figure(card, "runs") == expected.runs and _figure(card, "failed") == expected.failed
        for name in summary.OPERATIONS + summary.OUTCOMES:
            assert _figure(card, name) == expected.totals[name], (consumer, name)
        assert _figure(card, "pending rejects") == 1
        assert len(re.findall(r'<g class="bar"', card)) == 3  # one bar per logical day
    marketing = _card(view, history.table, "marketing")
    assert "last run: already_delivered" in marketing
    assert '<td class="status-already_delivered">already_delivered</td>' in marketing
    assert re.search(r"\.status-success,\.status-already_delivered\{color:#2b8a3e\}", view)  # green, as success
    rejects = unescape(view.split('<table class="rejects">', 1)[1])
    assert '{"id":5}' in rejects and '{"id":3}' in rejects and rejects.count(REFUSED) >= 2

    shot = chromium.screenshot(f"{airflow_standalone.url}/plugin/{UI_ROUTE}", test_output / "reverse-etl-view.png",
                               size=(1400, 1200))
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
