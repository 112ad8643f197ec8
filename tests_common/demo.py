"""The example DAG files (dags/) loaded as modules for the DAG-level tests, with their paths under the
test's tmp dir: they read ARETL_DEMO_DIR (and their own ARETL_* paths) and the warehouse option at
import time."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests_common.paths import REPO


def load_example(file: str, module_name: str) -> ModuleType:
    """``dags/<file>`` as a fresh module (its DAG built from the environment as it is now)."""
    spec = importlib.util.spec_from_file_location(module_name, REPO / "dags" / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_demo(monkeypatch, tmp_path, dag_file: str = "reverse_etl_demo.py", *,
              warehouse: str | None = None) -> ModuleType:
    """The example DAG file ``dag_file`` (the demo by default) with its files under ``tmp_path/demo``
    and its lake in ``warehouse`` (default ``tmp_path/warehouse``)."""
    monkeypatch.setenv("ARETL_DEMO_DIR", str(tmp_path / "demo"))
    monkeypatch.setenv("AIRFLOW__REVERSE_ETL__WAREHOUSE", warehouse or str(tmp_path / "warehouse"))
    return load_example(dag_file, f"{dag_file[:-3]}_under_test")


def task_xcom(run, task_id: str):  # type: ignore[no-untyped-def]  # a DagRun of dag.test()
    """The return value (XCom) of ``task_id`` in the ``dag.test()`` run ``run``."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        value = session.scalar(
            XComModel.get_many(run_id=run.run_id, dag_ids=run.dag_id, task_ids=task_id, key="return_value")
            .with_only_columns(XComModel.value))
    return XComModel.deserialize_value(type("X", (), {"value": value})())
