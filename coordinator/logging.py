"""Structured logging set-up: JSON lines when stdout is not a terminal, readable console otherwise.

Everything logs through `structlog.get_logger(...)` with contextual key-value pairs (connection,
client_id, api, version); `configure()` is called once by the CLI.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog


def configure(level: str = "info", json: bool | None = None) -> None:
    """Configure structlog; `json=None` picks JSON unless stdout is a TTY."""
    use_json = (not sys.stdout.isatty()) if json is None else json
    renderer: Any = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        # One write per line (message and newline together): with PYTHONUNBUFFERED=1 (the Docker
        # image sets it) print() writes them apart, and the shards share the supervisor's stdout,
        # so two shards' lines could interleave into one unparseable line.
        logger_factory=structlog.WriteLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=True,
    )


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
