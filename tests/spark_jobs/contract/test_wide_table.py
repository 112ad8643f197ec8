"""Wide-table configuration errors: raised by plain Python before any Spark work."""

from __future__ import annotations

import pytest

from spark_jobs.contract import WidenSpec
from spark_jobs.entry import run
from spark_jobs.errors import ConfigError
from spark_jobs.contract.wide_table import parse
from spark_jobs.jobs.widen import run_widen

BASE = {
    "name": "w",
    "primary_key": ["k"],
    "sources": [
        {"name": "s1", "columns": ["a", "b", "g_1", "c", "d", "g_2", "seq", "tags"]},
        {"name": "s2", "columns": {"e": "e_src", "cust": "customer_id"}},
        {"name": "dim", "join": "left", "on": {"cust": "id"}, "columns": {"cust_name": "name"}},
    ],
}


def spec(**changes):
    return {**BASE, **changes}


@pytest.mark.parametrize("changes, message", [
    pytest.param({"sequence_groups": {"g_1": ["k", "a"]}}, "primary key column 'k' cannot be in sequence group 'g_1'",
                 marks=pytest.mark.fault("bad input", "wide table: key in a sequence group")),
    ({"sequence_groups": {"k": ["a"]}}, "primary key column 'k' cannot be in sequence group 'k'"),
    pytest.param({"sequence_groups": {"g_1": ["a", "b"], "g_2": ["b", "c"]}},
                 "field 'b' is in two sequence groups: 'g_1' and 'g_2'",
                 marks=pytest.mark.fault("bad input", "wide table: a field in two sequence groups")),
    pytest.param({"sequence_groups": {"g_1": ["a", "nope"]}}, "sequence group 'g_1' names unknown field 'nope'",
                 marks=pytest.mark.fault("bad input", "wide table: unknown field in a sequence group")),
    pytest.param({"sequence_groups": [{"g_1": ["a", "b"]}]},
                 "sequence_groups=[{'g_1': ['a', 'b']}] is not allowed; expected a mapping {sequence field: [fields]}",
                 marks=pytest.mark.fault("bad input", "wide table: list-shaped sequence_groups")),
    ({"aggregations": [["c", "sum"]]},
     "aggregations=[['c', 'sum']] is not allowed; expected a mapping {field: aggregate}"),
    ({"sequence_groups": {"nope": ["a"]}}, "sequence group 'nope' names unknown field 'nope'"),
    ({"sequence_groups": {"g_1": ["a", "g_2"], "g_2": ["c"]}}, "'g_2' is the sequence field of its own group"),
    ({"sequence_field": "missing"}, "sequence_field 'missing' is not a column"),
    ({"sequence_field": "seq", "sequence_groups": {"g_1": ["seq"]}}, "sequence_field 'seq' cannot be in"),
    ({"aggregations": {"nope": "sum"}}, "aggregation for unknown field 'nope'"),
    ({"aggregations": {"a": "median"}}, "unknown aggregate 'median' for field 'a'"),
    ({"aggregations": {"tags": "listagg"}}, ("aggregate 'listagg' on 'tags' depends on row order and needs a "
                                             "sequence group")),
    ({"aggregations": {"a": "first_value"}}, "needs a sequence group"),
    ({"aggregations": {"a": "last_value"}}, "needs a sequence group"),
    ({"aggregations": {"k": "sum"}}, "field 'k' cannot be aggregated"),
    ({"aggregations": {"cust_name": "max"}}, "cannot be aggregated"),
    ({"primary_key": []}, "primary_key=[] is not allowed; expected one or more column names"),
    ({"name": "a/b"}, "holds '/'"),
    ({"sources": []}, "sources=[] is not allowed; expected a non-empty list of sources"),
    ({"colour": 1}, "unknown option(s) ['colour']"),
    ({"partition_by": ["cust_name"]}, "partition_by ['cust_name'] must name distinct primary key or full-join"),
    ({"partition_by": ["a", "a"]}, "partition_by ['a', 'a'] must name distinct"),
])
def test_configuration_errors(changes, message):
    with pytest.raises(ConfigError) as err:
        parse(spec(**changes))
    assert message in str(err.value)


@pytest.mark.parametrize("sources, message", [
    ([{"name": "s1", "columns": ["a"]}, {"name": "s1", "columns": ["b"]}], "source name(s) ['s1'] used more"),
    ([{"name": "s1", "columns": ["k", "a"]}], "primary key column(s) ['k'] belong in 'key'"),
    ([{"name": "s1"}],
     "source 's1' needs the option 'columns' (a list of column names, or {wide column: source column})"),
    ([{"name": "s1", "columns": ["a"], "join": "inner"}], "join='inner' is not allowed; expected one of full, left"),
    ([{"name": "s1", "columns": ["a"]}, {"name": "d", "join": "left", "columns": ["x"]}], "a left join needs 'on'"),
    ([{"name": "s1", "columns": ["a"]}, {"name": "d", "join": "left", "on": {"fk": "id"}, "columns": ["x"]}],
     "foreign key column(s) ['fk'] are not provided by any full-join source"),
    ([{"name": "s1", "columns": ["a", "x"]}, {"name": "d", "join": "left", "on": {"a": "id"}, "columns": ["x"]}],
     "are also provided by ['s1']"),
    ([{"name": "s1", "columns": ["a"], "key": {"other": "id"}}], "'key' must map each primary key column"),
])
def test_source_errors(sources, message):
    with pytest.raises(ConfigError) as err:
        parse(spec(sources=sources))
    assert message in str(err.value)


def test_a_source_carrying_group_fields_without_their_sequence_field_is_refused():
    sources = [{"name": "s1", "columns": ["a", "g_1"]}, {"name": "s2", "columns": ["b"]}]
    with pytest.raises(ConfigError, match=r"source s2: carries \['b'\] of sequence group 'g_1' but not 'g_1'"):
        parse(spec(sources=sources, sequence_groups={"g_1": ["a", "b"]}))


def test_valid_spec_parses_with_defaults():
    t = parse(spec(sequence_groups={"g_1": ["a", "b"]}, aggregations={"c": "sum", "tags": "listagg"},
                   sequence_field="seq"))
    assert [s.table for s in t.sources] == ["snapshots/s1", "snapshots/s2", "snapshots/dim"]
    assert list(t.groups) == ["main"]
    assert t.source("s2").key == {"k": "k"}
    assert t.merged_columns([t.source("s2")]) == ["e", "cust"]
    assert t.consumer() == "widen:w" and t.consumer("dim") == "widen:w:dim"


def test_the_job_raises_before_touching_spark():
    # No SparkSession at all: a configuration error must surface before the job needs one.
    with pytest.raises(ConfigError, match="field 'a' is in two sequence groups"):
        run_widen(None, WidenSpec.from_dict({"warehouse": "/nowhere",
                                             "wide": spec(sequence_groups={"g_1": ["a"], "g_2": ["a"]})}))
    result = run(None, {"job": "widen", "warehouse": "/nowhere", "wide": spec(aggregations={"a": "avg"})})
    assert result["status"] == "failed" and result["error"]["type"] == "ConfigError"
    assert "unknown aggregate 'avg'" in result["error"]["message"]
    with pytest.raises(ConfigError, match="versions given for \\['s9'\\]"):
        run_widen(None, WidenSpec.from_dict({"warehouse": "/nowhere", "wide": BASE, "versions": {"s9": 1}}))
