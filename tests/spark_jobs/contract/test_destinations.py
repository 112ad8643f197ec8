"""Sink options and capabilities, without Spark: every sink refuses an unknown, misspelt, mistyped or
missing option when it is built (on the driver, before anything is sent), the shared SQL type map
gives each dialect its column types, and a sink without an options class still works."""

import re
import sqlite3
from dataclasses import dataclass

import pytest

from spark_jobs.errors import ConfigError, DestinationError
from spark_jobs.sinks import resolve_sink
from spark_jobs.sinks.base import Sink, SinkCapabilities, SinkConfig
from spark_jobs.contract.destinations import SinkOptions
from spark_jobs.contract.options import option
from spark_jobs.sinks.sql import column_type

#: The least each built-in sink needs, to which a test adds one bad option.
MINIMAL = {
    "sqlite": {"database": "/tmp/aretl-options.db", "table": "customers"},
    "postgres": {"table": "public.customers"},
    "http": {"url": "http://127.0.0.1:9/batch"},
    "kafka": {"topic": "customers"},
    "delta": {"path": "/tmp/aretl-published"},
    "rest": {"operations": {"upsert": {"url": "http://127.0.0.1:9/contacts"}}},
    "salesforce": {"external_id_field": "id", "object": "Contact"},
    "hubspot": {"id_property": "id"},
    "braze": {},
}
#: A misspelling of one real option per sink, and the option it means.
TYPOS = {"sqlite": ("tabel", "table"), "postgres": ("create_tabel", "create_table"), "http": ("timout", "timeout"),
         "kafka": ("flush_timout", "flush_timeout"), "delta": ("fromat", "format"), "rest": ("base_ur", "base_url"),
         "salesforce": ("bulk_treshold", "bulk_threshold"), "hubspot": ("id_propery", "id_property"),
         "braze": ("create_atributes", "create_attributes")}
#: One option per sink given a value of the wrong type.
WRONG_TYPES = {"sqlite": ("create_table", "yes"), "postgres": ("table", 42), "http": ("headers", ["x"]),
               "kafka": ("flush_timeout", "soon"), "delta": ("format", "csv"), "rest": ("vars", ["x"]),
               "salesforce": ("all_or_none", "maybe"), "hubspot": ("burst_limit", "lots"),
               "braze": ("requests_per_second", "fast")}


def build(sink: str, mode: str = "upsert", **options):
    destination = {"type": sink, **MINIMAL[sink], **options}
    config = SinkConfig(destination=destination, key_fields=["id"], fields=["id", "name"], mode=mode)
    return resolve_sink(sink)(config)


@pytest.mark.parametrize("sink", sorted(MINIMAL))
def test_a_misspelt_option_is_named_with_the_option_it_resembles(sink):
    typo, meant = TYPOS[sink]
    with pytest.raises(ConfigError) as failure:
        build(sink, **{typo: "x"})
    message = str(failure.value)
    assert f"The {sink} destination: unknown option(s) [{typo!r}] (did you mean {meant!r}?)" in message
    assert all(repr(known) in message for known in MINIMAL[sink])


@pytest.mark.parametrize("sink", sorted(MINIMAL))
def test_an_unknown_option_lists_the_known_ones(sink):
    with pytest.raises(ConfigError) as failure:
        build(sink, zzz_unrelated=1)
    message = str(failure.value)
    assert f"The {sink} destination: unknown option(s) ['zzz_unrelated']; the options are" in message
    assert "did you mean" not in message and all(repr(known) in message for known in MINIMAL[sink])


@pytest.mark.parametrize("options, said", [
    ({"operations": {"delete": {"method": "DELETE", "url": "/c", "bogus": 1}}},
     "The rest destination's delete operation: unknown option(s) ['bogus']"),
    ({"operations": {"delete": {"method": "DELETE", "url": "/c", "response": {"success": "ok"}}}},
     "The rest destination's delete operation's response: success='ok' is not allowed"),
    ({"operations": {"upsert": {"url": "/c"}}, "response": {"success": "ok"}},
     "The rest destination's response: success='ok' is not allowed"),
])
def test_a_rest_option_inside_another_is_named_by_where_it_is(options, said):
    with pytest.raises(ConfigError) as failure:
        build("rest", **options)
    assert str(failure.value).startswith(said), failure.value


@pytest.mark.parametrize("sink", sorted(MINIMAL))
def test_a_value_of_the_wrong_type_is_named(sink):
    name, value = WRONG_TYPES[sink]
    with pytest.raises(ConfigError) as failure:
        build(sink, **{name: value})
    assert str(failure.value).startswith(f"The {sink} destination: {name}={value!r} is not allowed; expected ")


@pytest.mark.parametrize(("sink", "expected"), [
    ("sqlite", "The sqlite destination needs the option 'database' (path of the database file"),
    ("postgres", "The postgres destination needs the option 'table' (the destination table"),
    ("http", "The http destination needs 'url', or 'endpoint' with an HTTP connection"),
    ("kafka", "The kafka destination needs the option 'topic' (the topic the changes are published to)"),
    ("delta", "The delta destination needs the option 'path' (where the table is published"),
    ("rest", "The rest destination needs the option 'operations' (the requests of each operation"),
    ("salesforce", "The salesforce destination needs the option 'external_id_field' (the object's External ID"),
    ("hubspot", "The hubspot destination needs the option 'id_property' (the property with unique values"),
])
def test_a_missing_required_option_is_named(sink, expected):
    required = sorted(MINIMAL[sink])[0]
    config = SinkConfig(destination={"type": sink, **{k: v for k, v in MINIMAL[sink].items() if k != required}},
                        key_fields=["id"], fields=["id"], mode="upsert")
    with pytest.raises(ConfigError) as failure:
        resolve_sink(sink)(config)
    assert str(failure.value).startswith(expected)


def test_generic_keys_are_taken_by_every_sink_and_numbers_may_come_as_text():
    generic = {"connection": {"host": "127.0.0.1", "port": 9092}, "secrets_env": {"password": "UNUSED_ENV"}}
    kafka = build("kafka", flush_timeout="5", **generic)  # a Jinja-rendered number arrives as text
    assert kafka.options.flush_timeout == 5.0 and kafka.flush_timeout == 5.0
    http = build("http", timeout=[2, 10], verify=False)
    assert http.timeout == (2.0, 10.0) and http.options.verify is False
    assert build("delta", format="parquet").format == "parquet"
    with pytest.raises(ConfigError, match="The kafka destination: flush_timeout=True is not allowed; expected a num"):
        build("kafka", flush_timeout=True)  # a bool is no number to a destination


@pytest.mark.parametrize(("sink", "options", "mode", "key", "expected"), [
    ("salesforce", {"object": "Contact", "external_id_field": "Customer_Id__c"}, "upsert", ["id"],
     "the sync's key must be that one field; it is ['id']. Map the key column to it"),
    ("salesforce", {"object": "Contact", "external_id_field": "id"}, "upsert", ["id"],
     "needs the org's URL: set the connection's instance_url"),
    ("hubspot", {"id_property": "email"}, "mirror", ["id", "region"], "the sync's key must be that one field"),
    ("braze", {}, "insert", ["id"], "cannot take mode 'insert': Braze has no create-only write"),
    ("braze", {}, "upsert", ["id"], "needs its instance's REST endpoint as the connection's host"),
])
def test_a_saas_destination_refuses_a_sync_it_cannot_take_before_anything_is_sent(sink, options, mode, key,
                                                                                   expected):
    config = SinkConfig(destination={"type": sink, **options}, key_fields=key, fields=[*key, "name"], mode=mode)
    with pytest.raises(ConfigError, match=re.escape(expected)):
        resolve_sink(sink)(config)


def test_saas_options_are_checked_when_the_dag_is_parsed():
    from spark_jobs.contract.catalogue import destination

    with pytest.raises(ConfigError, match="burst_limit=0 is not allowed"):
        destination({"type": "hubspot", "id_property": "email", "burst_limit": 0})
    with pytest.raises(ConfigError, match="api_version='45.0' is not allowed; expected a Salesforce API version"):
        destination({"type": "salesforce", "object": "Contact", "external_id_field": "X__c", "api_version": "45.0"})
    with pytest.raises(ConfigError, match="limit_share=1.5 is not allowed"):
        destination({"type": "hubspot", "id_property": "email", "limit_share": 1.5})


def test_capabilities_are_declared_once_and_read_as_class_attributes():
    kafka, postgres, sqlite = resolve_sink("kafka"), resolve_sink("postgres"), resolve_sink("sqlite")
    assert kafka.capabilities == SinkCapabilities(batch_size=50000, max_concurrency=1, wants_json=True)
    assert (kafka.batch_size, kafka.max_concurrency, kafka.wants_json) == (50000, 1, True)
    assert (postgres.batch_size, postgres.max_parallelism) == (20000, None)
    assert sqlite.max_parallelism == 1 and sqlite.capabilities.max_parallelism == 1
    assert resolve_sink("http").batch_size == Sink.batch_size == 500


class LegacySink(Sink):
    """A plugin as written before typed options and capabilities: no options class, capabilities as
    plain class attributes, options read from the config."""

    name = "legacy"
    max_parallelism = 1
    batch_size = 7

    def open(self):
        self.path = self.config.options["path"]


def test_a_sink_without_an_options_class_takes_any_option_and_keeps_its_class_attributes():
    sink = LegacySink(SinkConfig(destination={"type": "x:LegacySink", "path": "/tmp/out", "anything": 1},
                                 key_fields=["id"], fields=["id"], mode="mirror"))
    sink.open()
    assert sink.options is None and sink.path == "/tmp/out"
    assert LegacySink.capabilities == SinkCapabilities(batch_size=7, max_parallelism=1)
    assert (LegacySink.batch_size, LegacySink.max_parallelism, LegacySink.wants_json) == (7, 1, False)


@dataclass(frozen=True, kw_only=True)
class AppendOptions(SinkOptions):
    path: str = option(doc="file appended to")


class AppendOnlySink(Sink):
    name = "append-only"
    capabilities = SinkCapabilities(supports_delete=False)
    options_class = AppendOptions


def test_a_sink_that_cannot_delete_refuses_a_mirror_sync():
    def config(mode):
        return SinkConfig(destination={"type": "append-only", "path": "/tmp/x"}, key_fields=["id"], fields=["id"],
                          mode=mode)

    assert AppendOnlySink(config("upsert")).options == AppendOptions(path="/tmp/x")
    with pytest.raises(ConfigError, match="The append-only destination cannot delete"):
        AppendOnlySink(config("mirror"))


@pytest.mark.parametrize(("spark_type", "postgres", "sqlite"), [
    ("int", "integer", "INTEGER"),
    ("bigint", "bigint", "INTEGER"),
    ("tinyint", "smallint", "INTEGER"),
    ("boolean", "boolean", "INTEGER"),
    ("double", "double precision", "REAL"),
    ("float", "real", "REAL"),
    ("string", "text", "TEXT"),
    ("binary", "bytea", "BLOB"),
    ("date", "date", "TEXT"),
    ("timestamp", "timestamptz", "TEXT"),
    ("timestamp_ntz", "timestamp", "TEXT"),
    ("decimal(12,3)", "numeric(12,3)", "TEXT"),
    ("array<int>", "jsonb", "TEXT"),
    ("map<string,int>", "jsonb", "TEXT"),
    ("struct<a:int>", "jsonb", "TEXT"),
])
def test_one_type_map_gives_each_dialect_its_column_type(spark_type, postgres, sqlite):
    assert column_type("postgres", spark_type) == postgres
    assert column_type("sqlite", spark_type) == sqlite


def sqlite_sink(tmp_path, mode="upsert", **options):
    destination = {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers", **options}
    return resolve_sink("sqlite")(SinkConfig(destination=destination, key_fields=["id"], fields=["id", "name"],
                                             mode=mode))


def test_sqlite_creates_the_table_from_the_type_map_and_counts_it(tmp_path):
    sink = sqlite_sink(tmp_path)
    assert sink.count() == 0  # no table yet
    sink.prepare({"id": "int", "name": "string", "score": "decimal(5,2)"})
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        columns = [(row[1], row[2], row[5]) for row in conn.execute("PRAGMA table_info(customers)")]
        conn.execute("INSERT INTO customers VALUES (1, 'ann', '1.50')")
    assert columns == [("id", "INTEGER", 1), ("name", "TEXT", 0), ("score", "TEXT", 0)]
    assert sink.count() == 1


def test_sqlite_names_a_missing_column_a_required_one_and_a_missing_table(tmp_path):
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, tier TEXT NOT NULL)")
    with pytest.raises(DestinationError, match=r"SQLite table customers has no column\(s\) \['city'\]"):
        sqlite_sink(tmp_path).prepare({"id": "int", "name": "string", "city": "string"})
    with pytest.raises(DestinationError, match=r"NOT NULL column\(s\) \['tier'\] without a default"):
        sqlite_sink(tmp_path).prepare({"id": "int", "name": "string"})
    sqlite_sink(tmp_path, mode="update").prepare({"id": "int", "name": "string"})  # an update fills no new row
    with pytest.raises(DestinationError, match="SQLite table other does not exist"):
        sqlite_sink(tmp_path, table="other", create_table=False).prepare({"id": "int"})


@pytest.mark.parametrize(("destination", "target"), [
    ({"type": "postgres", "table": "public.customers", "database": "crm"}, "public.customers"),
    ({"type": "kafka", "topic": "customers", "bootstrap_servers": "b1:9092"}, "customers"),
    ({"type": "http", "url": None, "endpoint": "v1/batch"}, "v1/batch"),  # a key given empty is skipped
    ({"type": "hubspot", "object_type": "companies", "id_property": "domain"}, "companies"),
    ({"type": "http", "url": "https://user:hook-pass@hooks.example.com/in"}, "https://hooks.example.com/in"),
    ({"type": "braze"}, ""),
])
def test_one_choice_names_where_a_destination_writes(destination, target):
    from spark_jobs.contract.destinations import destination_label, destination_target

    assert destination_target(destination) == target
    assert destination_label(destination) == (f"{destination['type']}:{target}" if target else destination["type"])


def test_a_destination_is_parsed_once_per_process(monkeypatch):
    """The spec's check, the sink built on the driver and the sink of every sending thread share one
    typed object (issue 45): the destination dict is parsed once in a process, however many ask."""
    from uuid import uuid4

    from spark_jobs.contract import parse_spec
    from spark_jobs.contract.destinations import SqliteOptions

    parses = []
    parse = SqliteOptions.from_dict.__func__

    def counted(cls, data, where=None):
        parses.append(where)
        return parse(cls, data, where)

    monkeypatch.setattr(SqliteOptions, "from_dict", classmethod(counted))
    destination = {"type": "sqlite", "database": f"/tmp/aretl-{uuid4().hex}.db", "table": "customers"}
    spec = parse_spec({"job": "sync", "warehouse": "/wh", "changes": "changes/crm/x", "table": "snapshots/c",
                       "consumer": "crm", "primary_key": ["id"], "to_version": 1, "destination": destination})
    sink_cls = resolve_sink("sqlite")
    config = SinkConfig(destination=spec.destination, key_fields=["id"], fields=["id", "name"], mode="upsert")
    driver_sink, *lane_sinks = (sink_cls(config) for _ in range(4))
    assert len(parses) == 1
    assert all(sink.options is driver_sink.options for sink in lane_sinks)
