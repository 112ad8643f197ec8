"""Test infrastructure: real local services (PostgreSQL, Kafka, an HTTP destination) for the suite."""
