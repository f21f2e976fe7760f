"""A Kafka-protocol load generator for the group coordinator.

Many simulated members share a few connections; requests are encoded once per member (kio) and only
the correlation id is patched per send; every connection pipelines and coalesces its writes.

Modules: `wire` (templates, minimal response parsing), `conn` (pipelined connection), `stats`
(latency percentiles), `consumer` (KIP-848 model member), `classic` (classic model member with a
client-side eager or cooperative-sticky leader), `scenarios` (throughput, scale, convergence,
churn, commit). `python -m bench.loadgen --help` runs one scenario against any server.
"""
