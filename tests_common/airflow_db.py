"""The Airflow metadata database for tests that parse or run DAGs (SQLite in the throw-away
``AIRFLOW_HOME`` that tests/conftest.py sets before anything imports Airflow)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def airflow_db():
    """Create the Airflow metadata DB (SQLite) once for tests that run DAGs."""
    from airflow.utils.db import initdb

    initdb()
    return os.environ["AIRFLOW_HOME"]
