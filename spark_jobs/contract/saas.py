"""The options of the built-in SaaS destinations — ``salesforce``, ``hubspot``, ``braze`` — checked at
DAG parse time like every sink's (:mod:`.destinations`).

Each names what the vendor needs to find a record by the sync's key (Salesforce's External ID field,
HubSpot's unique ``id_property``; Braze's ``external_id`` is the key itself) and the limits the
vendor documents, so that the defaults work on a plain account and a bigger plan is one option away.
The credentials are never options: they come from the destination's Airflow connection and reach
the Spark process through its environment only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from spark_jobs.contract.sink_options import SinkOptions
from spark_jobs.contract.options import Invalid, at_least_one, option, optional, positive

#: A Salesforce API name: an object (``Contact``, ``Invoice__c``) or a field (``Customer_Id__c``).
SALESFORCE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: A HubSpot object type (``contacts``, ``0-1``, ``2-123456``, ``p_pets``) or property name.
HUBSPOT_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def _api_name(pattern: re.Pattern[str], what: str) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not pattern.match(value):
            raise Invalid(what)
        return value
    return check


def _api_version(value: Any) -> str:
    text = str(value)
    if not re.fullmatch(r"\d{2}\.0", text) or float(text) < 46.0:
        raise Invalid("a Salesforce API version such as '62.0', at least '46.0' (sObject Collections upsert)")
    return text


def _share(value: Any) -> float:
    share = positive(value)
    if share > 1:
        raise Invalid("a fraction in (0, 1]")
    return share


@dataclass(frozen=True, kw_only=True)
class SalesforceOptions(SinkOptions):
    """Upserts on an External ID field and deletes through the REST API's sObject Collections (200
    records a request) or, for a batch of ``bulk_threshold`` records or more, a Bulk API 2.0 job."""

    object: str = option(check=_api_name(SALESFORCE_NAME, "an sObject API name such as 'Contact' or 'Invoice__c'"),
                         doc="the sObject the records are written to, by its API name (Contact, Invoice__c)")
    external_id_field: str = option(
        check=_api_name(SALESFORCE_NAME, "a field API name such as 'Customer_Id__c'"),
        doc="the object's External ID field the sync's key is matched on (the key is mapped to it)")
    api_version: str | None = option(None, optional(_api_version),
                                     doc="the REST API version, e.g. '62.0' (default: the connection's version "
                                         "extra, else 62.0)")
    bulk_threshold: int = option(2000, at_least_one,
                                 doc="a batch of at least this many records goes through one Bulk API 2.0 job "
                                     "instead of sObject Collections requests of 200")
    all_or_none: bool = option(False, doc="sObject Collections: roll a whole request of 200 back when one record "
                                          "fails (the others are then rejected too, with Salesforce's reason)")
    bulk_poll_interval: float = option(2.0, positive, doc="seconds between polls of a Bulk API 2.0 job's state")
    bulk_timeout: float = option(3600.0, positive,
                                 doc="seconds a Bulk API 2.0 job may take before the batch is retried")


@dataclass(frozen=True, kw_only=True)
class HubSpotOptions(SinkOptions):
    """CRM v3 objects: batch upsert by a unique property, archive after reading the record ids,
    100 inputs a request, paced to the account's burst limit."""

    object_type: str = option("contacts", _api_name(HUBSPOT_NAME, "a CRM object type such as 'contacts' or '2-1234'"),
                              doc="the CRM object type (contacts, companies, deals, a custom object's type id)")
    id_property: str = option(check=_api_name(HUBSPOT_NAME, "a property name such as 'email'"),
                              doc="the property with unique values the sync's key is matched on (email for contacts, "
                                  "or a custom property marked unique); the key is mapped to it")
    burst_limit: int = option(100, at_least_one,
                              doc="the account's API requests per 10 seconds (100 Free/Starter, 190 "
                                  "Professional/Enterprise, 250 with the API limit increase); the sync stays under it")
    limit_share: float = option(0.95, _share,
                                doc="the fraction of burst_limit this sync may use (other apps share the account)")


@dataclass(frozen=True, kw_only=True)
class BrazeOptions(SinkOptions):
    """``/users/track`` (75 attribute objects a request) and ``/users/delete`` (50 ids a request),
    the sync's key sent as each user's ``external_id``."""

    update_existing_only: bool = option(False, doc="never create a user profile: sets Braze's "
                                                   "_update_existing_only (also what mode 'update' does)")
    create_attributes: bool = option(True, doc="allow fields that are neither standard profile fields nor custom "
                                               "attributes Braze already knows (false: such a field fails the sync "
                                               "before anything is sent)")
    requests_per_second: float = option(1000.0, positive,
                                        doc="requests a second for the sync (Braze allows 3,000 per 3 seconds on "
                                            "/users/track, 20,000 a minute on /users/delete)")
    max_in_flight: int = option(8, at_least_one, doc="requests in flight at once for the sync")



#: HubSpot's API, unless the connection names another host (a proxy, the test emulator).
HUBSPOT_API = "https://api.hubapi.com"


def salesforce_login_url(extra: dict[str, Any]) -> str | None:
    """The URL a Salesforce org's token is asked for, from its connection's extras (simple-salesforce's
    reading): ``instance_url`` (the org's My Domain URL) as given, or ``domain`` (``acme.my`` is
    ``https://acme.my.salesforce.com``); None when the connection names neither."""
    if extra.get("instance_url"):
        return str(extra["instance_url"]).rstrip("/")
    if extra.get("domain"):
        return f"https://{extra['domain']}.salesforce.com"
    return None


def hubspot_api_url(connection: dict[str, Any]) -> str:
    """HubSpot's API: the connection's host when it names one, else :data:`HUBSPOT_API`."""
    return api_url(connection) or HUBSPOT_API


def api_url(connection: dict[str, Any]) -> str | None:
    """A SaaS API's base URL from its connection: the host as given when it has a scheme, else HTTPS
    (or the connection's ``schema``), with its port; None when the connection has no host."""
    host = connection.get("host")
    if not host:
        return None
    url = host if "://" in host else f"{connection.get('schema') or 'https'}://{host}"
    return f"{url.rstrip('/')}:{connection['port']}" if connection.get("port") else url.rstrip("/")
