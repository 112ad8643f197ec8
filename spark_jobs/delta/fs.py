"""Small-file I/O through Hadoop's FileSystem, so job specs and results work on any warehouse URI
Spark can reach (local paths, s3a://, abfss://, hdfs://) with Spark's own credentials.

This reaches into the driver's JVM (py4j), which only a classic session has: it serves the
spark-submit bootstrap (:func:`spark_jobs.entry.main`) and the file swap of the Parquet format of the
Delta sink. Over Spark Connect these operations fail with a clear error instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_jobs.errors import ConfigError

if TYPE_CHECKING:
    from py4j.java_gateway import JavaObject, JVMView
    from pyspark.sql import SparkSession


def _jvm(spark: SparkSession) -> JVMView:
    """The driver's JVM of a classic session (pyspark types it as optional: None before any
    SparkContext started, which cannot be the case for a session's)."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        raise RuntimeError("The Spark driver's JVM is not running")
    return jvm


def _fs_and_path(spark: SparkSession, uri: str) -> tuple[JavaObject, JavaObject]:
    from spark_jobs.session import is_connect

    if is_connect(spark):
        raise ConfigError(f"File operations on {uri} need the Spark driver's JVM, which a Spark Connect session "
                          "does not expose (the Parquet format of the delta destination renames files): use "
                          "format 'delta', or run this job through spark-submit")
    path = _jvm(spark).org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def read_text(spark: SparkSession, uri: str) -> str:
    fs, path = _fs_and_path(spark, uri)
    stream = fs.open(path)
    try:
        data = _jvm(spark).org.apache.commons.io.IOUtils.toByteArray(stream)
    finally:
        stream.close()
    return bytes(data).decode("utf-8")


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    fs, path = _fs_and_path(spark, uri)
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def delete(spark: SparkSession, uri: str) -> None:
    fs, path = _fs_and_path(spark, uri)
    fs.delete(path, True)


def exists(spark: SparkSession, uri: str) -> bool:
    fs, path = _fs_and_path(spark, uri)
    found: bool = fs.exists(path)
    return found


def rename(spark: SparkSession, source: str, target: str) -> None:
    """Move ``source`` to ``target`` (same file system); fails loudly rather than half-moving."""
    fs, path = _fs_and_path(spark, source)
    _, destination = _fs_and_path(spark, target)
    if not fs.rename(path, destination):
        raise OSError(f"Could not rename {source} to {target}")
