"""Sensors: :mod:`.snapshot` — :class:`~airflow_reverse_etl.sensors.snapshot.SnapshotSensor`, waiting
(deferrable) until a table has a version for a logical date.
"""
