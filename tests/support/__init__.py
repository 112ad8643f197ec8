"""Test support, in one package: the fixture plugins tests/conftest.py registers (``spark_session``,
``airflow_db``, ``services`` for Postgres and Kafka, ``http_server``, ``spark_cluster``,
``object_store``), the marker plugin (``markers``), and the helpers test modules import (``jobs``,
``pipeline``, ``wide_lake``, ``fault_sinks``, ``paths``)."""
