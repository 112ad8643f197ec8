"""The templates a REST destination renders per record — each operation's URL, body and headers
(:data:`spark_jobs.contract.rest.SINK_TEMPLATES`), where ``{{ key.id }}`` is a record's value, not an
Airflow one — as the Airflow side must treat them: not counted as Airflow templates when a
``SinkOperator`` checks its arguments at DAG parse time, and left alone when Airflow renders the
operator's fields as the task runs.

Airflow's rendering walks every string of ``destination``; wrapping a sink template in Airflow's
``literal`` keeps it as written, and it is unwrapped where Airflow did not render (a task run by hand).
"""

from __future__ import annotations

from typing import Any, Callable

from airflow.sdk import literal

from spark_jobs.contract.options import SinkTemplate
from spark_jobs.contract.rest import SINK_TEMPLATES

_LITERAL = type(literal(""))


def _each_sink_template(destination: Any, wrap: Callable[[Any], Any]) -> Any:
    """``destination`` with each of its operations' sink templates passed through ``wrap`` (headers:
    each header's template); anything else is returned as it is."""
    operations = destination.get("operations") if isinstance(destination, dict) else None
    if not isinstance(operations, dict):
        return destination

    def wrapped(operation: Any) -> Any:
        if not isinstance(operation, dict):
            return operation
        done = dict(operation)
        for key in SINK_TEMPLATES:
            value = operation.get(key)
            if isinstance(value, dict):
                done[key] = {name: wrap(v) for name, v in value.items()}
            elif value is not None:
                done[key] = wrap(value)
        return done

    return {**destination, "operations": {op: wrapped(request) for op, request in operations.items()}}


def marked(destination: Any) -> Any:
    """``destination`` with its sink templates marked as such (:class:`SinkTemplate`), for the checks
    at DAG parse time: their ``{{ … }}`` does not make the destination unknown until the task runs."""
    return _each_sink_template(destination, lambda v: SinkTemplate(v) if isinstance(v, str) else v)


def kept_from_rendering(destination: Any) -> Any:
    """``destination`` with its sink templates wrapped in Airflow's ``literal``: Airflow renders the
    other options when the task runs and leaves these to the sink."""
    return _each_sink_template(destination, lambda v: literal(v) if isinstance(v, str) else v)


def unwrapped(destination: Any) -> Any:
    """``destination`` with the ``literal`` wrappers Airflow did not remove (it did not render) taken off."""
    return _each_sink_template(destination, lambda v: v.value if isinstance(v, _LITERAL) else v)
