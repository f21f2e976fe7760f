"""Rebalance analytics over the coordinator's exported history, on Spark (PySpark).

Never imported by the server. Modules:

- `spark_schema`: the explicit Spark read schema, built from `coordinator.history.schema`.
- `rebalance_report`: `python -m pipeline.rebalance_report` — the per-group, per-day tables, the
  top-N noisiest groups, Parquet output and the HTML report.
- `html`: rendering of the HTML report and its plots (matplotlib, Agg).
- `synthetic`: `python -m pipeline.synthetic` — a synthetic history in the export format, for scale.
"""
