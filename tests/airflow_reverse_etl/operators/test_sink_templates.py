"""A REST destination's templates are the sink's, rendered per record on the Spark side; everything
else in the destination is Airflow's, rendered when the task runs. SinkOperator keeps the two apart:
Airflow's rendering leaves ``{{ key.id }}`` alone, ``vars`` carry Airflow values into the sink's
templates, and the sink's templates do not stop the destination being checked at DAG parse time."""

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from airflow_reverse_etl.operators.sink import SinkOperator

DESTINATION = {"type": "rest", "base_url": "https://api.example.com/v1", "vars": {"day": "{{ ds }}"},
               "operations": {"upsert": {"method": "PUT", "url": "/contacts/{{ key.id }}", "per": "record",
                                         "body": '{"name": {{ data.name }}, "day": {{ vars.day }}}',
                                         "headers": {"X-Record": "{{ key.id }}"}}}}


def sink(destination=DESTINATION, **kwargs):
    with DAG("rest_templates", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        return SinkOperator(task_id="sync", changes={"changes_uri": "x"}, destination=destination, **kwargs)


def test_airflow_renders_the_options_and_leaves_the_sinks_templates_to_the_sink():
    task = sink()
    task.render_template_fields({"ds": "2026-01-02", "task": task})
    upsert = task.destination["operations"]["upsert"]
    assert task.destination["vars"] == {"day": "2026-01-02"}
    assert (upsert["url"], upsert["body"], upsert["headers"]) == (
        "/contacts/{{ key.id }}", '{"name": {{ data.name }}, "day": {{ vars.day }}}', {"X-Record": "{{ key.id }}"})
    assert task.outlets[-1].name == "reverse_etl:sink:sync"  # {{ ds }}: known when the task runs
    untemplated = sink({k: v for k, v in DESTINATION.items() if k != "vars"})  # the sink's templates do not count
    assert untemplated.outlets[-1].name == "reverse_etl:sink:rest:https://api.example.com/v1"


@pytest.mark.parametrize(("change", "message"), [
    ({"base_ur": "x"}, "unknown option(s) ['base_ur'] (did you mean 'base_url'?)"),
    ({"operations": {"upsert": {"url": "/c/{{ key.id | nope }}", "per": "record"}}}, "No filter named 'nope'"),
    ({"operations": {"upsert": {"url": "/c/{{ records }}", "per": "record"}}}, "uses ['records']"),
])
def test_a_bad_rest_destination_fails_the_dag_import(change, message):
    untemplated = {k: v for k, v in DESTINATION.items() if k != "vars"}  # {{ ds }} is known at run time only
    with pytest.raises(ReverseEtlConfigError) as failure:
        sink({**untemplated, **change})
    assert message in str(failure.value)


def test_vars_carrying_a_secret_airflow_masks_are_refused_with_the_way_to_read_it():
    """Issue 43 §6: ``"vars": {"token": "{{ conn.x.password }}"}`` would put the token in the spec and
    XCom; the connection's secrets are read by the template on the Spark side instead."""
    from airflow.sdk.log import mask_secret

    token = "tok-3f9a7c1e-masked"
    mask_secret(token)  # what Airflow does with a connection's password it hands a template
    task = sink({**DESTINATION, "vars": {"day": "2026-01-02", "auth": {"token": f"Bearer {token}"}}})
    with pytest.raises(ReverseEtlConfigError) as failure:
        task.execute({"run_id": "r", "logical_date": None})
    message = str(failure.value)
    assert "vars ['auth'] carry a value Airflow masks as a secret" in message and token not in message
    assert "{{ secrets.password }} or {{ secrets.extra.<name> }}" in message
