"""The Spark settings of every Spark process the tests start: the in-process sessions, the Spark
Connect server, spark-submit clients and the standalone cluster. Sized for test tables, which hold
tens of rows, on a 2-core machine:

- a handful of shuffle partitions and Delta log-replay partitions, not Spark's 200 and 50;
- interpreted evaluation instead of generated code (``spark.sql.codegen.wholeStage`` off and
  ``spark.sql.codegen.factoryMode`` ``NO_CODEGEN``, the setting Spark's own suites use to run the
  interpreted path). For every new plan Spark generates Java source and compiles it with Janino; on
  ten rows that compilation is most of a job's time. Warm in-process session, ten-row table: a
  snapshot job 3.4 s -> 2.2 s, a diff job 2.8 s -> 1.8 s. The stages and their partitions, and so
  the files Delta writes, are the same; only how each operator evaluates its expressions differs,
  and Spark keeps the two paths equal.

The long-lived JVMs of the suite (the in-process sessions, which live for the whole run, and the
Spark Connect server) also take the throughput collector (:data:`LONG_LIVED_JVM_CONF`): G1, the JVM's
default, runs concurrent threads (remembered-set refinement, marking) that compete for the two cores
with everything else the suite runs, where the parallel collector does nothing between its short
stop-the-world pauses on a heap of a gigabyte or two. Three test files in one process (24 tests):
211-216 s -> 195 s. The short-lived spark-submit JVMs have their own settings
(:mod:`tests.support.spark_submit`).

The product and the benchmarks (``bench/``) keep Spark's defaults: at a million rows the generated
code is what makes the jobs fast, and the benchmarks are where that path is measured.
"""

from __future__ import annotations

#: Spark conf key -> value, for every Spark process of the test suite
TEST_SPARK_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}

#: Spark conf of the JVMs that live for the whole run (in-process sessions, the Connect server): the
#: throughput collector. ``defaultJavaOptions`` is prepended to a process's own ``extraJavaOptions``.
LONG_LIVED_JVM_CONF = {"spark.driver.defaultJavaOptions": "-XX:+UseParallelGC"}
