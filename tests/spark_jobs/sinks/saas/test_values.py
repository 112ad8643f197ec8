"""Value conversions of the SaaS destinations (spark_jobs/sinks/saas/values.py), without Spark: each
value either arrives exactly as it was or is refused with a reason — never rounded, cut or shifted."""

import datetime as dt
from decimal import Decimal

import pytest

from spark_jobs.sinks.saas import values
from spark_jobs.sinks.saas.values import Unconvertible

UTC = dt.timezone.utc


@pytest.mark.parametrize("given", [dt.date(2024, 2, 29), "2024-02-29", "2024-02-29T00:00:00.000Z",
                                   dt.datetime(2024, 2, 29, tzinfo=UTC), dt.datetime(2024, 2, 29, 1, 0,
                                   tzinfo=dt.timezone(dt.timedelta(hours=1)))])
def test_a_day_is_midnight_utc_in_epoch_millis(given):
    assert values.midnight_millis(given) == 1709164800000


@pytest.mark.parametrize("given", ["2024-02-29T10:00:00Z", dt.datetime(2024, 2, 29, 0, 0, 1, tzinfo=UTC)])
def test_a_time_of_day_is_no_date(given):
    with pytest.raises(Unconvertible, match="is a time of day, not a date"):
        values.as_date(given)


def test_times_are_utc_with_milliseconds_and_naive_ones_are_read_as_utc():
    aware = dt.datetime(2024, 1, 31, 11, 0, 0, 123000, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert values.iso_utc(aware) == "2024-01-31T10:00:00.123Z"
    assert values.iso_utc(dt.datetime(2024, 1, 31, 10)) == "2024-01-31T10:00:00.000Z"
    assert values.iso_utc("2024-01-31T10:00:00+00:00") == "2024-01-31T10:00:00.000Z"
    assert values.epoch_millis(dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)) == 1500
    with pytest.raises(Unconvertible, match="microseconds"):
        values.iso_utc(dt.datetime(2024, 1, 31, 10, 0, 0, 123456))


@pytest.mark.parametrize("given, sent", [(Decimal("12.50"), 12.5), (3, 3), (Decimal("1E+3"), 1000), (0.1, 0.1),
                                         ("2.25", 2.25), (Decimal("-0.000001"), -0.000001)])
def test_numbers_go_into_json_when_a_double_keeps_every_digit(given, sent):
    result = values.json_number(given)
    assert result == sent and type(result) is type(sent)


@pytest.mark.parametrize("given", [Decimal("1234567890.1234567891"), Decimal("0.12345678901234567890"),
                                   float("nan"), float("inf"), True, "many"])
def test_a_number_json_cannot_keep_is_refused(given):
    with pytest.raises(Unconvertible):
        values.json_number(given)


def test_number_text_keeps_every_digit_in_plain_notation():
    assert values.number_text(Decimal("1E+6")) == "1000000"
    assert values.number_text(Decimal("0.000000000000000001")) == "0.000000000000000001"
    assert values.number_text(Decimal("12.50")) == "12.50"


def test_booleans_and_text():
    assert values.boolean("TRUE") is True and values.boolean(False) is False
    with pytest.raises(Unconvertible):
        values.boolean("yes")
    assert values.text(True) == "true" and values.text(Decimal("2.50")) == "2.50"
    assert values.text(dt.date(2024, 1, 2)) == "2024-01-02" and values.text(7) == "7"
    with pytest.raises(Unconvertible):
        values.text({"a": 1})
