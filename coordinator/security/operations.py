"""Kafka's authorized-operations bitfields (KIP-430), kept under their old names for security's own
users: they are the API contract's (`api/authorization.py`), where every API module reaches them."""

from __future__ import annotations

from ..api.authorization import (
    ALL_OPERATIONS,
    NOT_REQUESTED,
    SUPPORTED,
    authorized_operations,
    cluster_operations,
    to_32bit_field,
)

__all__ = ["ALL_OPERATIONS", "NOT_REQUESTED", "SUPPORTED", "authorized_operations", "cluster_operations",
           "to_32bit_field"]
