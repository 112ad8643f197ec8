"""What every benchmark scenario shares, in one public module: where things are, the one in-process
Spark session of a run, timing, running a job, and recording a scenario's result into the table.

Scenario modules (``bench.bench_sinks``, ``bench.bench_widen``, ``bench.latency``, ``bench.live``,
``bench.fleet``, ``bench.connect_leak``, ``bench.orchestration``) import from here and from
``tests_common`` (the support package the tests share), never from each other's private names nor
from :mod:`bench.run`, which imports them all: so the imports go one way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from spark_jobs.contract import DATAFRAME_DEBUGGING_OFF

REPO = Path(__file__).resolve().parents[1]
JARS_DIR = REPO / ".cache" / "jars"
RESULTS = REPO / "bench" / "results"
LATEST = RESULTS / "latest.json"

#: figure or ratio name -> (goal text, predicate on its value)
Goals = dict[str, tuple[str, Callable[[Any], bool]]]


def session(rows: int, master: str = "local[2]") -> Any:
    """The one session of the run (local[2] unless ``master``), with the Delta jars of ``.cache/jars``."""
    from spark_jobs.session import build_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = build_session("aretl-bench", master=master, jars_dir=str(JARS_DIR), conf={
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Delta log replay: its default of 50 tasks per table read is the fixed cost that dominated
        # every job at 100k rows (each history or table lookup replays the log)
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.driver.memory": "4g",
        **DATAFRAME_DEBUGGING_OFF,  # as the hook sets it for every job it submits
        # sized for the data: ~1 partition per 125k rows, at least the two cores' worth
        "spark.sql.shuffle.partitions": str(max(4, rows // 125_000)),
    })
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return round(time.perf_counter() - started, 3), value


def job(spark: Any, job_name: str, warehouse: str, **spec: Any) -> dict[str, Any]:
    """Run a job in ``spark`` as the entry point would; raise if it failed."""
    from spark_jobs.entry import run

    result: dict[str, Any] = run(spark, {"job": job_name, "warehouse": warehouse, **spec})
    if result["status"] != "success":
        raise RuntimeError(f"{job_name} failed: {result['error']}")
    return result


def start_consumer(spark: Any, warehouse: str, table: str, version: int) -> None:
    """Mark ``version`` as delivered, as a sync would, so the timed diff reads only the next change."""
    from spark_jobs.contract import Warehouse
    from spark_jobs.state import consumers

    consumers.commit(Warehouse(warehouse), table, "bench", version, "bench-setup")


def record(result: dict[str, Any], scenario: str, path: Path = LATEST) -> None:
    """Put ``result`` into the table at ``path`` as ``scenario`` of every repetition, keeping the
    other scenarios (a scenario run alone with ``--record``), with the run's ``submit_noop_s``
    (:func:`with_reference`)."""
    with_reference(result)
    report = json.loads(path.read_text())
    for run in report["runs"]:
        run["scenarios"][scenario] = result
    path.write_text(json.dumps(report, indent=2, default=str))


def verdicts(result: dict[str, Any], goals: Goals) -> list[str]:
    """One line per goal on the result's figures and ratios, and one per wrong result."""
    values = {**result["figures"], **result.get("ratios", {})}
    lines = [f"{name}: {values[name]} (goal {goal}): {'met' if ok(values[name]) else 'NOT met'}"
             for name, (goal, ok) in goals.items() if name in values]
    lines += [f"WRONG RESULT: {name}" for name, ok in result["correct"].items() if not ok]
    return lines


# ---------------------------------------------------------------- the reference of every wall time

NOOP_APP = """
import sys
if sys.argv[1:] == ["plain"]:  # no Delta: what the jars and the extension add is the difference
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
else:
    from spark_jobs.session import build_session
    spark = build_session()
spark.range(1).count()
spark.stop()
"""

DELTA_SESSION_CONF = ("spark.sql.extensions", "spark.sql.catalog.spark_catalog")


def airflow_environment(home: Path) -> None:
    """Point this process's Airflow at a throw-away ``home`` (its metadata database, DAGs folder and
    warehouse), with the jars of ``.cache/jars``. Airflow reads its configuration at import time, so
    this runs before anything imports it."""
    os.environ["AIRFLOW_HOME"] = str(home)
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(home / "dags")
    os.environ["AIRFLOW__REVERSE_ETL__JARS_DIR"] = str(JARS_DIR)
    os.environ["AIRFLOW__REVERSE_ETL__WAREHOUSE"] = str(home / "warehouse")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    bin_dir = os.path.dirname(sys.executable)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def submit_noop(home: Path, jars: bool = True) -> float:
    """Wall time of a spark-submit, with the settings the operators' hook gives every job, that only
    starts a Delta session and stops: the fixed cost of every spark-submit job. ``jars=False`` starts a
    plain Spark session (no Delta jars, extension or catalog) for comparison. Needs this process's
    Airflow configured (:func:`airflow_environment`)."""
    from airflow_reverse_etl.hooks.spark_job import SparkJobHook, spark_jobs_archive

    jar_list, conf = SparkJobHook()._jars_and_conf()
    app = home / "noop.py"
    app.write_text(NOOP_APP)
    argv = ["spark-submit", "--master", "local[*]", "--py-files", spark_jobs_archive()]
    if jars and jar_list:
        argv += ["--jars", jar_list]
    for key, value in conf.items():
        if jars or key not in DELTA_SESSION_CONF:
            argv += ["--conf", f"{key}={value}"]
    started = time.perf_counter()
    subprocess.run(argv + [str(app)] + ([] if jars else ["plain"]), check=True, capture_output=True)
    return round(time.perf_counter() - started, 2)


def submit_noop_s() -> float:
    """:func:`submit_noop` with the jars, from a child process with a throw-away Airflow home (so any
    scenario can measure it, whatever its own process holds). The machines these benchmarks run on
    change speed 2-3x from day to day: every goal on a wall time is a ratio to this figure measured in
    the same run (issue 36)."""
    home = Path(tempfile.mkdtemp(prefix="aretl-bench-noop-"))
    code = ("import sys; from pathlib import Path; from bench.harness import airflow_environment, submit_noop; "
            "home = Path(sys.argv[1]); airflow_environment(home); print(submit_noop(home))")
    done = subprocess.run([sys.executable, "-c", code, str(home)], cwd=REPO, capture_output=True, text=True,
                          check=True, stdin=subprocess.DEVNULL)
    return float(done.stdout.strip().splitlines()[-1])


def with_reference(result: dict[str, Any], noop_s: float | None = None) -> dict[str, Any]:
    """``result`` with ``submit_noop_s`` among its figures: ``noop_s`` when given (measured once for
    several scenarios of a run), else measured now, unless the scenario measured it itself. A failed
    scenario (``error``) is left as it is."""
    figures = result.get("figures")
    if figures is not None and "submit_noop_s" not in figures:
        figures["submit_noop_s"] = submit_noop_s() if noop_s is None else noop_s
    return result


def per_noop(seconds: float, noop_s: float) -> float:
    """``seconds`` as a multiple of the same run's ``submit_noop_s``."""
    return round(seconds / noop_s, 3)
