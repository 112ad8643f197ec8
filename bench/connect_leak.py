"""Scenario 10, a long-lived Spark Connect server: ``--jobs`` jobs (default 201: snapshot -> diff ->
sync rounds, the sync delivering to a real HTTP destination from the server's Python workers), each
run as an Airflow task runs it (:class:`SparkConnectRunner`: a new session per job), against one
server started by ``scripts/services/spark_connect.sh`` as the tests start theirs
(``tests_common.spark_connect.own_server``: ``local[2]``, 1 GB driver, small shuffles).

After every round the server's Python worker processes (children of its JVM), its JVM's RSS and
threads, and the RSS of the JVM and its Python workers together are sampled:

- ``connect_daemons_after_200_jobs``: Python worker processes under the server after the last job
  (with pyspark's daemon, Spark 4.2 left one ~47 MB ``pyspark.daemon`` per session that ran Python);
- ``connect_server_rss_growth_mib``: growth of the JVM + workers RSS from the first sample after
  ``WARM_JOBS`` jobs (class loading, JIT and the heap settle there) to the last;
- ``connect_server_rss_growth_from_start_mib``, ``connect_jvm_threads_growth`` (one sleeping
  "Idle Worker Monitor" thread stays per session, SPARK-54055), the per-round samples.

``python -m bench.connect_leak --out FILE [--jobs N] [--record]``; ``--record`` merges the result into
``bench/results/latest.json`` as ``scenarios["10"]``, keeping the other scenarios.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import Goals, record

WARM_JOBS = 30

GOALS: Goals = {}  # no goal was set for these figures: they are read as trends between runs


def measure(jobs: int, work: Path) -> dict:
    from tests_common.connect_pipeline import ConnectPipeline, http_destination_spec
    from tests_common.webhook_receiver import HttpDestination
    from tests_common.spark_connect import own_server

    samples = []
    started = time.monotonic()
    with HttpDestination(history=False) as destination, own_server() as server:
        pipeline = ConnectPipeline(server.url, work, http_destination_spec(destination))
        samples.append({"jobs": 0, **vars(server.footprint())})
        done = 0
        while done < jobs:
            pipeline.round(range(1, 101 + pipeline.rounds))  # one more row every round
            done += 3
            samples.append({"jobs": done, **vars(server.footprint())})
            print(json.dumps(samples[-1]), flush=True)
        correct = sorted(destination.table) == list(range(1, 100 + pipeline.rounds))
    warm = next(s for s in samples if s["jobs"] >= WARM_JOBS)
    first, last = samples[0], samples[-1]
    figures = {"jobs": last["jobs"], "wall_s": round(time.monotonic() - started, 1),
               "connect_daemons_after_200_jobs": last["python_workers"],
               "connect_server_rss_growth_mib": round(last["total_rss_mib"] - warm["total_rss_mib"], 1),
               "connect_server_rss_growth_from_start_mib": round(last["total_rss_mib"] - first["total_rss_mib"], 1),
               "connect_jvm_threads_growth": last["jvm_threads"] - warm["jvm_threads"],
               "connect_max_python_workers": max(s["python_workers"] for s in samples)}
    return {"figures": figures, "samples": samples, "correct": {"destination_equals_source": correct}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--jobs", type=int, default=201)
    parser.add_argument("--record", action="store_true",
                        help="also merge the result into bench/results/latest.json as scenarios['10']")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = measure(args.jobs, Path(tempfile.mkdtemp(prefix="aretl-bench-connect-leak-")))
    result["figures"]["load_avg_at_start"] = [round(x, 1) for x in os.getloadavg()]
    out.write_text(json.dumps(result, indent=2))
    if args.record:
        record(result, "10")
    print(json.dumps(result["figures"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
