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

Connection: its host is the instance's REST endpoint (``https://rest.iad-01.braze.com``, ...) and its
password a REST API key with ``users.track``, ``users.delete`` and ``custom_attributes.get``. A 429 is
waited out until Braze's ``X-RateLimit-Reset`` and the batch sent again.
"""

from __future__ import annotations

import time
from collections import defaultdict
from decimal import Decimal
from typing import Any, Callable, ClassVar, Sequence

from spark_jobs.contract.saas import BrazeOptions
from spark_jobs.errors import ConfigError, DestinationError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, Sink, SinkCapabilities, SinkConfig
from spark_jobs.sinks.saas.client import ApiClient
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
    from datetime import date, datetime

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


class BrazeSink(Sink):
    name = "braze"
    capabilities = SinkCapabilities(batch_size=TRACK_LIMIT)
    options_class = BrazeOptions
    options: BrazeOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        if len(config.key_fields) != 1:
            raise ConfigError(f"The braze destination sends the sync's key as each user's external_id, so it must be "
                              f"one field; it is {config.key_fields}")
        if config.mode == "insert":
            raise ConfigError("The braze destination cannot take mode 'insert': Braze has no create-only write "
                              "(/users/track creates or updates). Use mode 'upsert', 'update' or 'mirror'.")
        host = config.connection.get("host")
        if not host:
            raise ConfigError("The braze destination needs its instance's REST endpoint as the connection's host "
                              "(e.g. https://rest.iad-01.braze.com)")
        base = host if "://" in host else f"{config.connection.get('schema') or 'https'}://{host}"
        if config.connection.get("port"):
            base = f"{base.rstrip('/')}:{config.connection['port']}"
        key = config.password or ""
        self.client = ApiClient("braze", base, lambda: {"Authorization": f"Bearer {key}"}, secrets=[key],
                                wait_hint=_until_reset)
        self.key = config.key_fields[0]

    # --- driver side -------------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        """Fail before anything is sent when a mapped field is one Braze would drop or refuse."""
        known = self._custom_attributes()
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
        path: str | None = "/custom_attributes"
        while path:
            response = self.client.request("GET", path, ok=(200,))
            if response.status_code != 200:
                raise DestinationError(f"braze: reading the custom attributes failed: HTTP {response.status_code} "
                                       f"{self.client.redact(response.text[:300])}")
            known.update({a["name"]: a.get("status", "Active") for a in response.json().get("attributes", [])})
            path = response.links.get("next", {}).get("url")
        return known

    # --- executor side -----------------------------------------------------------------------------
    def open(self) -> None:
        self.client.open()

    def close(self) -> None:
        self.client.close()

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        batch = self.as_batch(records)
        by_op: dict[str, list[int]] = defaultdict(list)
        for i, op in enumerate(batch.ops):
            by_op[op].append(i)
        outcomes: list[Outcome] = [None] * len(batch)
        every = batch.records
        for op, positions in by_op.items():
            size = DELETE_LIMIT if op == "delete" else TRACK_LIMIT
            for start in range(0, len(positions), size):
                chunk = positions[start:start + size]
                for i, outcome in zip(chunk, self.OPERATIONS[op](self, [every[i] for i in chunk])):
                    outcomes[i] = outcome
        return outcomes

    def _track(self, records: list[ChangeRecord], existing_only: bool) -> list[Outcome]:
        outcomes: list[Outcome] = [None] * len(records)
        objects, sent = [], []
        for i, record in enumerate(records):
            try:
                objects.append(self._attributes(record, existing_only))
                sent.append(i)
            except Unconvertible as exc:
                outcomes[i] = Rejected(f"braze: {exc}")
        if objects:
            response = self.client.request("POST", "/users/track", json={"attributes": objects}, ok=(200, 201))
            for index, reason in _refused(response, len(objects)).items():
                outcomes[sent[index]] = Rejected(f"braze: {reason}")
        return outcomes

    def _attributes(self, record: ChangeRecord, existing_only: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"external_id": text(record.key[self.key])}
        if existing_only or self.options.update_existing_only:
            out["_update_existing_only"] = True
        for name, value in record.data.items():
            if name == self.key:
                continue
            try:
                out[name] = attribute_value(name, value)
            except Unconvertible as exc:
                raise Unconvertible(f"{name}: {exc}") from None
        return out

    def _upsert(self, records: list[ChangeRecord]) -> list[Outcome]:
        return self._track(records, existing_only=False)

    def _update(self, records: list[ChangeRecord]) -> list[Outcome]:
        return self._track(records, existing_only=True)

    def _delete(self, records: list[ChangeRecord]) -> list[Outcome]:
        ids = [text(r.key[self.key]) for r in records]
        response = self.client.request("POST", "/users/delete", json={"external_ids": ids}, ok=(200, 201))
        if response.status_code not in (200, 201):
            return [Rejected(f"braze: HTTP {response.status_code}: {_message(response)}")] * len(records)
        return [None] * len(records)

    OPERATIONS: ClassVar[dict[str, Callable[["BrazeSink", list[ChangeRecord]], list[Outcome]]]] = {
        "upsert": _upsert, "update": _update, "delete": _delete}


def _refused(response: Any, count: int) -> dict[int, str]:
    """The attribute objects Braze refused, by position: a success's non-fatal errors, or — a fatal
    error — every object, each with its own error when Braze names one."""
    body = _json(response)
    errors = {e.get("index"): str(e.get("type")) for e in body.get("errors", []) or []
              if isinstance(e, dict) and e.get("input_array", "attributes") == "attributes"}
    if response.status_code in (200, 201):
        return {i: reason for i, reason in errors.items() if isinstance(i, int) and 0 <= i < count}
    return {i: errors.get(i, f"HTTP {response.status_code}: {_message(response)}") for i in range(count)}


def _json(response: Any) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _message(response: Any) -> str:
    return str(_json(response).get("message") or response.text[:300])


def _until_reset(response: Any) -> float | None:
    """Seconds until Braze's rate-limit window resets (``X-RateLimit-Reset``, UTC epoch seconds)."""
    reset = response.headers.get("X-RateLimit-Reset")
    if not reset or not reset.isdigit():
        return None
    return max(0.0, int(reset) - time.time())

