"""The fault matrix of issue 15: what was tried against the product and held.

Every test marked ``@pytest.mark.fault(kind, case)`` (here and in a few neighbouring modules) is one
cell; a run prints the summary at its end (tests_common/fault_matrix.py), and a cell holds when its
test passed, i.e. checked against the source itself that nothing was lost, nothing duplicated (or,
for bad input, that nothing was written and the error names the problem). As of this branch:

=================  =====  ==========================================================================
kind               cells  what is checked
=================  =====  ==========================================================================
bad input          54     keys (null, duplicate, missing, NaN, too long for Postgres' index), empty
                          source mirrored into a full destination, missing source path/table/JDBC
                          table, schema drift (add, drop, type change, rename), unknown sink type or
                          option, bad field_mapping, broken ``module:Class`` sinks, wide-table specs
                          (key in a sequence group, a field in two, an unknown field, list-shaped),
                          logical dates (older than the newest, one instant spelt several ways),
                          column names (spaces, dots, SQL keywords, leading ``_``), values (NaN,
                          ±inf, -0.0, decimals at full precision, SQL in values) into SQLite and
                          Postgres, bytes that are not UTF-8 and very long strings into SQLite,
                          Postgres, Kafka and HTTP (each record delivered as itself or in the
                          reject ledger with the reason; the sync goes on), and a connection's
                          secrets absent from argv, spec, result, XCom, logs, tables and the Spark
                          event logs, in spark-submit and Spark Connect mode; Kafka sources (a value
                          that does not parse, no key, a key in two partitions, a missing topic,
                          offsets deleted by retention); wide-table joins (a cycle, a join on its
                          own column, a right-side key not unique, an unknown row kind); names that
                          would escape the warehouse (``..``, separators, control characters) in
                          operators and hand-written specs; source columns differing only in case; a
                          logical date far in the future; a 2,000-column table through snapshot,
                          diff and sync
crash point        9      SIGKILL of the job after the snapshot MERGE; after a sync's delivery;
                          after its reject-ledger write; mid-delivery (a spark-submit driver, a
                          Connect client) with the re-run started at once while what the killed
                          run started may still send; after a widen's fold
                          (``sum`` not counted twice, ``_system/consumers`` caught up by the
                          re-run), also of a changelog's retractions (not subtracted twice); after
                          the reverse-index update; a mirror sync failed midway
                          through its deletes — each followed by a plain re-run that converges
concurrency        5      three syncs of one consumer at once (exactly one winner per
                          from-version, the committed version never moves backwards, the
                          destination never behind it), then a loser re-run: refused as stale; two
                          snapshot runs of one table; two widen runs of one wide table with a ``sum``;
                          a lost sync race on a table whose key and columns start with ``_`` (the
                          loser puts back the committed version's rows); an earlier snapshot date
                          overtaken by a later one (refused as past, naming the rebuild, not retried)
storage fault      6      the snapshot sensor/trigger over S3 (moto): an outage keeps it waiting
                          until the version appears, or times out saying so; a corrupt commit or a
                          directory without a Delta log ends the wait at once; the jobs on a newest
                          commit cut short or emptied (a data error naming it); a warehouse disk full,
                          then read-only (typed errors, nothing committed, the retry succeeds)
destination fault  6      HTTP down for a whole run then back; a 5xx storm and 429 with
                          Retry-After (bounded retries, no duplicate from the server's view);
                          Postgres' connection dropped mid-delivery; HTTP redirects (301 refused
                          naming the Location, 307 followed with the body); a destination table
                          dropped by hand (refused, naming full_resync=True; SQLite and Delta); an
                          HTTP destination refusing every batch (the run fails, the ledger keeps all)
=================  =====  ==========================================================================

Crash kills: one takes a local Spark driver down with its JVM (the spark-submit crash: a sync killed
mid-delivery, whose JVM's Python workers go on sending after the driver died); the others kill a Spark
Connect client at a driver-side point (tests_common/crash.py), which leaves the same lake state as a
killed driver without a JVM start per kill.
"""
