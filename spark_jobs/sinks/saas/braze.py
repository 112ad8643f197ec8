"""Braze destination: user profiles, the sync's key sent as each user's ``external_id``.

* upsert — ``POST /users/track`` with attribute objects (75 a request): a profile is created or updated;
* update — the same with ``_update_existing_only: true``: Braze updates existing profiles only;
* delete — ``POST /users/delete`` with ``external_ids`` (50 a request); an unknown id is no error;
* insert — refused: Braze has no "create only" (every track that creates also updates).

Why Braze rather than Customer.io (issue 34 asks for one marketing API): Braze's user data endpoints
take batches (75 attribute objects, 50 deletes a request) where Customer.io's Track API identifies or
deletes one person a request (its batch endpoint is a separate v2 API with a byte limit instead of a
count); Braze documents a rate limit per endpoint with ``X-RateLimit-*`` headers on every answer, which a
sync can pace itself by; upsert (create-or-update by ``external_id``), update-only
(``_update_existing_only``) and delete by the same id map onto the sync's modes one to one. Neither
vendor maintains a Python client for these endpoints that fits the delivery core (``customerio`` 3.2.0
sends one call per person), so both would be thin HTTP either way.

A record Braze refuses is a non-fatal error of its request (``errors: [{"type", "input_array",
"index"}]``): that record goes to the reject ledger with Braze's ``type`` as the reason, the others are
processed. Field checks, before anything is sent (``prepare``): the workspace's custom attributes are
read (``GET /custom_attributes``); a mapped field Braze blocklists (it would drop the data in silence),
a name Braze refuses (``$``-prefixed), or — with ``create_attributes: false`` — a custom attribute Braze
does not know yet fails the sync naming it. Values: dates as ISO 8601 (``dob`` as ``YYYY-MM-DD``, Braze's
form for it), times as ISO 8601 in UTC, decimals as numbers (refused when a double cannot hold every
digit), lists and maps as arrays and nested objects; a null removes the attribute.

A preset of the REST core (:mod:`spark_jobs.sinks.saas.preset`): its two requests and the reading of
Braze's errors (by ``index``) are REST options; the bodies are built from the converted values.

Connection: ``reverse_etl_braze`` — its host is the instance's REST endpoint
(``https://rest.iad-01.braze.com``, ...) and its password a REST API key with ``users.track``,
``users.delete`` and ``custom_attributes.get``. Rate: unless the sync sets them, ``requests_per_second``
and ``max_in_flight`` from the options, kept for the whole sync by the core; a 429 is waited out until
Braze's ``X-RateLimit-Reset`` and the batch sent again.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.contract.rest import RestOptions
from spark_jobs.contract.saas import BrazeOptions, api_url
from spark_jobs.contract.catalogue import BRAZE
from spark_jobs.contract.templating import to_json
from spark_jobs.errors import ConfigError, DestinationError
from spark_jobs.sinks.base import ChangeRecord, SinkCapabilities, SinkConfig
from spark_jobs.sinks.rest import RestRequest
from spark_jobs.sinks.rest.responses import Reply
from spark_jobs.sinks.saas.preset import SaasSink
from spark_jobs.sinks.saas.values import Unconvertible, as_date, iso_utc, json_number, text

TRACK_LIMIT = 75
DELETE_LIMIT = 50
#: Braze's own profile fields (user attributes object); everything else is a custom attribute.
STANDARD = frozenset({"country", "current_location", "date_of_first_session", "date_of_last_session", "dob",
                      "email", "email_subscribe", "external_id", "facebook", "first_name", "gender", "home_city",
                      "image_url", "language", "last_name", "marked_email_as_spam_at", "phone", "push_subscribe",
                      "push_tokens", "time_zone", "twitter", "subscription_groups"})


def attribute_value(name: str, value: Any) -> Any:
    """A value as Braze takes it for attribute ``name`` (the module docstring)."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat() if name == "dob" else iso_utc(as_date(value))
    if isinstance(value, (int, float, Decimal)):
        return json_number(value)
    if isinstance(value, (list, tuple)):
        return [attribute_value(name, v) for v in value]
    if isinstance(value, dict):
        return {str(k): attribute_value(name, v) for k, v in value.items()}
    return text(value)


class BrazeSink(SaasSink):
    record = BRAZE
    capabilities = SinkCapabilities(batch_size=TRACK_LIMIT, wants_json=False, paces_requests=True)
    options: BrazeOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        self.key = config.key_fields[0]

    def precondition(self, config: SinkConfig) -> None:
        if len(config.key_fields) != 1:
            raise ConfigError(f"The braze destination sends the sync's key as each user's external_id, so it must be "
                              f"one field; it is {config.key_fields}")
        if config.mode == "insert":
            raise ConfigError("The braze destination cannot take mode 'insert': Braze has no create-only write "
                              "(/users/track creates or updates). Use mode 'upsert', 'update' or 'mirror'.")
        if not config.connection.get("host"):
            raise ConfigError("The braze destination needs its instance's REST endpoint as the connection's host "
                              "(e.g. https://rest.iad-01.braze.com)")

    def rest_options(self) -> RestOptions:
        track = {"method": "POST", "url": "/users/track", "per": "batch", "batch_size": TRACK_LIMIT,
                 "response": {"success": [200, 201], "records": ["errors"], "record_failed": "`true`",
                              "record_error": "type", "record_index": "index", "error": "message"}}
        delete = {"method": "POST", "url": "/users/delete", "per": "batch", "batch_size": DELETE_LIMIT,
                  "response": {"success": [200, 201], "error": "message"}}
        return RestOptions.from_dict({"base_url": api_url(self.config.connection), "auth": {"type": "bearer"},
                                      "operations": {"upsert": track, "update": track, "delete": delete}})

    def limits(self, policy: DeliveryPolicy) -> DeliveryPolicy:
        return replace(policy, requests_per_second=policy.requests_per_second or self.options.requests_per_second,
                       max_in_flight=policy.max_in_flight or self.options.max_in_flight)

    def retry_wait(self, reply: Reply, headers: Any) -> float | None:
        """Seconds until Braze's rate-limit window resets (``X-RateLimit-Reset``, UTC epoch seconds)."""
        reset = headers.get("X-RateLimit-Reset")
        return max(0.0, int(reset) - time.time()) if reset and reset.isdigit() else None

    # --- driver side -------------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        """Fail before anything is sent when a mapped field is one Braze would drop or refuse."""
        known = self.asked_on_the_driver(self._custom_attributes)
        fields = [f for f in self.config.fields if f != self.key]
        refused = [f for f in fields if f.startswith("$")]
        blocked = [f for f in fields if known.get(f) == "Blocklisted"]
        unknown = [] if self.options.create_attributes else [f for f in fields if f not in STANDARD and f not in known]
        problems = [f"names Braze refuses {refused}"] if refused else []
        problems += [f"blocklisted custom attributes {blocked} (Braze drops their data)"] if blocked else []
        problems += [f"custom attributes Braze does not know {unknown} (create_attributes is false)"] if unknown else []
        if problems:
            raise DestinationError(f"braze: the sync maps {'; '.join(problems)}. Change field_mapping or the "
                                   "workspace's attributes. Nothing was sent.")

    def _custom_attributes(self) -> dict[str, str]:
        """Every custom attribute of the workspace with its status (50 a page, following ``Link``)."""
        known: dict[str, str] = {}
        url: str | None = "/custom_attributes"
        while url:
            response = self.auxiliary_request("GET", url, headers={"Accept": "application/json"})
            known.update({a["name"]: a.get("status", "Active") for a in response.json().get("attributes", [])})
            url = response.links.get("next", {}).get("url")
        return known

    # --- executor side -----------------------------------------------------------------------------
    def converted(self, record: ChangeRecord) -> dict[str, Any]:
        values = {}
        for name, value in record.data.items():
            if name == self.key:
                continue
            try:
                values[name] = attribute_value(name, value)
            except Unconvertible as exc:
                raise Unconvertible(f"{name}: {exc}") from None
        return values

    def render_body(self, request: RestRequest) -> bytes | None:
        ids = [text(r.key[self.key]) for r in request.records]
        if request.op == "delete":
            return to_json({"external_ids": ids}).encode()
        existing_only = request.op == "update" or self.options.update_existing_only
        return to_json({"attributes": [{"external_id": i, **r.data, **({"_update_existing_only": True}
                                                                          if existing_only else {})}
                                       for i, r in zip(ids, request.records)]}).encode()
