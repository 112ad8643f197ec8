"""Issue 44 §2, the key-type matrix of issue 33 carried to the SaaS destinations: every preset × every key
type it accepts (text, integer, decimal, email-like text in mixed case, text with leading zeros, numbers
past 2^53), each through upsert, update, insert and mirror delete against the strict emulators. After
every step the destination holds exactly what the vendor's rules make of the source — matched by the
field's type, case rule and normalisation, never by the key's text — and every record reported
delivered is one the emulator holds (or no longer holds, for a delete). A key the vendor cannot hold
faithfully (a Salesforce Number past 2^53) is rejected for its record, never reported delivered.

In process, as the sync job drives a sink (tests_common/saas_sync.py: prepare, then deliver_partition
with Arrow batches typed as Spark's): the whole matrix costs seconds. The cells through the real sync
job on Spark are the presets' own tests beside this file."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable

import pyarrow as pa
import pytest

from spark_jobs.errors import ConfigError
from spark_jobs.sinks.saas.values import text
from tests_common.saas_sync import Destination, braze, change, hubspot, salesforce, sync

BIG = 2 ** 53
#: Five keys of each type. Where the vendor matches keys across case, the destination already holds k1
#: in another case before the first sync: the steps that find it (insert, delete) must find that record.
KEYS: dict[str, tuple[pa.DataType, list[Any]]] = {
    "text": (pa.string(), ["a-1", "B-2", "c-3", "D-4", "e-5"]),
    "integer": (pa.int64(), [5, 12345678, 0, -7, 10 ** 15]),
    "decimal": (pa.decimal128(12, 2), [Decimal("12.50"), Decimal("0.10"), Decimal("-3.00"), Decimal("99999.99"),
                                       Decimal("7.25")]),
    "email": (pa.string(), ["Ada@Example.com", "BOB@x.io", "carol@X.IO", "Dan.Doe@Mail.example", "eve@y.org"]),
    "leading zeros": (pa.string(), ["007", "7", "0007", "070", "00"]),
    "past 2^53": (pa.int64(), [BIG + 1, BIG, 2 ** 60, BIG + 3, -(BIG + 1)]),
}


@dataclass
class Preset:
    """How one preset is set up for a key type and what its emulator holds, by the vendor's rules."""

    name: str
    fixture: str
    value_field: str
    destination: Callable[[Any, str], Destination]
    key_field: Callable[[str], str]
    #: the key as the vendor matches it (the model's dict key)
    matched: Callable[[str, Any], Any]
    held: Callable[[Any, str], dict[Any, Any]]
    #: keys of a type the vendor cannot hold faithfully: rejected for their record
    refused: Callable[[str, Any], bool] = lambda kind, key: False
    case_insensitive: Callable[[str], bool] = lambda kind: False
    modes: tuple[str, ...] = ("upsert", "update", "insert", "mirror")
    seeded: dict[str, Any] = field(default_factory=dict)


# --- Salesforce: a Number External ID for numbers, an Email one for emails, Text for the rest ---------------
def sf_field(kind: str) -> str:
    return {"integer": "Account_No__c", "decimal": "Account_No__c", "past 2^53": "Account_No__c",
            "email": "Email_Key__c"}.get(kind, "Customer_Id__c")


def sf_destination(api, kind: str) -> Destination:
    api.define_field("Contact", "Account_No__c", "double", external_id=True)
    api.define_field("Contact", "Email_Key__c", "email", external_id=True)
    return salesforce(api, sf_field(kind))


def sf_matched(kind: str, key: Any) -> Any:
    return float(key) if sf_field(kind) == "Account_No__c" else text(key).lower()


def sf_held(api, kind: str) -> dict[Any, Any]:
    name = sf_field(kind)
    return {sf_matched(kind, r[name]): r["LastName"] for r in api.records("Contact").values()
            if r.get(name) is not None}


def sf_refused(kind: str, key: Any) -> bool:
    return sf_field(kind) == "Account_No__c" and Decimal(repr(float(key))) != Decimal(key)


# --- HubSpot: email for emails, a unique text property for the rest ------------------------------------------
def hs_property(kind: str) -> str:
    return "email" if kind == "email" else "customer_code"


def hs_destination(api, kind: str) -> Destination:
    api.define_property("contacts", "customer_code", unique=True)
    return hubspot(api, hs_property(kind))


def hs_matched(kind: str, key: Any) -> Any:
    return text(key).lower() if kind == "email" else text(key)


def hs_held(api, kind: str) -> dict[Any, Any]:
    name = hs_property(kind)
    return {hs_matched(kind, p[name]): p.get("firstname") for p in api.objects("contacts").values() if name in p}


# --- Braze: the key's text as the external_id, matched as sent ---------------------------------------------
def bz_destination(api, kind: str) -> Destination:
    return braze(api)


def bz_held(api, kind: str) -> dict[Any, Any]:
    return {uid: attributes.get("plan") for uid, attributes in api.users.items()}


PRESETS = {
    "salesforce": Preset("salesforce", "salesforce_api", "LastName", sf_destination, sf_field, sf_matched, sf_held,
                         refused=sf_refused, case_insensitive=lambda kind: sf_field(kind) != "Account_No__c"),
    "hubspot": Preset("hubspot", "hubspot_api", "firstname", hs_destination, hs_property, hs_matched, hs_held,
                      case_insensitive=lambda kind: kind == "email"),
    "braze": Preset("braze", "braze_api", "plan", bz_destination, lambda kind: "external_id",
                    lambda kind, key: text(key), bz_held, modes=("upsert", "update", "mirror")),
}


class Model:
    """What the destination should hold: the vendor's match key -> the value, and the keys refused."""

    def __init__(self, preset: Preset, kind: str):
        self.preset, self.kind = preset, kind
        self.held: dict[Any, Any] = {}

    def key(self, key: Any) -> Any:
        return self.preset.matched(self.kind, key)

    def refused(self, key: Any) -> bool:
        return self.preset.refused(self.kind, key)

    def apply(self, op: str, key: Any, value: Any) -> None:
        if self.refused(key):
            return
        matched = self.key(key)
        if op == "delete":
            self.held.pop(matched, None)
        elif op == "upsert" or (op == "update" and matched in self.held) or (op == "insert"
                                                                               and matched not in self.held):
            self.held[matched] = value


CELLS = [(preset, kind) for preset in PRESETS for kind in KEYS]


@pytest.mark.parametrize("preset_name, kind", CELLS, ids=[f"{p}-{k.replace(' ', '-')}" for p, k in CELLS])
def test_every_key_type_through_every_mode(request, preset_name, kind):
    preset = PRESETS[preset_name]
    api = request.getfixturevalue(preset.fixture)
    arrow_type, keys = KEYS[kind]
    name = preset.key_field(kind)
    destination = preset.destination(api, kind)
    schema = pa.schema([(name, arrow_type), (preset.value_field, pa.string())])
    model = Model(preset, kind)
    if preset.case_insensitive(kind):  # the destination already holds k1 in another case: it is the same record
        seed(preset, api, name, keys[1].swapcase(), "seeded")
        model.held[model.key(keys[1])] = "seeded"

    def step(mode: str, ops: list[tuple[str, Any, Any]]) -> None:
        rows = [change(op, {name: key}, None if op == "delete" else {preset.value_field: value},
                       "update" if op == "update" else None) for op, key, value in ops]
        done = sync(destination, schema, rows, mode)
        for op, key, value in ops:
            model.apply(op, key, value)
        refused = [key for _, key, _ in ops if model.refused(key)]
        assert len(done.rejects) == len(refused), (mode, done.rejects)
        assert done.stats["sent"] == len(ops) - len(refused), (mode, done.stats)
        assert preset.held(api, kind) == model.held, f"{mode}: the destination is not what the vendor makes of it"

    step("upsert", [("upsert", k, "v1") for k in (keys[0], keys[2], keys[3])])
    if "update" in preset.modes:
        step("update", [("update", keys[0], "v2"), ("update", keys[4], "v2")])  # k4 does not exist: not created
    if "insert" in preset.modes:
        step("insert", [("insert", keys[4], "v3"), ("insert", keys[1], "v3")])  # k1 is new, or held in another case
    else:
        with pytest.raises(ConfigError, match="cannot take mode 'insert'"):
            sync(destination, schema, [change("insert", {name: keys[4]}, {preset.value_field: "v3"})], "insert")
    step("mirror", [("delete", keys[0], None), ("delete", keys[1], None), ("upsert", keys[2], "v4")])


def seed(preset: Preset, api: Any, name: str, key: str, value: str) -> None:
    """A record the destination held before the sync, its key in another case."""
    if preset.name == "salesforce":
        api.seed("Contact", [{name: key, "LastName": value}])
    else:
        api.seed("contacts", [{name: key, "firstname": value}])


#: Cells through the real sync job on the shared Spark session: the key typed by Spark itself (a BIGINT
#: to a Number External ID, mixed-case email text), mirrored over two dates.
SPARK_CELLS = [("salesforce", "integer", "k BIGINT, v STRING"), ("hubspot", "email", "k STRING, v STRING")]


@pytest.mark.parametrize("preset_name, kind, source_schema", SPARK_CELLS, ids=["salesforce-integer", "hubspot-email"])
def test_cells_through_the_sync_job(request, spark, warehouse, tmp_path, monkeypatch, preset_name, kind,
                                    source_schema):
    from tests_common.pipeline import Pipeline

    preset = PRESETS[preset_name]
    api = request.getfixturevalue(preset.fixture)
    configured = preset.destination(api, kind)
    for name, secret in configured.secrets.items():
        monkeypatch.setenv(f"ARETL_TEST_MATRIX_{name.upper()}", secret)
    destination = {"type": configured.sink.name, **configured.options,
                   "secrets_env": {name: f"ARETL_TEST_MATRIX_{name.upper()}" for name in configured.secrets}}
    mapping = {"k": preset.key_field(kind), "v": preset.value_field}
    keys = KEYS[kind][1]
    p = Pipeline(spark, warehouse, tmp_path, schema=source_schema, key=("k",))
    model = Model(preset, kind)
    for rows in ([(k, "v1") for k in keys], [(keys[2], "v2"), (keys[4], "v1")]):
        result = p.sync(p.step(rows), destination, mode="mirror", field_mapping=mapping, allow_mass_delete=True)
        assert result["committed"], result
        model.held = {model.key(k): v for k, v in rows}
        assert preset.held(api, kind) == model.held
