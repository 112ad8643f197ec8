"""The catalogue of Spark, Delta, JVM and Python failures (spark_jobs.error_conditions): every entry is
classified as declared in each shape the jobs meet it (a Spark Connect client's exception, a Py4JJavaError's
text from a classic session, a Python exception), and real errors from real Spark — an analysis error from
bad SQL, the MERGE key list of issue 33 §1, a missing path, a MERGE Delta refuses, a corrupt file — reach
the task as the category the catalogue gives them, in a classic session and over Spark Connect: the
product's own SQL is a defect, never retried (issue 33 §2)."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException
from py4j.protocol import Py4JJavaError, Py4JNetworkError

from airflow_reverse_etl.exceptions import ReverseEtlDefectError, job_failure
from spark_jobs.entry import failure
from spark_jobs.error_conditions import CATALOGUE, Entry, classify
from spark_jobs.errors import is_write_conflict


class RecordedPy4JJavaError(Py4JJavaError):
    """A Py4JJavaError as a classic session raises it for a Java exception PySpark does not convert,
    with the text the JVM gives (the real one asks the JVM for it, so it needs a live gateway)."""

    def __init__(self, text: str) -> None:
        Exception.__init__(self, text)
        self.text = text

    def __str__(self) -> str:
        return self.text


def py4j_shape(java_class: str, message: str) -> RecordedPy4JJavaError:
    return RecordedPy4JJavaError(f"An error occurred while calling o101.sql.\n: {java_class}: {message}\n\tat "
                                 "org.apache.spark.sql.Dataset.ofRows(Dataset.scala:105)\n")


def connect_shape(condition: str | None, sql_state: str | None = None):
    from pyspark.errors.exceptions.connect import AnalysisException

    return AnalysisException(message=f"[{condition}] what Spark said", errorClass=condition, messageParameters={},
                             sql_state=sql_state)


def shapes(entry: Entry) -> list[BaseException]:
    """The exceptions ``entry`` must match, one per shape the jobs meet it in."""
    if entry.condition:
        return [connect_shape(entry.condition), connect_shape(f"{entry.condition}.A_SUB_CONDITION")
                if "." not in entry.condition else connect_shape(entry.condition),
                py4j_shape("org.apache.spark.SparkException", f"[{entry.condition}] what Spark said SQLSTATE: 00000")]
    if entry.sqlstate:
        return [connect_shape("NOT_IN_THE_CATALOGUE", f"{entry.sqlstate}K01"),
                py4j_shape("org.apache.spark.SparkException",
                           f"[NOT_IN_THE_CATALOGUE] said SQLSTATE: {entry.sqlstate}000")]
    assert entry.exception
    if "." in entry.exception:  # a JVM class, top-level or a cause
        return [py4j_shape(entry.exception, "what went wrong"),
                py4j_shape("org.apache.spark.SparkException", f"Job aborted.\nCaused by: {entry.exception}: root")]
    import builtins

    cls = Py4JNetworkError if entry.exception == "Py4JNetworkError" else getattr(builtins, entry.exception)
    return [cls("what went wrong")]


@pytest.mark.parametrize("entry", CATALOGUE, ids=lambda entry: entry.key)
def test_each_entry_is_classified_as_declared_in_every_shape(entry):
    for shape in shapes(entry):
        found = classify(shape)
        assert found is not None and found.entry == entry, (shape, found)
        reported = failure(shape, None)
        assert (reported["category"], reported["retryable"]) == (entry.category, entry.category in (
            "infrastructure", "conflict")), reported
        raised = job_failure("snapshot", reported)
        assert isinstance(raised, AirflowFailException) is not entry.retryable


def test_what_the_catalogue_does_not_know_stays_retried_with_its_traceback():
    unknown = [RuntimeError("something nobody classified"), connect_shape("NOT_IN_THE_CATALOGUE", "HV000"),
               py4j_shape("org.apache.spark.SparkException", "Job aborted due to stage failure")]
    for exc in unknown:
        assert classify(exc) is None, exc
        try:
            raise exc
        except Exception as raised:
            reported = failure(raised, None)
        assert (reported["category"], reported["retryable"]) == ("infrastructure", True)
        assert "condition" not in reported and "traceback" in reported


def test_the_catalogue_agrees_with_the_conflict_check():
    """A conflict is turned into a ConcurrentWriteError by :func:`spark_jobs.errors.is_write_conflict`
    before the catalogue is looked at: both must name the same conditions."""
    conflicts = {e.condition for e in CATALOGUE if e.category == "conflict" and e.condition}
    recognised = {c for c in conflicts if is_write_conflict(connect_shape(c))}
    # a writer that kept losing, or changed the schema under the analysis: retried, not a refused commit
    assert conflicts - recognised == {"DELTA_MAX_COMMIT_RETRIES_EXCEEDED", "DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS"}


BIGINT_KEY_LIST = ("SELECT * FROM VALUES ('eu', 2L) AS t(region, id) "
                   "WHERE (t.region, t.id) IN (('eu', 2))")  # the key list main wrote: 2 an INT, id a BIGINT


def real_errors(spark, tmp_path) -> dict[str, tuple[object, str, str]]:
    """What a job can really meet: name -> (the action, the expected category, the condition's start)."""
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir(exist_ok=True)
    (corrupt / "part-0.parquet").write_bytes(b"PAR1 this is not a parquet file PAR1")
    target = str(tmp_path / "merge_target")

    def duplicate_merge_source():
        spark.range(2).write.format("delta").mode("overwrite").save(target)
        spark.range(2).union(spark.range(2)).createOrReplaceTempView("aretl_twice")
        spark.sql(f"MERGE INTO delta.`{target}` t USING aretl_twice s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET t.id = s.id").collect()

    return {
        "parse error": (lambda: spark.sql("SELEC 1").collect(), "defect", "PARSE_SYNTAX_ERROR"),
        "unresolved column": (lambda: spark.range(1).select("nope").collect(), "defect", "UNRESOLVED_COLUMN"),
        "issue 33 §1 key list": (lambda: spark.sql(BIGINT_KEY_LIST).collect(), "defect", "DATATYPE_MISMATCH"),
        "missing path": (lambda: spark.read.parquet(str(tmp_path / "nowhere")).collect(), "config", "PATH_NOT_FOUND"),
        "a MERGE Delta refuses": (duplicate_merge_source, "defect",
                                  "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"),
        "corrupt file": (lambda: spark.read.parquet(str(corrupt)).collect(), "data", "FAILED_READ_FILE"),
    }


def check_real_errors(spark, tmp_path) -> None:
    for name, (action, category, condition) in real_errors(spark, tmp_path).items():
        try:
            action()
        except Exception as exc:
            reported = failure(exc, None)
        else:
            pytest.fail(f"{name}: no error")
        assert (reported["category"], reported["retryable"]) == (category, False), (name, reported)
        assert reported["condition"].startswith(condition), (name, reported)


def test_real_errors_in_a_classic_session(spark, tmp_path):
    check_real_errors(spark, tmp_path)


def test_real_errors_over_spark_connect(connect_session, tmp_path):
    check_real_errors(connect_session, tmp_path)


def test_the_key_list_error_of_issue_33_fails_the_task_as_a_defect(spark):
    """What the task of a DAG with retries saw: "infrastructure", retried until it ran out of retries."""
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException) as raised:
        spark.sql(BIGINT_KEY_LIST).collect()
    error = failure(raised.value, None)
    assert (error["type"], error["category"], error["retryable"]) == ("AnalysisException", "defect", False)
    assert error["condition"] == "DATATYPE_MISMATCH.DATA_DIFF_TYPES" and "traceback" in error
    task_error = job_failure("snapshot", error)
    assert isinstance(task_error, ReverseEtlDefectError) and isinstance(task_error, AirflowFailException)
    assert ("This is a defect of airflow-reverse-etl, or a configuration it should have refused before running "
            "(error condition DATATYPE_MISMATCH.DATA_DIFF_TYPES): running the task again meets the same error, so "
            "it is not retried.") in str(task_error)
