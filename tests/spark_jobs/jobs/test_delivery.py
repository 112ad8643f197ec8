"""Driver-side delivery (issue 36): a change set of at most ``delivery.driver_max_records`` records is
delivered from the job's driver, a larger one from the executors — and both give the same
destination, the same counts, the same reject ledger and the same run history. Two consumers of one
snapshot table sync the same changes to two real HTTP servers, one under the threshold, one above it
(``driver_max_records=0``); every step, including a refused record that the next run sends again and
a mirror delete, must come out identical but for where it ran."""

from __future__ import annotations

from tests_common.webhook_receiver import HttpDestination
from tests_common.pipeline import Pipeline

DAY1 = [(i, f"n{i}", f"c{i % 3}") for i in range(12)]
DAY2 = [(i, f"n{i}", "moved" if i % 4 == 0 else f"c{i % 3}") for i in range(1, 12)]  # 0 deleted, 3 updated
SIDES = {"driver": {"driver_max_records": 10_000}, "executors": {"driver_max_records": 0}}
RUN_FIELDS = ("status", "planned_upsert", "planned_delete", "resent", "sent", "inserted", "updated", "deleted",
              "rejected", "retried", "committed", "outcomes")


def counts(result):
    """The sync's counts, but the number of batches: the executors cut each partition into its own
    batches, the driver the whole change set, so the same records may make one batch more or less."""
    return {k: v for k, v in result["stats"].items() if k != "batches"}


def test_both_sides_of_the_threshold_give_the_same_destination_counts_ledger_and_history(spark, warehouse,
                                                                                        tmp_path):
    p = Pipeline(spark, warehouse, tmp_path, consumer="driver")
    with HttpDestination() as to_driver, HttpDestination() as to_executors:
        servers = {"driver": to_driver, "executors": to_executors}
        for server in servers.values():
            server.reject_records(lambda r: r["key"]["id"] == 5, error="email address invalid", times=1)
        results = {side: [] for side in SIDES}
        for rows in (DAY1, DAY2):
            changes = {"driver": p.step(rows), "executors": p.diff("executors")}
            for side, options in SIDES.items():
                results[side].append(p.sync(changes[side], {"type": "http", "url": servers[side].url},
                                            mode="mirror", delivery={"batch_size": 4, **options}))

        assert [r["delivered_from"] for r in results["driver"]] == ["driver", "driver"]
        assert [r["delivered_from"] for r in results["executors"]] == ["executors", "executors"]
        assert to_driver.rows() == to_executors.rows() and len(to_driver.rows()) == 11
        for mine, theirs in zip(results["driver"], results["executors"]):
            assert (counts(mine), mine["planned"], mine["resent"], mine["committed"]) == (
                counts(theirs), theirs["planned"], theirs["resent"], theirs["committed"])
    first, second = results["driver"]
    assert (first["stats"]["rejected"], second["resent"], second["stats"]["deleted"]) == (1, 1, 1)

    def history(consumer):
        runs = p.system("runs").where(f"consumer = '{consumer}'").orderBy("started_at").collect()
        return [{k: (dict(run[k]) if k == "outcomes" else run[k]) for k in RUN_FIELDS} for run in runs]

    def ledger(consumer):
        rejects = p.system("rejects").where(f"consumer = '{consumer}'").collect()
        return sorted((r["key"], r["error"], r["attempts"], r["version"]) for r in rejects)

    assert history("driver") == history("executors") and len(history("driver")) == 2
    assert ledger("driver") == ledger("executors")


def test_under_a_limit_the_delivering_partitions_are_equal_whatever_the_change_set_came_in(spark):
    """Each delivering partition sends at a fixed share of a sync-wide rate, so one that ends early
    leaves its share unused: a change set in one partition or in many is brought to D equal ones. A
    bound on parallelism alone (SQLite's one writer) merges partitions without a shuffle."""
    from pyspark.sql import functions as F

    from spark_jobs.contract.destinations import DeliveryPolicy
    from spark_jobs.jobs.delivery import delivering_partitions, resolve
    from spark_jobs.sinks import resolve_sink

    def sizes(frame):
        return sorted(r["count"] for r in frame.groupBy(F.spark_partition_id().alias("p")).count().collect())

    rest, sqlite = resolve_sink("http"), resolve_sink("sqlite")
    limited = resolve(DeliveryPolicy(requests_per_second=10.0), rest, lambda: 2, records=5_000)
    assert limited.partitions == 2 and not limited.on_driver
    for inputs in (1, 7):  # round-robin from each input partition: equal within one row per input partition
        brought = sizes(delivering_partitions(spark.range(0, 1000, numPartitions=inputs), limited, rest))
        assert len(brought) == 2 and sum(brought) == 1000 and brought[1] - brought[0] <= inputs, brought
    unlimited = resolve(DeliveryPolicy(), sqlite, lambda: 1 / 0, records=5_000)
    assert sizes(delivering_partitions(spark.range(0, 1000, numPartitions=3), unlimited, sqlite)) == [1000]
