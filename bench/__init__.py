"""Benchmarks and the load generator: they print numbers and never assert on time."""
