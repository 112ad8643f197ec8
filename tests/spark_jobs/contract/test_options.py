"""One option mechanism: the same values get the same answer from every set of options — a job spec,
the wide table, a wide-table source, a sink's destination options and the delivery policy — at DAG
parse time (``check_static``) as on the Spark side (``from_dict``), without Spark."""

from __future__ import annotations

import re
from typing import Any, Callable

import pytest

from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from airflow_reverse_etl.operators.sink import SinkOperator
from airflow_reverse_etl.operators.widen import WidenTableOperator
from spark_jobs.contract import SyncSpec, WidenSpec
from spark_jobs.contract.wide_table import parse as parse_wide_table
from spark_jobs.errors import ConfigError
from spark_jobs.sinks import resolve_sink
from spark_jobs.sinks.base import SinkConfig

WIDE: dict[str, Any] = {"name": "w", "primary_key": ["k"], "sources": [{"name": "s1", "columns": ["a"]}]}
CHANGE_SET: dict[str, Any] = {"changes": "changes/crm/x", "table": "snapshots/c", "consumer": "crm",
                              "primary_key": ["id"], "to_version": 1}
SQLITE: dict[str, Any] = {"type": "sqlite", "database": "/tmp/aretl-options.db", "table": "customers"}


def spec_flag(value: Any) -> Any:
    return SyncSpec.of(**CHANGE_SET, dry_run=value).dry_run


def wide_flag(value: Any) -> Any:
    return parse_wide_table({**WIDE, "ignore_delete": value}).ignore_delete


def source_flag(value: Any) -> Any:
    source = {**WIDE["sources"][0], "remove_row_on_delete": value}
    return parse_wide_table({**WIDE, "sources": [source]}).sources[0].remove_row_on_delete


def destination_flag(value: Any) -> Any:
    """Through the spec (what DAG parsing and the entry point check) and the sink built on the driver."""
    destination = {**SQLITE, "create_table": value}
    SyncSpec.of(**CHANGE_SET, destination=destination)
    config = SinkConfig(destination=destination, key_fields=["id"], fields=["id"], mode="upsert")
    return resolve_sink("sqlite")(config).options.create_table


def parse_time_flag(value: Any) -> Any:
    SyncSpec.check_static(dry_run=value, destination={**SQLITE, "create_table": value})
    return flag_of(value)


def flag_of(value: Any) -> Any:
    return {"false": False, "False": False, "true": True, True: True, False: False}[value]


FLAGS: dict[str, Callable[[Any], Any]] = {
    "job spec": spec_flag, "wide table": wide_flag, "wide-table source": source_flag,
    "sink options": destination_flag, "DAG parse time": parse_time_flag,
}


@pytest.mark.parametrize("where", sorted(FLAGS))
@pytest.mark.parametrize("value", ["false", "False", "true", True, False])
def test_a_flag_spelt_as_text_means_the_same_everywhere(where, value):
    # "false" was True in the wide table (bool("false")) and a TypeError in sink options
    assert FLAGS[where](value) is flag_of(value)


@pytest.mark.parametrize("where", sorted(FLAGS))
@pytest.mark.parametrize("value", ["maybe", 1, "0", []])
def test_a_bad_flag_is_refused_everywhere_with_the_same_answer(where, value):
    with pytest.raises(ConfigError) as refused:
        FLAGS[where](value)
    assert re.search(rf"=\s?{re.escape(repr(value))} is not allowed; expected true or false", str(refused.value)), \
        str(refused.value)


BAD_NUMBERS: dict[str, Callable[[Any], Any]] = {
    "job spec": lambda v: SyncSpec.of(**CHANGE_SET, max_delete_fraction=v),
    "delivery policy": lambda v: SyncSpec.of(**CHANGE_SET, delivery={"backoff_max": v}),
    "sink options": lambda v: SyncSpec.of(**CHANGE_SET, destination={"type": "kafka", "topic": "t",
                                                                      "flush_timeout": v}),
    "DAG parse time": lambda v: SyncSpec.check_static(delivery={"backoff_max": v}),
}


@pytest.mark.parametrize("where", sorted(BAD_NUMBERS))
@pytest.mark.parametrize("value", ["soon", True, [1]])
def test_a_value_that_is_no_number_is_refused_everywhere_naming_the_field(where, value):
    with pytest.raises(ConfigError, match=rf"\w+={re.escape(repr(value))} is not allowed; expected a number"):
        BAD_NUMBERS[where](value)


ONE_SOURCE_MISSPELT = {**WIDE, "sources": [{"name": "s1", "columns": ["a"], "grup": "g"}]}
MISSPELT: dict[str, tuple[Callable[[], Any], str]] = {
    "job spec": (lambda: SyncSpec.of(**CHANGE_SET, dry_rn=True),
                 "sync spec: unknown option(s) ['dry_rn'] (did you mean 'dry_run'?)"),
    "wide table": (lambda: parse_wide_table({**WIDE, "ignore_delet": True}),
                   "Wide table w: unknown option(s) ['ignore_delet'] (did you mean 'ignore_delete'?)"),
    "wide-table source": (lambda: parse_wide_table(ONE_SOURCE_MISSPELT),
                          "Wide table w, source 's1': unknown option(s) ['grup'] (did you mean 'group'?)"),
    "sink options": (lambda: SyncSpec.of(**CHANGE_SET, destination={**SQLITE, "tabel": "x"}),
                     "The sqlite destination: unknown option(s) ['tabel'] (did you mean 'table'?)"),
    "delivery policy": (lambda: SyncSpec.of(**CHANGE_SET, delivery={"max_attempt": 3}),
                        "delivery: unknown option(s) ['max_attempt'] (did you mean 'max_attempts'?)"),
    "DAG parse time": (lambda: SyncSpec.check_static(destination={**SQLITE, "tabel": "x"}),
                       "The sqlite destination: unknown option(s) ['tabel'] (did you mean 'table'?)"),
}


@pytest.mark.parametrize("where", sorted(MISSPELT))
def test_a_misspelt_option_is_named_with_the_one_it_resembles_everywhere(where):
    build, message = MISSPELT[where]
    with pytest.raises(ConfigError) as refused:
        build()
    assert str(refused.value).startswith(message), str(refused.value)


def test_options_are_frozen_and_round_trip():
    spec = SyncSpec.of(**CHANGE_SET, destination=SQLITE, delivery={"batch_size": "10", "concurrency": 2})
    assert (spec.delivery.batch_size, spec.delivery.concurrency) == (10, 2)
    assert SyncSpec.from_dict(spec.to_dict()) == spec
    widen = WidenSpec.of(wide={**WIDE, "ignore_delete": "true"})
    assert widen.wide.ignore_delete is True and WidenSpec.from_dict(widen.to_dict()) == widen
    with pytest.raises(AttributeError):
        widen.wide.sources[0].join = "left"  # type: ignore[misc]


def test_a_templated_value_waits_for_run_time_but_a_literal_one_is_checked_at_parse_time():
    SyncSpec.check_static(destination={**SQLITE, "create_table": "{{ params.create }}"},
                          delivery={"concurrency": "{% if x %}2{% endif %}"})
    with pytest.raises(ConfigError, match="delivery: concurrency=0 is not allowed; expected an integer >= 1"):
        SyncSpec.check_static(delivery={"concurrency": 0})


@pytest.mark.parametrize(("build", "message"), [
    (lambda: SinkOperator(task_id="s", changes={"changes": "c"}, destination={**SQLITE, "tabel": "x"}),
     "The sqlite destination: unknown option(s) ['tabel'] (did you mean 'table'?)"),
    (lambda: SinkOperator(task_id="s", changes={"changes": "c"}, destination=SQLITE, delivery={"concurrency": 0}),
     "delivery: concurrency=0 is not allowed; expected an integer >= 1"),
    (lambda: WidenTableOperator(task_id="w", wide_table={**WIDE, "ignore_delete": "maybe"}),
     "Wide table w: ignore_delete='maybe' is not allowed; expected true or false"),
], ids=["sink options", "delivery policy", "wide table"])
def test_operators_refuse_bad_options_when_the_dag_is_parsed(build, message):
    with pytest.raises(ReverseEtlConfigError) as refused:
        build()
    assert str(refused.value).startswith(message)
