"""The built-in SaaS destinations, presets of the REST destination (:mod:`spark_jobs.sinks.rest`):

* :mod:`.preset` — what they add to the REST core: values in the vendor's types, several requests for
  one operation, auxiliary requests;
* :mod:`.values` — a record's values as the API accepts them, without losing or inventing anything;
* :mod:`.salesforce` (its fields' values and matching: :mod:`.salesforce_fields`), :mod:`.hubspot`,
  :mod:`.braze` — one vendor each.
"""
