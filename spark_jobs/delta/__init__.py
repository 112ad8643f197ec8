"""Delta Lake and Spark primitives the jobs share. Nothing here is a job, and nothing here knows a job:
jobs, sources, sinks and the lake state tables build on it.

* :mod:`.lake` — commit metadata, history, own-commit checks, write-conflict retries, statement-scoped
  session settings;
* :mod:`.timetravel` — logical date <-> version, restore-aware, and time travel on Delta sources;
* :mod:`.detection` — how a full extract differs from the table that recorded the source;
  :mod:`.extract_merge` — the MERGE of its changed rows;
* :mod:`.change_sets` — a Change Data Feed collapsed to one net change per key, and written;
* :mod:`.row_hash` — the row hash a snapshot table stores, and the reader that hides it;
* :mod:`.keys` — primary-key checks; :mod:`.guards` — data checks that ride along a write (a MERGE
  fails on a row it must not meet); :mod:`.key_pruning` — a MERGE's target pruned by key;
  :mod:`.partitions` — partitioned tables and their partition predicate; :mod:`.literals` — exact
  SQL literals;
* :mod:`.columns` — which column names a table may carry; :mod:`.renames` — renames through Delta
  column mapping; :mod:`.expressions` — expressions over many columns; :mod:`.rows` — the one row
  of a query;
* :mod:`.object_store` — what the commit protocol needs from an object store;
* :mod:`.fs` — small-file I/O through Hadoop's FileSystem (specs and results).
"""
