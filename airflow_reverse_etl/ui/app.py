"""The FastAPI app behind the view, mounted under Airflow's API server by :mod:`.plugin`.

``/`` is the page the UI menu entry opens; ``/api/syncs`` and ``/api/rejects`` return the same data
as JSON for scripts. Every request reads the warehouse anew (the tables are small), from the
provider's configuration (``[reverse_etl] warehouse``), and needs a user signed in to Airflow: the
page shows what was refused and why, which may quote the refused rows' values.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse

from airflow_reverse_etl.config import warehouse_uri
from airflow_reverse_etl.ui import page, summary
from spark_jobs import lake_io
from spark_jobs.contract import Warehouse
from spark_jobs.contract.system_tables import REJECTS, RUNS


def table_rows(uri: str, columns: list[str]) -> list[dict[str, Any]]:
    """Every row of the system table at ``uri`` as ``{column: value}`` for ``columns``, read whole with
    the driver-side Delta API (delta-rs: no JVM in the API server; the tables are small, one row per
    sync run or refused record). A table nobody wrote yet reads as no rows; columns an older release
    did not write read as None."""
    rows: list[dict[str, Any]] = lake_io.read_rows(lake_io.open_table(uri), columns).to_pylist()
    return rows


def _history() -> tuple[list[summary.Sync], list[dict[str, Any]]]:
    wh = Warehouse(warehouse_uri())
    rejects = summary.pending_rejects(table_rows(REJECTS.uri(wh), summary.REJECT_COLUMNS))
    return summary.summarise(table_rows(RUNS.uri(wh), summary.RUN_COLUMNS), rejects), rejects


def create_app() -> FastAPI:
    from airflow.api_fastapi.core_api.security import requires_authenticated

    app = FastAPI(title="Reverse ETL sync history", dependencies=[Depends(requires_authenticated())])

    @app.get("/", response_class=HTMLResponse)
    def view() -> str:
        syncs, rejects = _history()
        return page.render(warehouse_uri(), syncs, rejects)

    @app.get("/api/syncs")
    def syncs() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = summary.as_json(_history()[0])
        return rows

    @app.get("/api/rejects")
    def rejects() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = summary.as_json(_history()[1])
        return rows

    return app
