"""The demo DAG file (dags/reverse_etl_demo.py) loaded as a module for the DAG-level tests, with its
paths under the test's tmp dir: it reads ARETL_DEMO_DIR and the warehouse option at import time."""

from __future__ import annotations

import importlib.util

from tests_common.paths import REPO


def load_demo(monkeypatch, tmp_path, dag_file: str = "reverse_etl_demo.py"):
    """The example DAG file ``dag_file`` (the demo by default) as a module, its paths under ``tmp_path``."""
    monkeypatch.setenv("ARETL_DEMO_DIR", str(tmp_path / "demo"))
    monkeypatch.setenv("AIRFLOW__REVERSE_ETL__WAREHOUSE", str(tmp_path / "warehouse"))
    spec = importlib.util.spec_from_file_location(f"{dag_file[:-3]}_under_test", REPO / "dags" / dag_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
