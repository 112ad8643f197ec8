"""Numbers at the REST edge (design.md §8, §9): a record reaches a JSON sink as the JSON text Spark's
``to_json`` wrote (spark_jobs.sinks.batch.with_json), and every number in it reaches a template, a URL,
a header and a body as exact as Spark held it — a DECIMAL as a decimal, its digits and its scale
(``12.3400``, ``1E-18``); a BIGINT past 2^53 as that integer — while a DOUBLE stays a double. Through
the delivery core in this process (tests_common/delivery.py: the executors' own entry, no Spark) against
real HTTP APIs (tests_common/fault_api.py, the webhook receiver of the ``http`` preset)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from spark_jobs.contract.rest import RestOperation
from spark_jobs.contract.templating import TemplateValueError, to_json
from spark_jobs.errors import ConfigError
from spark_jobs.sinks.presets import HttpSink
from spark_jobs.sinks.rest import RestSink, rendering
from tests_common.delivery import deliver, sink_config, written

KEY = ["id"]
PUT = {"method": "PUT", "url": "/items/{{ key.id }}", "per": "record", "body": '{"data": {{ data }}}'}
DELETE = {"method": "DELETE", "url": "/items/{{ key.id }}", "per": "record"}
#: Two decimal(20,4) keys one ten-thousandth apart: one double (1234567890123456.0) for both.
NEAR = ("1234567890123456.1234", "1234567890123456.1235")


def rest(api, operations, types, mode="upsert"):
    """The ``rest`` sink as the sync job builds it, the destination fields' Spark types included."""
    config = sink_config({"type": "rest", "base_url": api.url, "operations": operations}, KEY, list(types), mode,
                         field_types=types)
    return lambda: RestSink(config)


def upsert(key: str, row: str):
    """An upsert whose key and row are the JSON text the JVM wrote (``key`` the id's text)."""
    return written("upsert", f'{{"id":{key}}}', row)


# --- keys ---------------------------------------------------------------------------------------------

KEYED = {"id": "decimal(20,4)", "label": "string"}


def test_decimal_keys_that_differ_past_a_double_reach_distinct_urls_and_items(fault_api):
    labelled = {**PUT, "headers": {"X-Id": "{{ key.id }}"}}
    keys = [*NEAR, "12.3400", "-0.0001"]
    done = deliver(rest(fault_api, {"upsert": labelled}, KEYED),
                   [upsert(k, f'{{"id":{k},"label":"l{i}"}}') for i, k in enumerate(keys)], KEY, list(KEYED))
    assert done.rejects == [] and done.stats["sent"] == 4
    assert [(s.path, s.header("X-Id")) for s in fault_api.seen] == [(f"/items/{k}", k) for k in keys]
    assert sorted(fault_api.state) == sorted(keys)  # four records, four items: none wrote another's


def test_a_mirror_delete_of_a_decimal_key_removes_that_item_alone(fault_api):
    fault_api.reset({k: {"label": k} for k in NEAR})
    done = deliver(rest(fault_api, {"upsert": PUT, "delete": DELETE}, KEYED, mode="mirror"),
                   [written("delete", f'{{"id":{NEAR[1]}}}', "")], KEY, list(KEYED))
    assert done.stats["deleted"] == 1 and fault_api.state == {NEAR[0]: {"label": NEAR[0]}}


def test_results_name_decimal_keys_by_their_value(fault_api):
    """The API reads the batch's ids as doubles and names each in its result so (``12.34`` for
    ``12.3400``): a number names the record whose number has its value."""
    batch = {"method": "POST", "url": "/items/batch", "batch_size": 10,
             "body": '{"items": [{% for r in records %}{"op": {{ r.op }}, "id": {{ r.key.id }}, "data": {{ r.data }}}'
                     '{% if not loop.last %},{% endif %}{% endfor %}]}',
             "response": {"records": "results", "record_failed": "status >= `300`", "match_result": "id",
                          "match_record": "key.id"}}
    done = deliver(rest(fault_api, {"upsert": batch}, KEYED),
                   [upsert(k, f'{{"id":{k},"label":"x"}}') for k in ("12.3400", "0.5000", "7.0000")], KEY, list(KEYED),
                   backoff_initial=0.001, backoff_max=0.01)
    assert (done.stats["sent"], done.stats["retried"], done.rejects) == (3, 0, [])
    assert b'"id": 12.3400' in fault_api.seen[0].body


def test_a_template_mixing_a_decimal_with_a_float_fails_before_anything_is_sent(fault_api):
    """Python refuses ``Decimal * float``: the check on the driver renders a decimal for a decimal field."""
    priced = {"id": "bigint", "price": "decimal(20,4)"}
    sink = rest(fault_api, {"upsert": {**PUT, "body": '{"net": {{ data.price * 1.5 }}}'}}, priced)()
    with pytest.raises(ConfigError, match="made-up record .*unsupported operand type.*Decimal"):
        sink.prepare(priced)
    done = deliver(rest(fault_api, {"upsert": {**PUT, "body": '{"net": {{ data.price | float * 1.5 }}}'}}, priced),
                   [upsert("1", '{"id":1,"price":12.3400}')], KEY, list(priced))
    assert done.stats["sent"] == 1 and fault_api.seen[0].body == b'{"net": 18.509999999999998}'


# --- values in a body -----------------------------------------------------------------------------------

AMOUNTS = {"id": "bigint", "big": "decimal(38,18)", "price": "decimal(20,4)", "tiny": "decimal(38,18)",
           "zero": "decimal(38,18)", "whole": "decimal(38,0)", "count": "bigint"}
#: As Spark writes them (java.math.BigDecimal's text: the scale kept, scientific below 1E-6).
AMOUNT_TEXT = {"big": "12345678901234567890.123456789012345678", "price": "12.3400", "tiny": "1E-18",
               "zero": "0E-18", "whole": "123456789012345678901234567890", "count": "9007199254740993"}
AMOUNT_ROW = "{" + ",".join(f'"{n}":{t}' for n, t in sorted({**AMOUNT_TEXT, "id": "1"}.items())) + "}"


def test_decimal_and_big_integer_values_reach_the_body_as_the_exact_json_spark_wrote(fault_api):
    """Through a body template, the ``json`` filter and the default body (the data as it is)."""
    bodies = {"template": PUT, "filter": {**PUT, "body": '{"data": {{ data | json }}}'},
              "default": {k: v for k, v in PUT.items() if k != "body"}}
    for name, operation in bodies.items():
        fault_api.reset()
        done = deliver(rest(fault_api, {"upsert": operation}, AMOUNTS), [upsert("1", AMOUNT_ROW)], KEY, list(AMOUNTS))
        assert done.stats["sent"] == 1, (name, done.rejects)
        body = fault_api.seen[0].body.decode()
        assert all(f'"{n}":{t}' in body for n, t in AMOUNT_TEXT.items()), (name, body)


def test_the_http_preset_sends_decimals_and_big_integers_exactly(http_destination):
    config = sink_config({"type": "http", "url": http_destination.url}, KEY, list(AMOUNTS), field_types=AMOUNTS)
    done = deliver(lambda: HttpSink(config), [upsert("1", AMOUNT_ROW)], KEY, list(AMOUNTS))
    assert done.stats["sent"] == 1
    body = http_destination.requests[0].body.decode()
    assert f'"data":{AMOUNT_ROW}' in body, body


MIXED = {"id": "bigint", "ratio": "double", "single": "float", "huge": "double", "negative_zero": "double",
         "not_a_number": "double", "infinite": "double", "price": "decimal(20,4)",
         "doubles": {"type": "array", "elementType": "double", "containsNull": True},
         "pair": {"type": "struct", "fields": [
             {"name": "exact", "type": "decimal(5,2)", "nullable": True, "metadata": {}},
             {"name": "ratio", "type": "double", "nullable": True, "metadata": {}}]},
         "prices": {"type": "map", "keyType": "string", "valueType": "decimal(4,2)", "valueContainsNull": True}}
MIXED_ROW = ('{"doubles":[0.1,1.0E20],"huge":1.0E20,"id":1,"infinite":"Infinity","negative_zero":-0.0,'
             '"not_a_number":"NaN","pair":{"exact":1.50,"ratio":0.1},"price":12.3400,"prices":{"a":2.50},'
             '"ratio":0.1,"single":0.1}')


def test_doubles_stay_doubles_beside_decimals(fault_api):
    """A double is a float in a template and in the body as before (Spark writes NaN and infinities as
    text: they stay text); a decimal beside it, at any depth, is exact."""
    kinds = ("[{{ data.ratio is float }}, {{ data.huge is float }}, {{ data.pair.ratio is float }}, "
             "{{ data.doubles[0] is float }}, {{ data.price is float }}, {{ data.pair.exact is float }}]")
    put = {**PUT, "body": '{"data": {{ data }}, "floats": ' + kinds + "}"}
    done = deliver(rest(fault_api, {"upsert": put}, MIXED), [upsert("1", MIXED_ROW)], KEY, list(MIXED))
    assert done.stats["sent"] == 1, done.rejects
    assert json.loads(fault_api.seen[0].body)["floats"] == [True, True, True, True, False, False]
    assert fault_api.seen[0].body.decode().startswith(
        '{"data": {"doubles":[0.1,1e+20],"huge":1e+20,"id":1,"infinite":"Infinity","negative_zero":-0.0,'
        '"not_a_number":"NaN","pair":{"exact":1.50,"ratio":0.1},"price":12.3400,"prices":{"a":2.50},'
        '"ratio":0.1,"single":0.1}')


@pytest.mark.parametrize("value", [Decimal("NaN"), Decimal("-Infinity"), float("nan"), float("inf")])
def test_a_decimal_nan_or_infinity_in_a_body_is_refused_as_a_float_one_is(value):
    """No Spark decimal is NaN; a value a template or a plugin's record makes may be: the record is
    rejected for it (:class:`TemplateValueError`), the JSON is never sent with it."""
    operation = RestOperation(method="PUT", url="/items/{{ key.id }}", per="record", body='{"data": {{ data }}}')
    with pytest.raises(TemplateValueError, match="NaN or infinite"):
        rendering.body("upsert", operation, {"data": {"id": 1, "v": value}})
    assert to_json({"v": value}) in ('{"v":NaN}', '{"v":-Infinity}', '{"v":Infinity}')  # text for a message
