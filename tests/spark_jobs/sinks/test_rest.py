"""The REST destination against a real API (tests_common/rest_api.py, "Contacts API"), driven through
the delivery core in this process (tests_common/delivery.py: the executors' own entry, no Spark):
requests per record and per batch, escaping in URLs and bodies, multi-status results matched by id,
retryable items, each auth, OAuth2 tokens shared and refreshed, idempotency keys, secrets kept out of
messages, and the limits for the whole sync. The sync job around it (ledger, dry run, runs):
test_rest_sync.py."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.errors import ConfigError, DestinationError, DestinationUnreachableError
from spark_jobs.jobs.delivery import resolve
from spark_jobs.sinks.batch import ChangeBatch
from spark_jobs.sinks.rest import RestSink
from spark_jobs.sinks.rest.rendering import Run, idempotency_key
from tests_common.delivery import change, deliver, sink_config

KEY, FIELDS = ["id"], ["id", "email", "name"]
UPSERT_ONE = {"method": "PUT", "url": "/v1/contacts/{{ key.id }}", "per": "record",
              "body": '{"email": {{ data.email }}, "name": {{ data.name }}}'}
DELETE_ONE = {"method": "DELETE", "url": "/v1/contacts/{{ key.id }}", "per": "record",
              "response": {"success": ["2xx", 404]}}
UPSERT_BATCH = {"method": "POST", "url": "/v1/contacts/batch", "batch_size": 3,
                "body": '{"contacts": [{% for r in records %}{{ r.data }}{% if not loop.last %},{% endif %}'
                        '{% endfor %}]}',
                "response": {"records": "results", "record_failed": "status >= `300`", "record_error": "message",
                             "record_retryable": "status >= `500`", "match_result": "id", "match_record": "key.id"}}


def contact(i: int, **fields):
    return change("upsert", {"id": i}, {"email": f"c{i}@example.com", "name": f"n{i}", **fields})


def rest(api, operations, mode="upsert", password=None, login=None, extra=None, delivery=None, **options):
    """A sink factory for ``operations`` against ``api`` (options as a destination dict gives them);
    ``delivery``: the partition's share of the sync's policy, by which its sinks pace their requests."""
    destination = {"type": "rest", "base_url": f"{api.url}", "operations": operations, **options,
                   "connection": {"conn_type": "http", "login": login}}
    secrets = {k: v for k, v in {"password": password, "extra": extra and json.dumps(extra)}.items() if v}
    config = sink_config(destination, KEY, FIELDS, mode, secrets, table="snapshots/customers", consumer="crm",
                         to_version=3, delivery=delivery)
    return lambda: RestSink(config)


def test_one_request_per_record_with_values_escaped_in_url_and_body(contacts_api):
    odd = 'a/b?c=d#e f'  # a key that would change the path and the query unescaped
    name = 'Zoë "the" \\ O\'Brien\n\u2603'
    records = [contact(1), change("upsert", {"id": odd}, {"email": "x@y.z", "name": name})]
    done = deliver(rest(contacts_api, {"upsert": UPSERT_ONE}), records, KEY, FIELDS)
    assert done.stats["sent"] == 2 and done.rejects == []
    assert contacts_api.contacts[odd] == {"email": "x@y.z", "name": name, "id": odd}
    assert contacts_api.contacts["1"]["email"] == "c1@example.com"
    assert {r.path for r in contacts_api.requests} == {"/v1/contacts/1", "/v1/contacts/a%2Fb%3Fc%3Dd%23e%20f"}


def test_mirror_sends_upserts_and_deletes_through_their_own_requests(contacts_api):
    contacts_api.seed({2: {"id": "2"}, 3: {"id": "3"}})
    records = [contact(1), change("delete", {"id": 2}), change("delete", {"id": 9})]  # 9: already gone
    done = deliver(rest(contacts_api, {"upsert": UPSERT_ONE, "delete": DELETE_ONE}, mode="mirror"), records, KEY,
                   FIELDS)
    assert done.stats["sent"] == 3 and done.stats["deleted"] == 2 and done.rejects == []
    assert sorted(contacts_api.contacts) == ["1", "3"]
    assert [(r.method, r.status) for r in contacts_api.requests] == [("PUT", 200), ("DELETE", 204), ("DELETE", 404)]


def test_a_mirror_sync_needs_a_delete_operation(contacts_api):
    with pytest.raises(ConfigError, match="cannot take a 'mirror' sync: it declares no delete operation"):
        rest(contacts_api, {"upsert": UPSERT_ONE}, mode="mirror")()


def test_batches_read_multi_status_results_matched_by_id(contacts_api):
    contacts_api.refuse_emails("c4@example.com")
    contacts_api.busy(2, times=1)  # one 503 item: sent again, alone
    records = [contact(i) for i in range(1, 8)]
    done = deliver(rest(contacts_api, {"upsert": UPSERT_BATCH}), records, KEY, FIELDS, batch_size=10,
                   backoff_initial=0.01)
    assert done.rejects == [('{"id":4}', "rest: email 'c4@example.com' is not a valid address")]
    assert done.stats["sent"] == 6 and done.stats["retried"] == 1
    assert sorted(contacts_api.contacts, key=int) == ["1", "2", "3", "5", "6", "7"]
    sizes = [len(r.json()["contacts"]) for r in contacts_api.requests]
    assert sizes == [3, 3, 1, 1]  # batch_size 3 per request; then contact 2 alone


def test_a_request_refused_whole_rejects_its_records_with_the_apis_reason(contacts_api):
    contacts_api.fail_next(422)
    done = deliver(rest(contacts_api, {"upsert": UPSERT_ONE}), [contact(1), contact(2)], KEY, FIELDS)
    assert done.rejects == [('{"id":1}', "HTTP 422: injected 422")] and done.stats["sent"] == 1


def test_a_template_value_that_cannot_be_placed_rejects_that_record_only(contacts_api):
    records = [contact(1), change("upsert", {"id": None}, {"email": "a@b.c", "name": "x"})]
    done = deliver(rest(contacts_api, {"upsert": UPSERT_ONE}), records, KEY, FIELDS)
    assert done.rejects == [('{"id":null}', "rest: a value placed in the URL is null")]
    assert list(contacts_api.contacts) == ["1"]


def test_templates_are_checked_before_anything_is_sent(contacts_api):
    sink = rest(contacts_api, {"upsert": {**UPSERT_ONE, "body": '{"e": {{ data.emial }}}'}})()
    with pytest.raises(ConfigError) as failure:
        sink.prepare({"id": "int", "email": "string", "name": "string"})
    assert "'dict object' has no attribute 'emial'" in str(failure.value)
    assert "the sync's fields ['id', 'email', 'name']" in str(failure.value)
    quoted = rest(contacts_api, {"upsert": {**UPSERT_ONE, "body": '{"e": "{{ data.email }}"}'}})()
    with pytest.raises(ConfigError, match="takes no quotes around it"):
        quoted.prepare({"id": "int", "email": "string", "name": "string"})
    assert contacts_api.requests == []


@pytest.mark.parametrize("template", ["{{ data.__class__.__mro__ }}", "{{ data.pop('id') }}",
                                      "{{ cycler.__init__.__globals__.os.environ }}"])
def test_the_sandbox_keeps_templates_to_the_record(contacts_api, template):
    sink = rest(contacts_api, {"upsert": {**UPSERT_ONE, "body": '{"x": ' + template + "}"}})()
    with pytest.raises(ConfigError, match="a template failed"):
        sink.prepare({"id": "int", "email": "string", "name": "string"})


@pytest.mark.parametrize(("auth", "required"), [
    ({"type": "basic"}, ("basic", "s3cret", "robot")),
    ({"type": "bearer"}, ("bearer", "s3cret")),
    ({"type": "api_key", "header": "X-Api-Token", "prefix": ""}, ("api_key_header", "s3cret", "", "X-Api-Token")),
    ({"type": "api_key", "query": "api_key"}, ("api_key_query", "s3cret", "", "api_key")),
    ({"type": "oauth2_client_credentials", "token_url": "{url}/oauth/token"}, ("oauth2", "s3cret", "robot")),
], ids=["basic", "bearer", "api-key-header", "api-key-query", "oauth2"])
def test_each_auth_reaches_the_api_and_a_wrong_secret_fails_the_sync(contacts_api, auth, required):
    contacts_api.require(*required)
    auth = {k: v.format(url=contacts_api.url) for k, v in auth.items()}
    good = rest(contacts_api, {"upsert": UPSERT_ONE}, password="s3cret", login="robot", auth=auth)
    assert deliver(good, [contact(1)], KEY, FIELDS).stats["sent"] == 1
    bad = rest(contacts_api, {"upsert": UPSERT_ONE}, password="wrong", login="robot", auth=auth)
    with pytest.raises(DestinationError) as failure:
        deliver(bad, [contact(2)], KEY, FIELDS)
    assert "401" in str(failure.value) and "wrong" not in str(failure.value)
    assert list(contacts_api.contacts) == ["1"]


def test_an_oauth2_token_is_fetched_once_per_process_and_refreshed(contacts_api):
    contacts_api.require("oauth2", "client-secret-1", "robot")
    auth = {"type": "oauth2_client_credentials", "token_url": f"{contacts_api.url}/oauth/token",
            "client_auth": "body", "scope": "contacts.write"}
    sinks = rest(contacts_api, {"upsert": UPSERT_ONE}, password="client-secret-1", login="robot", auth=auth)
    records = [contact(i) for i in range(40)]
    done = deliver(sinks, records, KEY, FIELDS, batch_size=5, concurrency=4)  # four threads, four sinks
    assert done.stats["sent"] == 40 and len(contacts_api.token_requests) == 1
    assert contacts_api.token_requests[0].body == (
        b"grant_type=client_credentials&scope=contacts.write&client_id=robot&client_secret=client-secret-1")
    contacts_api.revoke_tokens()  # the API forgets it: the next request gets 401, then one new token
    assert deliver(sinks, [contact(50)], KEY, FIELDS).stats["sent"] == 1
    assert len(contacts_api.token_requests) == 2
    assert [r.status for r in contacts_api.requests[-2:]] == [401, 200]


def test_an_oauth2_token_past_its_expiry_is_fetched_again(contacts_api):
    contacts_api.token_lifetime = 1.2  # fetched again a little before: at 1.08 s
    contacts_api.require("oauth2", "client-secret-2", "robot")
    auth = {"type": "oauth2_client_credentials", "token_url": f"{contacts_api.url}/oauth/token"}
    sinks = rest(contacts_api, {"upsert": UPSERT_ONE}, password="client-secret-2", login="robot", auth=auth)
    deliver(sinks, [contact(1)], KEY, FIELDS)
    time.sleep(1.2)
    deliver(sinks, [contact(2)], KEY, FIELDS)
    assert len(contacts_api.token_requests) == 2 and all(r.status == 200 for r in contacts_api.requests)


def test_an_oauth2_client_the_token_endpoint_refuses_fails_the_sync_naming_it(contacts_api):
    contacts_api.require("oauth2", "right", "robot")
    auth = {"type": "oauth2_client_credentials", "token_url": f"{contacts_api.url}/oauth/token"}
    with pytest.raises(DestinationError, match="OAuth2 token request to .* was refused: HTTP 401 invalid_client"):
        deliver(rest(contacts_api, {"upsert": UPSERT_ONE}, password="wrong-secret", login="robot", auth=auth),
                [contact(1)], KEY, FIELDS)


def test_secrets_stay_out_of_messages_and_logs(contacts_api, caplog):
    """An API key in the query string is in the URL requests quotes in its errors: the message (and
    so the log, the run history and the task's failure) has *** instead."""
    caplog.set_level(logging.DEBUG)
    key = "key-7f3a9c2e"
    down = {"type": "rest", "base_url": "http://127.0.0.1:9", "operations": {"upsert": UPSERT_ONE},
            "auth": {"type": "api_key", "query": "api_key"}, "connection": {}}
    config = sink_config(down, KEY, FIELDS, secrets={"password": key, "extra": json.dumps({"X-Tenant": "tenant-9x"})})
    with pytest.raises(DestinationUnreachableError) as failure:
        deliver(lambda: RestSink(config), [contact(1)], KEY, FIELDS, max_attempts=2, backoff_initial=0.01)
    message = str(failure.value)
    assert "failed to connect" in message and "api_key=***" in message
    assert key not in message and key not in caplog.text
    assert failure.value.__cause__ is None or key not in repr(failure.value.__cause__.__cause__)


def test_an_idempotency_key_makes_a_resend_after_a_lost_response_apply_once(contacts_api):
    """insert mode, POST /v1/contacts: the API applies the request, the answer never arrives, the core
    sends it again — with the same key, so the API replays its first answer instead of a 409 (which
    would reject a record that was in fact created)."""
    contacts_api.hang(0.3, times=None, then="lose_answer")
    create = {"method": "POST", "url": "/v1/contacts", "per": "record"}
    sinks = rest(contacts_api, {"insert": create}, mode="insert", idempotency_header="Idempotency-Key", timeout=5)
    threading.Timer(0.2, contacts_api.clear_faults).start()  # answers normally again for the resend
    records = [change("insert", {"id": 1}, {"email": "a@b.c", "name": "ann"})]
    done = deliver(sinks, records, KEY, FIELDS, backoff_initial=0.4)
    first, again = contacts_api.requests
    assert first.header("Idempotency-Key") == again.header("Idempotency-Key")
    assert done.stats["sent"] == 1 and done.rejects == [] and list(contacts_api.contacts) == ["1"]
    # the key is the change set's: the same record of another version gets another one
    import pyarrow as pa

    sent = list(ChangeBatch(pa.Table.from_pylist(records), KEY, FIELDS))
    assert first.header("Idempotency-Key") == idempotency_key(Run("snapshots/customers", "crm", 3), sent)
    assert idempotency_key(Run("snapshots/customers", "crm", 4), sent) != first.header("Idempotency-Key")


def test_requests_per_second_and_in_flight_hold_for_the_whole_sync(contacts_api):
    """Two delivering partitions (threads here, as executors would be) with the policy the sync
    resolves for them: the API never has more than max_in_flight requests at once, and the requests
    arrive no faster than requests_per_second allows (each bucket starts empty)."""
    policy = DeliveryPolicy(requests_per_second=20, max_in_flight=2, concurrency=4, batch_size=2)
    delivery = resolve(policy, RestSink, running_at_once=lambda: 4)
    assert delivery.partitions == 2 and delivery.policy.requests_per_second == 10
    assert delivery.policy.concurrency == 1
    contacts_api.hang(0.02, times=None, then="apply")
    arrivals = delivered_by_two_partitions(contacts_api, delivery.policy, 20)
    assert len(arrivals) == 40 and len(contacts_api.contacts) == 40
    assert contacts_api.max_in_flight <= 2
    for n, arrived in enumerate(arrivals, start=1):
        assert arrived >= n / 20 - 0.05, f"request {n} arrived at {arrived:.2f}s: faster than 20/s"
    assert arrivals[-1] < 2 * 40 / 20 + 1  # and not throttled much harder than asked


def test_with_the_apis_window_known_its_allowance_goes_at_once_and_never_one_more(contacts_api):
    """``requests_window``: the API counts requests over rolling windows (the Contacts API: 20 in any
    second, 429 past that). Two partitions with their resolved share (10 per second each) send a
    window's allowance at once — evenly spaced, the 20th request would wait 0.95 s — and never one
    request over it: a slot frees a window after its answer, so slow answers cannot crowd a window."""
    contacts_api.rate_limit = 20
    policy = DeliveryPolicy(requests_per_second=20, requests_window=1.0, concurrency=4, batch_size=1)
    delivery = resolve(policy, RestSink, running_at_once=lambda: 2)
    assert delivery.policy.requests_per_second == 10 and delivery.policy.requests_window == 1.0
    contacts_api.hang(0.05, times=None, then="apply")
    arrivals = delivered_by_two_partitions(contacts_api, delivery.policy, 30)
    assert [r.status for r in contacts_api.requests] == [200] * 60 and len(contacts_api.contacts) == 60
    busiest = max(sum(1 for later in arrivals if arrived <= later < arrived + 1.0) for arrived in arrivals)
    assert busiest == 20, f"{busiest} requests in the busiest second: the window's allowance is 20"
    # evenly spaced, each partition's 10th request would come 0.9 s after its first: the head was used if
    # the 20th came well before that (measured from the first arrival, so a slow start does not count)
    head = arrivals[19] - arrivals[0]
    assert head < 0.75, f"the 20th request came {head:.2f}s after the first: the window's head was not used"


def delivered_by_two_partitions(api, policy: DeliveryPolicy, each: int) -> list[float]:
    """Deliver ``each`` contacts from each of two partitions (threads here, as executors would be)
    with the resolved ``policy``; the seconds after the start at which the API received each request.
    Each partition has its sinks' config of its own, as each executor task unpickles one."""
    shared = {k: v for k, v in policy.to_dict().items() if v is not None}
    started = time.monotonic()
    parts = [[contact(i) for i in range(p * each, p * each + each)] for p in range(2)]
    threads = [threading.Thread(target=deliver, args=(rest(api, {"upsert": UPSERT_ONE}, delivery=policy), part, KEY,
                                                      FIELDS), kwargs=shared) for part in parts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(r.received_monotonic - started for r in api.requests)


def test_the_records_rate_and_the_partitions_cap_split_over_the_delivering_partitions():
    policy = DeliveryPolicy(rate_limit=100, concurrency=3)
    assert resolve(policy, RestSink, lambda: 4).partitions == 4
    assert resolve(policy, RestSink, lambda: 4).policy.rate_limit == 25
    assert resolve(DeliveryPolicy(concurrency=3), RestSink, lambda: 1 / 0).partitions is None  # no limit: not asked
    capped = resolve(DeliveryPolicy(max_in_flight=5, concurrency=3), RestSink, lambda: 4)
    assert (capped.partitions, capped.policy.concurrency) == (4, 1)
    assert resolve(DeliveryPolicy(max_in_flight=9, concurrency=3), RestSink, lambda: 2).policy.concurrency == 3
    asked = []  # the cluster's parallelism costs a Spark job: asked once, whatever the limits
    resolve(DeliveryPolicy(max_in_flight=9, requests_per_second=3.0), RestSink, lambda: asked.append(1) or 2)
    assert asked == [1]
