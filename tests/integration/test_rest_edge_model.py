"""A model of the REST edge (issue 43 §5): Hypothesis generates records and an API whose behaviour per
request is generated too, the real REST sink delivers them, and a plain-Python model of the sync's
ledger loop says what must come out.

* **records** — keys of one key type per case (the key-type matrix's values, as a JSON sink receives
  them, and for text the edge strings: dots, empty, unicode, control characters, quotes), a label that
  goes into a header (per-record requests) and the body, and sometimes a 1 MB value;
* **the API** (tests_common/fault_api.py) — per request: applies all, some or none of its records, and
  answers in full, with fewer or reordered results or one naming an id never sent, with a refusal
  inside a 200 or a body that is no answer, 429/503, too late (after applying), a refusal quoting the
  request's headers, query and body back, or a redirect carrying the API key; honestly (a result says
  "applied" only of a record it applied);
* **the model** — each run sends the change set (until a run commits it) and the ledger's records, as
  the sync job does (:mod:`spark_jobs.jobs.sync`): a record rejected goes into the ledger and is sent
  again next run, a run that fails or is refused whole commits nothing; runs go on until the ledger holds
  only the records no API can take (a path segment ``.``, ``..`` or empty, a header no client sends) or a
  bound.

Checked after every run: each record has one outcome (sent or rejected), and none is counted sent
that the API did not apply in that run; after the runs: the API holds the source for every record it
can take (both idempotent modes: ``upsert``, ``mirror``), the ledger holds exactly the others, and no
planted secret — the API key or password, the connection's extras, the OAuth2 token, in any encoding
— is in any reason, message or log line. Most cases drive the sink in this process through the
delivery core (the executors' entry); a few fixed cases run the real sync job (Spark) and search every
file of the warehouse, the results and the log. ``ARETL_TEST_PROFILE=long`` explores
(docs/development/tests.md).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from spark_jobs.errors import JobError
from spark_jobs.sinks.rest import RestSink
from tests_common.delivery import change, deliver, sink_config
from tests_common.fault_api import Behaviour, FaultApi, item_id
from tests_common.http_server import served
from tests_common.key_values import TYPES, as_json
from tests_common.markers import PROFILE as TEST_PROFILE
from tests_common.secrets import encodings

PROFILES = {"ci": {"examples": 200, "derandomize": True}, "long": {"examples": 5000, "derandomize": False}}
PROFILE = PROFILES[TEST_PROFILE]
EDGE = settings(max_examples=PROFILE["examples"], deadline=None, database=None, derandomize=PROFILE["derandomize"],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture], print_blob=True)

LOGIN, PASSWORD = "robot", 'pw+7/x=Q"k\\9 z'
EXTRA = {"X-Tenant-Token": 'tt+1/=t"x', "body_token": "bt+2/=b\\y"}
TOKEN = "tok+en/=1"
SECRETS = encodings(PASSWORD, LOGIN) | encodings(TOKEN) | {f for v in EXTRA.values() for f in encodings(v)}
EDGE_TEXT = [".", "..", "", "a/b?c#d", "ünï 🎉", "ctl\x00\x0b\x0c", "q\"u'o\\te", "line\u2028sep", "nel\x85", " lead"]
LABELS = ["plain", "with space", "tab\tinside", *EDGE_TEXT]
ANSWERS = ["ok", "fewer", "reordered", "unknown", "flag", "no_list", "not_json", "status", "echo", "redirect"]
AUTHS = {"api_key": {"type": "api_key", "query": "api_key"}, "basic": {"type": "basic"}, "bearer": {"type": "bearer"},
         "header": {"type": "api_key", "header": "X-Api-Key"},
         "oauth2": {"type": "oauth2_client_credentials", "token_url": "/oauth/token"}}
RUNS = 12  # more than a script's behaviours: once the script is used up, the API behaves
TIMEOUT, SLOW = 0.25, 0.3

PER_RECORD = {"upsert": {"method": "PUT", "url": "/items/{{ key.id }}", "per": "record",
                         "headers": {"X-Label": "{{ data.label }}"},
                         "body": '{"data": {{ data }}, "token": {{ secrets.extra.body_token }}}'},
              "delete": {"method": "DELETE", "url": "/items/{{ key.id }}", "per": "record"}}
BATCH_BODY = ('{"token": {{ secrets.extra.body_token }}, "items": [{% for r in records %}{"op": {{ r.op }}, '
              '"id": {{ r.key.id }}, "data": {{ r.data }}}{% if not loop.last %},{% endif %}{% endfor %}]}')
BATCH = {op: {"method": "POST", "url": "/items/batch", "batch_size": 3, "body": BATCH_BODY,
              "response": {"records": "results", "record_failed": "status >= `300`", "record_error": "message",
                           "record_retryable": "status >= `500`", "match_result": "id", "match_record": "key.id",
                           "failed": "ok == `false`"}} for op in ("upsert", "delete")}
RESPONSE = {"failed": "ok == `false`", "error": "error || message"}


@dataclass
class Case:
    mode: str
    shape: str  # per_record | batch
    auth: str
    concurrency: int
    rows: list[dict[str, Any]]  # the source
    gone: list[Any]  # keys the API holds that the source does not (mirror deletes them)
    script: list[Behaviour]
    big: bool = False
    outputs: list[str] = field(default_factory=list)  # every reason and message the runs gave


def key_values(kind: str) -> list[Any]:
    values = [as_json(v, kind) for v in TYPES[kind][2]]
    return [*values, *EDGE_TEXT] if kind == "string" else values


@st.composite
def cases(draw: Any) -> Case:
    kind = draw(st.sampled_from(sorted(TYPES)))
    pool = list({item_id(v): v for v in key_values(kind)}.values())
    keys = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6, unique_by=item_id))
    others = [v for v in pool if item_id(v) not in {item_id(k) for k in keys}]
    gone = draw(st.lists(st.sampled_from(others), max_size=2, unique_by=item_id)) if others else []
    labels = st.sampled_from(LABELS) | st.none()
    rows = [{"id": k, "label": draw(labels)} for k in keys]
    answers = st.sampled_from([*ANSWERS * 4, "slow"])  # slow: one in 41 (each costs a timeout)
    behaviour = st.builds(Behaviour, answer=answers,
                          apply=st.lists(st.booleans(), min_size=1, max_size=3).map(tuple),
                          refusal=st.sampled_from([422, 503]), status=st.sampled_from([429, 503]),
                          keep=st.integers(0, 2), slow=st.just(0.0), unknown_status=st.sampled_from([200, 422]))
    script = [b if b.answer != "slow" else Behaviour("slow", b.apply, slow=SLOW)
              for b in draw(st.lists(behaviour, max_size=8))]
    return Case(draw(st.sampled_from(["upsert", "mirror"])), draw(st.sampled_from(["per_record", "batch"])),
                draw(st.sampled_from(sorted(AUTHS))), draw(st.sampled_from([1, 2])), rows, gone, script,
                big=draw(st.integers(0, 19)) == 0)


# --- the model ------------------------------------------------------------------------------------------

def placeable(case: Case, op: str, key: Any, row: dict[str, Any] | None) -> bool:
    """Whether a record can be sent as it is (the documented rules, said again here): per record, its key
    is a path segment and its label a header."""
    if case.shape != "per_record":
        return True
    if item_id(key) in ("", ".", ".."):
        return False
    label = "" if op == "delete" or row is None or row["label"] is None else row["label"]
    printable = all(" " <= c <= "~" or c == "\t" for c in label)
    return printable and label == label.strip(" \t")


def records(case: Case, ledger: set[str], committed: bool) -> tuple[list[dict[str, Any]], int]:
    """What a run sends — the change set until a run commits it, and the ledger's records as they are
    at the source (a key gone from it: a delete) — and how many of them are the change set's."""
    source = {json.dumps({"id": r["id"]}, separators=(",", ":")): r for r in case.rows}
    gone = {json.dumps({"id": g}, separators=(",", ":")): g for g in case.gone} if case.mode == "mirror" else {}
    wanted = set(source) | set(gone) if not committed else set()
    sent = []
    for key in sorted(wanted | ledger):
        if key in source:
            sent.append(change("upsert", {"id": source[key]["id"]}, with_big(case, source[key])))
        else:
            sent.append(change("delete", {"id": gone[key]}))
    return sent, len(wanted)


def with_big(case: Case, row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "big": "x" * (1 << 20)} if case.big else row


def expected_state(case: Case, seeded: dict[str, Any]) -> dict[str, Any]:
    state = dict(seeded)
    for g in case.gone:
        if case.mode == "mirror" and placeable(case, "delete", g, None):
            state.pop(item_id(g))
    for row in case.rows:
        if placeable(case, "upsert", row["id"], row):
            state[item_id(row["id"])] = with_big(case, row)
    return state


def unplaceable(case: Case) -> set[str]:
    keys = {json.dumps({"id": r["id"]}, separators=(",", ":")) for r in case.rows
            if not placeable(case, "upsert", r["id"], r)}
    if case.mode == "mirror":
        keys |= {json.dumps({"id": g}, separators=(",", ":")) for g in case.gone
                 if not placeable(case, "delete", g, None)}
    return keys


# --- the runs -------------------------------------------------------------------------------------------

def sink_factory(api: FaultApi, case: Case, config: bool = False) -> Any:
    """A sink factory for ``case`` against ``api`` (``config``: the destination options instead)."""
    operations = PER_RECORD if case.shape == "per_record" else BATCH
    operations = {op: o for op, o in operations.items() if case.mode == "mirror" or op == "upsert"}
    destination = {"type": "rest", "base_url": api.url, "operations": operations, "auth": AUTHS[case.auth],
                   "response": RESPONSE, "timeout": TIMEOUT, "connection": {"login": LOGIN}}
    if config:
        return destination
    secrets = {"password": PASSWORD, "extra": json.dumps(EXTRA)}
    config = sink_config(destination, ["id"], ["id", "label", *(["big"] if case.big else [])], case.mode, secrets,
                         table="snapshots/edge", consumer="model", to_version=1)
    return lambda: RestSink(config)


def one_run(api: FaultApi, case: Case, sent: list[dict[str, Any]]) -> dict[str, str] | None:
    """Deliver ``sent``; the rejected records' reasons, or None when the run failed. Checks the run's
    invariants against what the API applied meanwhile."""
    before = len(api.applied)
    try:
        done = deliver(sink_factory(api, case), sent, ["id"], ["id", "label", *(["big"] if case.big else [])],
                       max_attempts=3, backoff_initial=0.001, backoff_max=0.005, batch_size=4,
                       concurrency=case.concurrency)
    except JobError as exc:
        case.outputs.append(str(exc))
        return None
    rejected = dict(done.rejects)
    case.outputs += list(rejected.values())
    assert len(rejected) == len(done.rejects), "a record with two outcomes"
    assert done.stats["sent"] + done.stats["rejected"] == len(sent), (done.stats, len(sent))
    applied = {(op, ident, json.dumps(data, sort_keys=True) if op == "upsert" else None)
               for _, op, ident, data in api.applied[before:]}
    for record in sent:
        if record["_key"] in rejected:
            continue
        data = json.loads(record["_data_json"])
        op, ident = record["_op"], item_id(data["id"])
        assert (op, ident, json.dumps(data, sort_keys=True) if op == "upsert" else None) in applied, (
            f"{record['_key']} counted sent ({op}) but the API did not apply it in this run")
    return rejected


def run_model(api: FaultApi, case: Case) -> None:
    seeded = {item_id(g): {"id": g, "label": "seeded"} for g in case.gone}
    api.reset(seeded)
    api.script(*case.script)
    ledger: set[str] = set()
    committed = False
    for number in range(RUNS):
        sent, changed = records(case, ledger, committed)
        rejected = one_run(api, case, sent)
        note(f"run {number}: sent {len(sent)}, rejected {None if rejected is None else sorted(rejected)}")
        if rejected is None:
            continue  # failed: nothing committed, the ledger as it was
        ledger = (ledger | set(rejected)) - {r["_key"] for r in sent if r["_key"] not in rejected}
        # the sync job's rule: none delivered, and the API refused some (not only records no API can take)
        refused_whole = changed > 0 and len(rejected) == len(sent) and not set(rejected) <= unplaceable(case)
        committed = committed or not refused_whole
        if committed and ledger == unplaceable(case):
            break
    assert committed and ledger == unplaceable(case), (committed, ledger, unplaceable(case))
    assert api.state == expected_state(case, seeded)


@pytest.fixture(scope="module")
def edge_api():
    yield from served(FaultApi(token=TOKEN))


@EDGE
@given(case=cases())
def test_every_record_is_accounted_for_and_no_secret_leaves(edge_api, caplog, case):
    caplog.set_level(logging.DEBUG)
    caplog.clear()
    run_model(edge_api, case)
    said = [*case.outputs, caplog.text]
    leaks = {secret for secret in SECRETS for text in said if secret in text}
    assert not leaks, f"planted secrets in the outputs: {leaks}"


# --- a fixed case through the real sync job ------------------------------------------------------------

#: A batch, the API key in the query string (percent-encoded, and in the redirect's ``Location``), the
#: extras' token in a header and the body: the first run's answers quote them back in failed results
#: (one naming an id never sent) and a whole refusal, the second redirects with the key.
SYNC_CASE = Case("upsert", "batch", "api_key", 1, gone=[], rows=[
    {"id": "a", "label": "plain"}, {"id": ".", "label": None}, {"id": "ünï 🎉", "label": " lead"}], script=[
    Behaviour("unknown", apply=(False,), unknown_status=422), Behaviour("echo"), Behaviour("redirect")])


def test_through_the_sync_job_no_secret_reaches_the_warehouse_the_results_or_the_log(spark, warehouse, tmp_path,
                                                                                   edge_api, monkeypatch, caplog):
    """The fixed case above, each run a real sync (snapshot, diff and sync jobs in the shared session,
    the secrets in the environment as the operator puts them): runs until the ledger is empty, then
    every file of the warehouse, every row of its tables, every result and the log are searched."""
    from spark_jobs.entry import run

    from tests_common.pipeline import Pipeline
    from tests_common.secrets import warehouse_places

    case = SYNC_CASE
    monkeypatch.setenv("ARETL_SECRET_EDGE_MODEL_PASSWORD", PASSWORD)
    monkeypatch.setenv("ARETL_SECRET_EDGE_MODEL_EXTRA", json.dumps(EXTRA))
    caplog.set_level(logging.DEBUG)
    destination = {**sink_factory(edge_api, case, config=True), "secrets_env": {
        "password": "ARETL_SECRET_EDGE_MODEL_PASSWORD", "extra": "ARETL_SECRET_EDGE_MODEL_EXTRA"}}
    edge_api.reset()
    edge_api.script(*case.script)
    p = Pipeline(spark, warehouse, tmp_path, schema="id STRING, label STRING", name="edge_model")
    changes, results = p.step([(r["id"], r["label"]) for r in case.rows]), []
    for _ in range(len(case.script) + 2):
        results.append(run(spark, {"job": "sync", "warehouse": warehouse, **p.spec(changes, destination)}))
        if results[-1]["status"] == "success" and not edge_api.script_queue:
            break
        if results[-1]["status"] == "success":
            changes = p.step([(r["id"], r["label"]) for r in case.rows])  # nothing new: the ledger's records go
    assert results[-1]["status"] == "success" and p.ledger() == []
    failures = [r["error"]["message"] for r in results if r["status"] == "failed"]
    assert sum("redirects to" in f for f in failures) == 1, failures  # the rest: refused whole, nothing committed
    assert all("redirects to" in f or "refused this change set whole" in f for f in failures), failures
    assert edge_api.state == expected_state(case, {})
    places = {**warehouse_places(spark, warehouse), "results": json.dumps(results, default=str), "log": caplog.text}
    leaks = {secret: place for secret in SECRETS for place, text in places.items() if secret in text}
    assert not leaks, leaks
