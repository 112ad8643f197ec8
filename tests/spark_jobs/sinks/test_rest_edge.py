"""Every record accounted for at the API edge (issue 43's repros), against an API that misbehaves on
purpose (tests_common/fault_api.py), through the delivery core in this process (tests_common/delivery.py:
the executors' own entry, no Spark): an answer that does not account for a record never counts it as
sent, a refusal inside a 2xx is configuration, no value changes the URL or breaks a header, secrets an
API quotes back leave in no encoding, and a body reads a secret from the connection."""

from __future__ import annotations

import json
import logging

import pytest

from spark_jobs.errors import ConfigError, DestinationError
from spark_jobs.sinks.rest import RestSink
from tests_common.delivery import change, deliver, sink_config
from tests_common.fault_api import Behaviour
from tests_common.secrets import encodings

KEY, FIELDS = ["id"], ["id", "label"]
PUT = {"method": "PUT", "url": "/items/{{ key.id }}", "per": "record", "body": '{"data": {{ data }}}'}
DELETE = {"method": "DELETE", "url": "/items/{{ key.id }}", "per": "record"}
BATCH = {"method": "POST", "url": "/items/batch", "batch_size": 10,
         "body": '{"items": [{% for r in records %}{"op": {{ r.op }}, "id": {{ r.key.id }}, "data": {{ r.data }}}'
                 '{% if not loop.last %},{% endif %}{% endfor %}]}',
         "response": {"records": "results", "record_failed": "status >= `300`", "record_error": "message",
                      "record_retryable": "status >= `500`", "match_result": "id", "match_record": "key.id"}}
UNANSWERED = "the API did not answer for this record"

PASSWORD, LOGIN = 'pw+7/x=Q"k\\9', "robot"
EXTRA = {"X-Tenant-Token": 'tt+1/=t"x', "body_token": "bt+2/=b\\y"}


def item(i, **data):
    return change("upsert", {"id": i}, {"label": f"l{i}", **data})


def rest(api, operations, mode="upsert", password=None, extra=None, **options):
    destination = {"type": "rest", "base_url": api.url, "operations": operations, "connection": {"login": LOGIN},
                   **options}
    secrets = {k: v for k, v in {"password": password, "extra": extra and json.dumps(extra)}.items() if v}
    config = sink_config(destination, KEY, FIELDS, mode, secrets, table="snapshots/items", consumer="crm",
                         to_version=1)
    return lambda: RestSink(config)


def stored(*ids):
    return {str(i): {"id": i, "label": f"l{i}"} for i in ids}


# --- 1, 7: a multi-status answer that does not account for every record -------------------------------

def test_a_short_multi_status_answer_sends_the_unanswered_records_again(fault_api):
    """Issue 43 §1: a batch of 5, the API applies the first and answers 207 with its result only."""
    fault_api.script(Behaviour("fewer", apply=(True, False, False, False, False)))
    done = deliver(rest(fault_api, {"upsert": BATCH}), [item(i) for i in range(5)], KEY, FIELDS,
                   backoff_initial=0.001, backoff_max=0.01)
    assert fault_api.state == stored(*range(5))
    assert done.rejects == [] and done.stats["sent"] == 5 and done.stats["retried"] == 4


def test_records_the_api_never_answers_for_are_rejected_saying_so(fault_api):
    fault_api.script(*[Behaviour("fewer", apply=(False,))] * 3)  # 207 with no result, three times
    done = deliver(rest(fault_api, {"upsert": BATCH}), [item(i) for i in range(3)], KEY, FIELDS, max_attempts=3,
                   backoff_initial=0.001, backoff_max=0.01)
    assert done.stats["sent"] == 0 and fault_api.state == {}
    assert sorted(key for key, _ in done.rejects) == ['{"id":0}', '{"id":1}', '{"id":2}']
    assert all(reason.endswith(UNANSWERED + " (HTTP 207 from POST " + fault_api.url + "/items/batch)")
               for _, reason in done.rejects), done.rejects


def test_a_successful_result_naming_a_record_never_sent_accounts_for_none(fault_api):
    """Issue 43 §7: the second record is not applied; the answer's second result names an id never sent."""
    fault_api.script(Behaviour("unknown", apply=(True, False)))
    done = deliver(rest(fault_api, {"upsert": BATCH}), [item(1), item(2)], KEY, FIELDS, backoff_initial=0.001,
                   backoff_max=0.01)
    assert fault_api.state == stored(1, 2) and done.stats["sent"] == 2 and done.stats["retried"] == 1


# --- 2: a 2xx that is no answer, a refusal inside a 2xx ------------------------------------------------

@pytest.mark.parametrize("answer", ["not_json", "no_list"])
def test_a_success_status_without_the_results_counts_nothing_as_sent(fault_api, answer):
    fault_api.script(*[Behaviour(answer, apply=(False,))] * 2)
    done = deliver(rest(fault_api, {"upsert": BATCH}), [item(i) for i in range(3)], KEY, FIELDS, max_attempts=2,
                   backoff_initial=0.001, backoff_max=0.01)
    assert done.stats["sent"] == 0 and fault_api.state == {}
    assert len(done.rejects) == 3 and all(UNANSWERED in reason for _, reason in done.rejects)


@pytest.mark.parametrize("failed", ["status == `0`", "ok == `false`"])
def test_a_refusal_inside_a_success_is_a_refusal(fault_api, failed):
    """A profile API answers ``200 {"status": 0, "error": ...}``, another ``{"ok": false}``."""
    put = {**PUT, "response": {"failed": failed, "error": "error"}}
    fault_api.script(Behaviour("flag", apply=(False,)))
    done = deliver(rest(fault_api, {"upsert": put}), [item(1), item(2)], KEY, FIELDS)
    assert done.rejects == [('{"id":1}', "HTTP 200: the request was not accepted")]
    assert done.stats["sent"] == 1 and fault_api.state == stored(2)


# --- 3: a rendered URL is the URL sent ----------------------------------------------------------------

def test_a_value_that_would_change_the_path_rejects_its_record(fault_api):
    records = [item("."), item(".."), item(""), item("ok")]
    done = deliver(rest(fault_api, {"upsert": PUT}), records, KEY, FIELDS)
    assert fault_api.state == stored("ok") and [s.path for s in fault_api.seen] == ["/items/ok"]
    said = ("rest: a value placed in the URL makes the path segment {}, which a client or server would take for "
            "another path")
    assert sorted(done.rejects) == [('{"id":""}', said.format("'' (empty)")), ('{"id":"."}', said.format("'.'")),
                                    ('{"id":".."}', said.format("'..'"))]


def test_a_mirror_delete_of_a_dot_removes_no_other_key(fault_api):
    fault_api.reset({"": {"label": "the empty key's data"}})
    done = deliver(rest(fault_api, {"upsert": PUT, "delete": DELETE}, mode="mirror"), [change("delete", {"id": "."})],
                   KEY, FIELDS)
    assert fault_api.state == {"": {"label": "the empty key's data"}} and fault_api.seen == []
    assert [key for key, _ in done.rejects] == ['{"id":"."}']


def test_a_url_the_client_would_send_otherwise_is_a_template_error(fault_api):
    sink = rest(fault_api, {"upsert": {**PUT, "url": "/items/../{{ key.id }}"}})()
    with pytest.raises(ConfigError, match="would be sent as"):
        sink.prepare({"id": "string", "label": "string"})


# --- 4: one bad header value ------------------------------------------------------------------------

BAD_HEADER_VALUES = [" leading space", "trailing space ", "emoji \U0001f389", "line\u2028separator", "nul\x00",
                     "vertical\x0btab", "form\x0cfeed", "next\x85line", "café", "tab\tinside"]


def test_one_bad_header_value_rejects_that_record_and_the_rest_is_delivered(fault_api):
    headed = {**PUT, "headers": {"X-Label": "{{ data.label }}"}}
    records = [item(0), *[item(i, label=v) for i, v in enumerate(BAD_HEADER_VALUES[:-1], 1)],
               item(98, label=BAD_HEADER_VALUES[-1]), item(99)]
    done = deliver(rest(fault_api, {"upsert": headed}), records, KEY, FIELDS)
    assert sorted(fault_api.state, key=int) == ["0", "98", "99"]  # a tab inside a value is allowed
    assert sorted(json.loads(key)["id"] for key, _ in done.rejects) == list(range(1, len(BAD_HEADER_VALUES)))
    assert all("header 'X-Label'" in reason for _, reason in done.rejects), done.rejects
    assert [s.headers["X-Label"] for s in fault_api.seen] == ["l0", "tab\tinside", "l99"]


# --- 5, 6: secrets ---------------------------------------------------------------------------------

AUTHS = {"api-key-query": {"type": "api_key", "query": "api_key"}, "basic": {"type": "basic"},
         "bearer": {"type": "bearer"},
         "oauth2": {"type": "oauth2_client_credentials", "token_url": "/oauth/token"}}


@pytest.mark.parametrize("auth", AUTHS)
def test_secrets_an_api_quotes_back_are_in_no_reason_message_or_log(fault_api, caplog, auth):
    """The API quotes each request back: in a whole request's refusal, in a record's result, in a result
    naming an id never sent, and in a redirect's ``Location``."""
    caplog.set_level(logging.DEBUG)
    sinks = {"per_record": rest(fault_api, {"upsert": PUT}, password=PASSWORD, extra=EXTRA, auth=AUTHS[auth]),
             "batch": rest(fault_api, {"upsert": BATCH}, password=PASSWORD, extra=EXTRA, auth=AUTHS[auth])}
    said = []
    fault_api.script(Behaviour("echo"), Behaviour("ok", apply=(False,)))
    said += [reason for _, reason in deliver(sinks["per_record"], [item(1), item(2)], KEY, FIELDS).rejects]
    fault_api.script(Behaviour("unknown", apply=(False,), unknown_status=422))
    said += [reason for _, reason in deliver(sinks["batch"], [item(3), item(4)], KEY, FIELDS,
                                             backoff_initial=0.001, backoff_max=0.01).rejects]
    fault_api.script(Behaviour("redirect"))
    with pytest.raises(DestinationError) as redirected:
        deliver(sinks["per_record"], [item(5)], KEY, FIELDS)
    said += [str(redirected.value), caplog.text]
    assert len(said) == 4 and "redirects to" in said[2]
    secrets = encodings(PASSWORD, LOGIN) | encodings(fault_api.token) | {
        form for value in EXTRA.values() for form in encodings(value)}
    leaks = {secret: text for secret in secrets for text in said if secret in text}
    assert not leaks, leaks


def test_a_body_reads_a_secret_from_the_connection(fault_api):
    put = {**PUT, "body": '{"data": {{ data }}, "token": {{ secrets.extra.body_token }}, '
                          '"pw": {{ secrets.password }}}'}
    done = deliver(rest(fault_api, {"upsert": put}, password=PASSWORD, extra=EXTRA, auth={"type": "none"}),
                   [item(1)], KEY, FIELDS)
    assert done.stats["sent"] == 1 and fault_api.state == stored(1)
    [seen] = fault_api.seen
    assert json.loads(seen.body) == {"data": {"id": 1, "label": "l1"}, "token": EXTRA["body_token"], "pw": PASSWORD}
