"""The provider's Airflow UI view: sync run history and pending rejects, read from the warehouse's
``_system/runs`` and ``_system/rejects`` tables without Spark (:mod:`spark_jobs.lake_io`), summed up per
consumer and destination (:mod:`.summary`), drawn as a page with inline SVG charts (:mod:`.page`,
:mod:`.chart`), served by a FastAPI app (:mod:`.app`) that :mod:`.plugin` mounts under Airflow's API server.
"""
