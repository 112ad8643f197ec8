"""A warehouse with a few days of sync history, written by the real jobs in the in-process Spark
session, for the UI view's tests: two consumers of one table, each destination refusing some rows
(a CHECK constraint), a run failed for too many rejects, and a ledger with deletion vectors, as on a
warehouse where they are on by default: the rejects table compacted by the maintenance job, then a
Spark UPDATE of one consumer's entry, which marks its old copy deleted in place. The last syncs then
settle entries in that file (the driver's delta-rs MERGE, which must keep the row the deletion vector
hides hidden), and a last Spark UPDATE leaves a deletion vector for the readers."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests_common.jobs import job
from tests_common.pipeline import Pipeline

#: the error a destination gives a refused row
REFUSED = "CHECK constraint failed"
DAYS = [
    [(1, "ann", "oslo"), (2, "bob", "bad"), (3, "cid", "rome"), (4, "dan", "kyiv")],
    [(1, "anna", "oslo"), (2, "bob", "bad"), (3, "cid", "rome"), (4, "dan", "kyiv"), (5, "eve", "bad")],
    [(1, "anna", "oslo"), (2, "bob", "lima"), (3, "cid", "rome"), (5, "eve", "bad")],
]


#: the snapshot table the history is about; not the demo's, so it can share a warehouse with it
TABLE = "ui_accounts"


@dataclass
class SyncHistory:
    warehouse: str
    table: str  # as the system tables name it: snapshots/<TABLE>
    consumers: dict[str, dict[str, Any]]  # consumer -> its destination

    def spark_rows(self, spark, name: str) -> list[dict[str, Any]]:
        """The system table ``name`` as Spark reads it: the reference the Spark-free reader must match."""
        return [row.asDict() for row in spark.read.format("delta").load(f"{self.warehouse}/_system/{name}").collect()]


def _refusing_destination(path: Path, table: str, check: str) -> dict[str, Any]:
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT, city TEXT CHECK ({check}))")
    return {"type": "sqlite", "database": str(path), "table": table}


def _compact_with_deletion_vectors(spark, warehouse: str) -> None:
    """Turn deletion vectors on for the rejects table and compact it, so both consumers' entries
    share a file; then update marketing's entry through a deletion vector."""
    spark.sql(f"ALTER TABLE delta.`{warehouse}/_system/rejects` "
              "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    job(spark, "maintenance", warehouse, table="_system/rejects", optimize=True, vacuum=False)
    _update_through_deletion_vector(spark, warehouse)


def _update_through_deletion_vector(spark, warehouse: str) -> None:
    """Update marketing's entry as Spark does with deletion vectors on: its copy in its file is marked
    deleted in place, and the row written again in a file of its own."""
    spark.sql(f"UPDATE delta.`{warehouse}/_system/rejects` SET sink = sink WHERE consumer = 'marketing'")


def write_sync_history(spark, warehouse: Path, root: Path) -> SyncHistory:
    """Three logical days of syncs of snapshots/TABLE into ``warehouse`` (which may hold other tables
    already); sources and destinations under ``root``. Pending at the end: CRM refuses row 5 (city),
    marketing refuses row 3 (name); marketing's last sync ran twice, the second time as already delivered."""
    crm = _refusing_destination(root / "crm.db", "customers", "city <> 'bad'")
    marketing = _refusing_destination(root / "marketing.db", "contacts", "name <> 'cid'")
    p = Pipeline(spark, str(warehouse), root, consumer="crm", name=TABLE)
    for day, rows in enumerate(DAYS):
        crm_changes = p.step(rows)
        run = {"dag_id": "reverse_etl_demo", "logical_date": (p.day + timedelta(days=day)).isoformat()}
        marketing_changes = p.diff("marketing")
        p.sync(marketing_changes, marketing, mode="mirror", task_id="sync_marketing", **run)
        if day < len(DAYS) - 1:
            p.sync(crm_changes, crm, task_id="sync_crm", **run)
            continue
        _compact_with_deletion_vectors(spark, str(warehouse))
        # row 2 is delivered at last (its entry leaves), row 5 is refused again: 1 of 2 is too many
        p.sync_error(crm_changes, crm, max_reject_fraction=0.1, task_id="sync_crm", **run)
        # the marketing task cleared and run again: its version is the committed one
        p.sync(marketing_changes, marketing, mode="mirror", task_id="sync_marketing", **run)
    _update_through_deletion_vector(spark, str(warehouse))
    return SyncHistory(str(warehouse), f"snapshots/{TABLE}", {"crm": crm, "marketing": marketing})


def has_deletion_vectors(table_uri: str) -> bool:
    """Whether any commit of the Delta table at ``table_uri`` added a file with a deletion vector."""
    for commit in sorted(Path(table_uri, "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add")
            if add and add.get("deletionVector"):
                return True
    return False
