"""The jobs the entry point runs. Each job's ``run_<job>`` function takes the session and the job's
typed spec from :mod:`spark_jobs.contract` and returns its result; the jobs are the top layer: they
drive the sinks, the wide-table library, the sources and the lake's state, and nothing below imports
them.

* :mod:`.snapshot` — record a source as one new Delta version; :mod:`.rebuild` — a past date
  recorded by replaying the later ones forward; :mod:`.backfill` — several dates in one application;
* :mod:`.diff` — a consumer's net change set;
* :mod:`.sync` — deliver a change set and commit, in steps: :mod:`.sync_plan` (what is sent),
  :mod:`.delivery` (where and how wide it is sent), :mod:`.sync_commit` (the ledger settled, the
  consumer committed) and :mod:`.sync_report` (the run history row and the result, from what the
  steps returned);
* :mod:`.widen` — a wide table's step;
* :mod:`.history` — an SCD type-2 history; :mod:`.restore` — a table back to a date's version;
  :mod:`.savepoints` — versions maintenance keeps;
* :mod:`.retention` — deleting what is kept only for a while; :mod:`.maintenance` — OPTIMIZE and VACUUM.
"""
