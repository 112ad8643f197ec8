"""Test support, in one package shared by the tests and the benchmarks (``bench/``): the fixture
plugins tests/conftest.py registers (``spark_session``, ``airflow_db``, ``services`` for Postgres and
Kafka, ``webhook_receiver``, ``rest_api`` and the SaaS ``emulators`` — all on the one test HTTP server,
``http_server`` —, ``spark_cluster``, ``object_store``, ``spark_connect``, ``standalone``), the
marker plugin (``markers``), and the helpers test modules and benchmarks import (``jobs``,
``pipeline``, ``wide_lake``, ``fault_sinks``, ``paths``, ``services``)."""
