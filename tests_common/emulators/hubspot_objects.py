"""The HubSpot emulator's object store: records per object type, stored and matched as HubSpot does
(:mod:`tests_common.emulators.hubspot` cites the documentation), apart from the HTTP API that serves them.

A record's properties are strings (:func:`~tests_common.emulators.hubspot_properties.stored`); an empty
string clears a property; an email is kept in lower case and matched case-insensitively
(:func:`~tests_common.emulators.hubspot_properties.normalised`); an archived record is found by no lookup.
Finding a record by a property with unique values costs no scan (an index): a benchmark upserts tens of
thousands. The store does not lock: the API holds its lock around every call.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from tests_common.emulators.hubspot_properties import Property, default_properties, normalised, stored


def now_iso() -> str:
    """A timestamp as HubSpot writes it (``2026-11-28T10:00:00.000Z``)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class HubSpotRecord:
    id: str
    properties: dict[str, str]
    created: str
    updated: str
    archived: bool = False

    def public(self, names: Sequence[str] | None = None, new: bool | None = None) -> dict[str, Any]:
        """The record as a batch result shows it (``names``: the properties asked for; ``new``: whether
        an upsert created it)."""
        props = self.properties if names is None else {n: self.properties.get(n) for n in names}
        out = {"id": self.id, "properties": {**props, "hs_object_id": self.id}, "createdAt": self.created,
               "updatedAt": self.updated, "archived": self.archived}
        if new is not None:
            out["new"] = new
        return out


@dataclass
class HubSpotObjects:
    """Every object type's properties and records."""

    schemas: dict[str, dict[str, Property]] = field(default_factory=default_properties)
    records: dict[str, dict[str, HubSpotRecord]] = field(default_factory=dict)
    #: (object type, identifying property, value) -> live record
    index: dict[tuple[str, str, str], HubSpotRecord] = field(default_factory=dict)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1001))

    def define(self, kind: str, prop: Property) -> None:
        """Add or replace a property; the live records are indexed by it if it identifies them."""
        self.schemas.setdefault(kind, {})[prop.name] = prop
        for record in self.live(kind):
            self._reindex(kind, record)

    def live(self, kind: str) -> list[HubSpotRecord]:
        return [r for r in self.records.get(kind, {}).values() if not r.archived]

    def by_id(self, kind: str, record_id: str) -> HubSpotRecord | None:
        """The live record with this ``hs_object_id``."""
        record = self.records.get(kind, {}).get(record_id)
        return None if record is None or record.archived else record

    def create(self, kind: str, values: dict[str, str]) -> HubSpotRecord:
        now = now_iso()
        record = HubSpotRecord(str(next(self.ids)), {k: v for k, v in values.items() if v != ""}, now, now)
        record.properties.setdefault("createdate", now)
        self.records.setdefault(kind, {})[record.id] = record
        self._reindex(kind, record)
        return record

    def upsert(self, kind: str, item: dict[str, Any]) -> dict[str, Any]:
        """One valid upsert input applied: the record it names by its ``idProperty`` updated (an empty
        string clears a property), or created; its batch result."""
        schema = self.schemas[kind]
        values = {n: stored(schema[n], v) for n, v in item["properties"].items()}
        values[item["idProperty"]] = normalised(item["idProperty"], item["id"])
        record = self.lookup(kind, item["idProperty"], item["id"])
        if record is None:
            return self.create(kind, values).public(new=True)
        self._unindex(kind, record)
        for name, v in values.items():
            if v == "":
                record.properties.pop(name, None)
            else:
                record.properties[name] = v
        record.updated = now_iso()
        self._reindex(kind, record)
        return record.public(new=False)

    def archive(self, kind: str, record_id: str) -> None:
        record = self.by_id(kind, record_id)
        if record is not None:
            record.archived = True
            self._unindex(kind, record)

    def lookup(self, kind: str, prop: str, value: str) -> HubSpotRecord | None:
        """The live record whose ``prop`` matches ``value`` as HubSpot matches it (:func:`normalised`)."""
        value = normalised(prop, value)
        if prop in self._identifying(kind):
            return self.index.get((kind, prop, value))
        return next((r for r in self.live(kind) if r.properties.get(prop) == value), None)

    def by_any_email(self, kind: str, value: str) -> HubSpotRecord | None:
        """The contact whose email or one of whose secondary emails (``hs_additional_emails``) is
        ``value``, case-insensitively: how HubSpot finds a contact by email."""
        found = self.lookup(kind, "email", value)
        if found is not None:
            return found
        wanted = normalised("email", value)
        return next((r for r in self.live(kind)
                     if wanted in r.properties.get("hs_additional_emails", "").split(";")), None)

    def _identifying(self, kind: str) -> list[str]:
        return [p.name for p in self.schemas.get(kind, {}).values() if p.identifies]

    def _reindex(self, kind: str, record: HubSpotRecord) -> None:
        for prop in self._identifying(kind):
            if prop in record.properties:
                self.index[(kind, prop, record.properties[prop])] = record

    def _unindex(self, kind: str, record: HubSpotRecord) -> None:
        for prop in self._identifying(kind):
            self.index.pop((kind, prop, record.properties.get(prop, "")), None)
