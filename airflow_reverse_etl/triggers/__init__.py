"""What waits in Airflow's triggerer instead of a worker slot:

* :mod:`.delta_version` — until a Delta table has a version (the deferrable sensor's wait);
* :mod:`.delta_commit` — an event trigger that fires on a Delta source's new commits (live syncs);
* :mod:`.spark_driver` — until a job's driver in cluster deploy mode has finished.
"""
