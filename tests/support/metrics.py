"""Scrape the server's /metrics into a {sample: value} map."""

from __future__ import annotations

from tests.support.server import http_get


def scrape(port: int) -> dict[str, float]:
    status, body = http_get(port, "/metrics")
    assert status == 200
    values: dict[str, float] = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values
