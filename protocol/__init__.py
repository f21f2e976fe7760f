"""Kafka wire protocol: framing, headers, kio codec glue, the supported-API table and error types.

This package never imports `coordinator`.
"""
