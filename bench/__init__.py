"""Benchmarks: ``python -m bench.run`` (see bench/README.md). Not part of the test suite."""
