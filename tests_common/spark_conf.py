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
  and Spark keeps the two paths equal;
- pyspark's DataFrame debugging off, as in every job the hook submits
  (:data:`spark_jobs.contract.DATAFRAME_DEBUGGING_OFF`: no call site recorded per Column call).

The long-lived JVMs of the suite (the in-process sessions, which live for the whole run, and the
Spark Connect server) also take the throughput collector (:data:`LONG_LIVED_JVM_CONF`): G1, the JVM's
default, runs concurrent threads (remembered-set refinement, marking) that compete for the two cores
with everything else the suite runs, where the parallel collector does nothing between its short
stop-the-world pauses on a heap of a gigabyte or two. Three test files in one process (24 tests):
211-216 s -> 195 s. A JVM that lives for a few seconds of tiny jobs (a spark-submit job, a crash
test's killed driver) takes :data:`SHORT_LIVED_JVM_CONF` instead: its optimising (C2) compiler would
spend much of that time on code the JVM then hardly runs again, so C1 alone
(``-XX:TieredStopAtLevel=1``) and the serial collector (the demo DAG over spark-submit, nine jobs:
202 s -> 159 s).

The product and the benchmarks (``bench/``) keep Spark's defaults: at a million rows the generated
code is what makes the jobs fast, and the benchmarks are where that path is measured.
"""

from __future__ import annotations

from spark_jobs.contract import DATAFRAME_DEBUGGING_OFF

#: Spark conf key -> value, for every Spark process of the test suite
TEST_SPARK_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    **DATAFRAME_DEBUGGING_OFF,  # as in the jobs the hook submits
}

# ``defaultJavaOptions`` is prepended to a process's own ``extraJavaOptions`` (the hook sets the
# driver's), so neither replaces the other.
#: Spark conf of the JVMs that live for the whole run (in-process sessions, the Connect server)
LONG_LIVED_JVM_CONF = {"spark.driver.defaultJavaOptions": "-XX:+UseParallelGC"}
_SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"
#: Spark conf of the JVMs that live for seconds: spark-submit drivers and executors, killed drivers
SHORT_LIVED_JVM_CONF = {"spark.driver.defaultJavaOptions": _SHORT_LIVED_JVM,
                        "spark.executor.defaultJavaOptions": _SHORT_LIVED_JVM}
