"""Scenario 11 (issue 34): how much of a SaaS API's documented rate limit a sync uses, whole job.

    .venv/bin/python -m bench.rate_limit [--records 50000] [--record]

The HubSpot emulator (``tests_common/emulators/hubspot.py``) enforces what HubSpot documents for a
private app on Free/Starter: 100 requests per rolling 10 seconds, 100 inputs per batch request, a 429
past the limit. A change set of N contacts (default 100,000: about 100 s of requests at the limit) is
snapshotted and diffed, then delivered by the ``hubspot`` destination (batch upsert by a unique
property) with ``burst_limit`` 100 and its default ``limit_share`` 0.95 (``--limit-share``), the sync
job timed end to end on a local[2] session.

Figures:

* ``rest_rate_limit_utilisation`` — achieved requests per second over the **whole sync job** (planning,
  Spark's fixed costs, delivery, the run history) ÷ the allowed 10 requests/s; goal >= 0.9;
* ``rest_rate_limit_utilisation_delivery`` — the same over the delivery phase alone (``delivery_s``);
* ``rest_batch_fill`` — mean records per accepted upsert request ÷ the batch limit (100); goal >= 0.95;
* ``rest_429s`` — answers past the limit (each costs a wait of HubSpot's whole 10 s window);
* ``rest_requests``, ``rest_job_s``, ``rest_delivery_s``.

Correct when every contact is at the emulator and the sync sent each once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from bench.harness import REPO, Goals, job, timed

TOKEN_ENV = "ARETL_BENCH_HUBSPOT_TOKEN"
BURST = 100  # requests per rolling 10 s: HubSpot's documented private-app limit (Free/Starter)
WINDOW_S = 10.0
BATCH = 100
GOALS: Goals = {
    "rest_rate_limit_utilisation": (">= 0.9 of the allowed requests/s (whole job)", lambda r: r >= 0.9),
    "rest_batch_fill": (">= 0.95 of the batch limit", lambda r: r >= 0.95),
}


def changes(spark, warehouse: str, records: int) -> dict:
    """N contacts snapshotted and diffed for a fresh consumer: a change set of N inserts."""
    from pyspark.sql import functions as F

    source = f"{warehouse}-source"
    spark.range(1, records + 1).select(
        F.col("id").cast("int").alias("id"), F.concat(F.lit("user"), F.col("id"), F.lit("@example.com")).alias("email"),
        F.concat(F.lit("name-"), F.col("id")).alias("name")).write.mode("overwrite").parquet(source)
    job(spark, "snapshot", warehouse, name="contacts", primary_key=["id"], run_id="bench",
        logical_date="2026-01-01T00:00:00+00:00", source={"format": "parquet", "path": source})
    return job(spark, "diff", warehouse, table="snapshots/contacts", consumer="hubspot")


def measure(spark, work: Path, records: int, limit_share: float) -> dict:
    from spark_jobs.contract import change_set_fields
    from tests_common.emulators.hubspot import HubSpotApi

    shutil.rmtree(work, ignore_errors=True)
    warehouse = str(work / "warehouse")
    changed = changes(spark, warehouse, records)
    os.environ[TOKEN_ENV] = "pat-bench"
    with HubSpotApi(burst_limit=BURST, burst_window=WINDOW_S, history=False) as api:
        api.add_token("pat-bench")
        api.define_property("contacts", "customer_id", unique=True)
        destination = {"type": "hubspot", "id_property": "customer_id", "limit_share": limit_share,
                       "burst_limit": BURST, "connection": {"host": api.url}, "secrets_env": {"password": TOKEN_ENV}}
        spec = {**change_set_fields(changed), "run_id": "bench-sync", "destination": destination,
                "field_mapping": {"id": "customer_id", "email": "email", "name": "lastname"}}
        job_s, result = timed(job, spark, "sync", warehouse, **spec)
        upserts = api.requests_to("POST", "batch/upsert$")
        accepted = [r for r in upserts if r.status in (200, 207)]
        held = len(api.objects("contacts"))
    allowed = BURST / WINDOW_S
    figures = {
        "rest_rate_limit_utilisation": round(len(upserts) / job_s / allowed, 3),
        "rest_rate_limit_utilisation_delivery": round(len(upserts) / result["delivery_s"] / allowed, 3),
        "rest_batch_fill": round(records / max(1, len(accepted)) / BATCH, 3),
        "rest_429s": sum(1 for r in upserts if r.status == 429),
        "rest_requests": len(upserts), "rest_records": records, "rest_limit_share": limit_share,
        "rest_job_s": round(job_s, 2), "rest_delivery_s": result["delivery_s"],
    }
    return {"figures": figures, "correct": {"hubspot_holds_every_contact": held == records,
                                            "each_sent_once": result["stats"]["sent"] == records}}


def main() -> int:
    from bench.harness import record, session, verdicts

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--limit-share", type=float, default=0.95, help="the destination's limit_share")
    parser.add_argument("--work", default=str(REPO / ".cache" / "bench" / "rate_limit"))
    parser.add_argument("--out", help="also write the result to this file (what the harness reads)")
    parser.add_argument("--record", action="store_true",
                        help="also merge the result into bench/results/latest.json as scenarios['11']")
    args = parser.parse_args()
    load = [round(x, 1) for x in os.getloadavg()]
    spark = session(args.records)
    try:
        result = measure(spark, Path(args.work), args.records, args.limit_share)
    finally:
        spark.stop()
    result["load_avg"] = {"start": load, "end": [round(x, 1) for x in os.getloadavg()]}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    if args.record:
        record(result, "11")
    print(json.dumps(result, indent=2))
    print("\n".join(verdicts(result, GOALS)))
    return 0 if all(result["correct"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
