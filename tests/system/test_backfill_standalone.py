"""Backfill of the demo DAG through Airflow's own scheduler: a real ``airflow standalone`` (LocalExecutor),
``airflow backfill create`` and ``airflow tasks clear`` as a user runs them, every job on the Spark
Connect server. With the operators' default settings the runs that a backfill starts together record
their dates one at a time, oldest first; a cleared (reprocessed), already delivered date sends nothing; a date before
the newest recorded one is refused without stranding the backfill (its task is skipped with the command
to run next, and the later dates of the backfill go on); that command rebuilds it, and the history stays
in date order."""

import json
import sqlite3
import urllib.request
from datetime import datetime, timezone

import pytest
from demo_customers import SOURCE_BY_DAY

from airflow_reverse_etl.delta_log import commits
from spark_jobs.contract.layout import walk_recorded
from tests_common.jobs import job

DAG_ID = "reverse_etl_demo"
DAY_1, DAY_2, DAY_3 = "2026-01-01", "2026-01-02", "2026-01-03"
ALL_DONE = {"extract_customers": "success", "snapshot_customers": "success", "diff_customers": "success",
            "sync_crm": "success"}
NOTHING_TO_SEND = {**ALL_DONE, "diff_customers": "skipped", "sync_crm": "skipped"}
REFUSED = {**NOTHING_TO_SEND, "snapshot_customers": "skipped"}
REBUILD = ("--dag-run-conf", json.dumps({"on_past_date": "rebuild"}))




@pytest.fixture
def airflow(airflow_standalone):
    """The instance with no demo history: no runs of the demo DAG, an empty warehouse and demo folder."""
    import shutil

    if airflow_standalone.wait_for_dag(DAG_ID)["is_paused"]:
        airflow_standalone.unpause(DAG_ID)  # a paused DAG's runs, backfills included, do not start
    airflow_standalone.wait_for_backfills(DAG_ID)
    airflow_standalone.delete_runs(DAG_ID)
    for folder in (airflow_standalone.warehouse, airflow_standalone.demo_dir):
        shutil.rmtree(folder, ignore_errors=True)
    return airflow_standalone


def line_of_history(airflow) -> list[tuple[str, int]]:
    """(logical date, version) of the snapshot table's line of history, oldest first (read from the
    Delta log, as the sensor does)."""
    dates = [(date[:10], entry["version"])
             for date, _, entry in walk_recorded(commits(str(airflow.warehouse / "snapshots" / "customers")))]
    return dates[::-1]


def crm(airflow) -> list[tuple]:
    with sqlite3.connect(airflow.demo_dir / "crm.db") as conn:
        return conn.execute("SELECT contact_id, full_name, email, city, segment FROM crm_contacts "
                            "ORDER BY contact_id").fetchall()


def rows(day: str) -> list[tuple]:
    return [(key, *values) for key, values in sorted(SOURCE_BY_DAY[day].items())]


def run_id(airflow, day: str) -> str:
    return next(r for r in airflow.dag_runs(DAG_ID) if r["logical_date"].startswith(day))["dag_run_id"]


def run_states(airflow, day: str) -> dict[str, str | None]:
    return airflow.task_states(DAG_ID, run_id(airflow, day))


def synced_versions(airflow) -> list[tuple[int, bool]]:
    """(to_version, committed) of every sync job, in the order they ran."""
    results = sorted((airflow.warehouse / "_system" / "jobs").glob("*-sync-*/result.json"))
    return [(r["to_version"], r["committed"]) for r in map(json.loads, (p.read_text() for p in results))]


# Airflow requires a reprocess behaviour for DAGs with depends_on_past tasks: "failed" re-runs
# the dates whose runs failed and leaves the successful ones.
REPROCESS = ("--reprocess-behavior", "failed")


def scd2(days: list[str]) -> list[tuple]:
    """The SCD2 rows the history must hold: per key, one row per run of days with the same values."""
    out = []
    for key in sorted({k for day in days for k in SOURCE_BY_DAY[day]}):
        start, image = None, None
        for day in days:
            value = SOURCE_BY_DAY[day].get(key)
            if value != image:
                if image is not None:
                    out.append((key, *image, start, day))
                start, image = day, value
        if image is not None:
            out.append((key, *image, start, None))
    return sorted(out, key=lambda r: (r[0], r[-2]))


def test_a_backfill_records_dates_in_order_a_cleared_date_sends_nothing_and_an_earlier_date_rebuilds(
        airflow, connect_session):
    """One history through three user actions (sharing the instance's runs: each backfilled date is a
    minute of CI): a backfill of two dates, a backfill of an older and a delivered date with the default
    settings, and the rebuild command the refusal names."""
    from pyspark.sql import functions as F

    from spark_jobs.state.consumers import committed_version
    from spark_jobs.contract import Warehouse

    # Two runs at once, the DAG's default settings: they record their dates one at a time, oldest first.
    airflow.backfill(DAG_ID, DAY_2, DAY_3, *REPROCESS)
    assert airflow.wait_for_runs(DAG_ID, [DAY_2, DAY_3]) == {DAY_2: "success", DAY_3: "success"}
    assert line_of_history(airflow) == [(DAY_2, 0), (DAY_3, 1)]
    assert synced_versions(airflow) == [(0, True), (1, True)]
    assert crm(airflow) == rows(DAY_3)
    links_and_column_lineage_of_the_sync(airflow, run_id(airflow, DAY_3))

    # The last sync again (cleared after it committed): its version is the committed one, nothing to send.
    cleared_at = datetime.now(timezone.utc).isoformat()
    airflow.clear(DAG_ID, DAY_3, DAY_3, "-t", "sync_crm")
    assert airflow.wait_for_runs(DAG_ID, [DAY_3], since=cleared_at) == {DAY_3: "success"}
    assert synced_versions(airflow)[-1] == (1, False) and crm(airflow) == rows(DAY_3)

    # An older date with the default settings, in one backfill with the delivered date 2026-01-02: the older
    # one is refused (skipped, saying what to run next), and the later one does not wait for it forever.
    # 2026-01-02 runs again (reprocessing clears its run, as `airflow tasks clear` does): its snapshot is
    # reused, and the consumer already has a newer version, so nothing is sent.
    refused_at = datetime.now(timezone.utc).isoformat()
    airflow.backfill(DAG_ID, DAY_1, DAY_2, "--reprocess-behavior", "completed")
    assert airflow.wait_for_runs(DAG_ID, [DAY_1, DAY_2], since=refused_at) == {DAY_1: "success", DAY_2: "success"}
    assert run_states(airflow, DAY_1) == REFUSED and run_states(airflow, DAY_2) == NOTHING_TO_SEND
    log = airflow.task_log(DAG_ID, run_id(airflow, DAY_1), "snapshot_customers")
    command = (f"airflow backfill create --dag-id {DAG_ID} --from-date {DAY_1} --to-date {DAY_1} "
               f"--reprocess-behavior completed --dag-run-conf '{REBUILD[1]}'")
    assert "older than the newest recorded one" in log and command in log, log
    assert line_of_history(airflow) == [(DAY_2, 0), (DAY_3, 1)]
    assert crm(airflow) == rows(DAY_3)

    # The command it named, right after (the backfill ended): the date goes in by rebuilding forward.
    rebuilt_at = datetime.now(timezone.utc).isoformat()
    airflow.backfill(DAG_ID, DAY_1, DAY_1, "--reprocess-behavior", "completed", *REBUILD)
    assert airflow.wait_for_runs(DAG_ID, [DAY_1], since=rebuilt_at) == {DAY_1: "success"}
    # v2 restores the table to before 2026-01-01 (empty), v3 records it, v4 and v5 replay the later dates
    assert line_of_history(airflow) == [(DAY_1, 3), (DAY_2, 4), (DAY_3, 5)]
    assert run_states(airflow, DAY_1) == NOTHING_TO_SEND  # the CRM already has the newest date
    assert crm(airflow) == rows(DAY_3)
    warehouse = str(airflow.warehouse)
    # the consumer's position kept its meaning: 2026-01-03, now version 5
    assert committed_version(Warehouse(warehouse), "snapshots/customers", "crm") == 5

    job(connect_session, "history", warehouse, table="customers")
    history = connect_session.read.format("delta").load(f"{warehouse}/history/customers")
    got = [(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in history.select(
        "customer_id", "name", "email", "city", "tier", F.date_format("valid_from", "yyyy-MM-dd"),
        F.date_format("valid_to", "yyyy-MM-dd")).collect()]
    assert sorted(got, key=lambda r: (r[0], r[-2])) == scd2([DAY_1, DAY_2, DAY_3])


def links_and_column_lineage_of_the_sync(airflow, run: str) -> None:
    """The sync's "Spark application" link opens its session's page on the Connect server's UI, and its
    OpenLineage event says which change-set column each CRM field comes from."""
    link = airflow.extra_links(DAG_ID, run, "sync_crm")["Spark application"]
    assert link and "/connect/session/?id=" in link, link
    with urllib.request.urlopen(link, timeout=30) as page:
        assert link.split("?id=")[1] in page.read().decode()
    done = [e for e in airflow.openlineage_events() if e["eventType"] == "COMPLETE"
            and e["job"]["name"] == f"{DAG_ID}.sync_crm"]
    assert done, [e["job"]["name"] for e in airflow.openlineage_events()]
    (crm_table,) = done[-1]["outputs"]
    fields = crm_table["facets"]["columnLineage"]["fields"]
    (name,) = fields["full_name"]["inputFields"]
    assert (name["field"], name["transformations"][0]["subtype"]) == ("name", "IDENTITY")
    assert fields["full_name"]["transformationType"] == "RENAME" and fields["source"]["inputFields"] == []
