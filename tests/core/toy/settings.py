"""The toy type's settings, declared as a built-in type declares its own (`core/<type>/settings.py`):
a config struct whose `setting(...)` fields are the keys, defaults and validation. The plug-in's
`GROUP_TYPE` declaration names it, so a node that loads the plug-in accepts the keys and hands the
type the resolved struct (`ShardContext.settings`); nothing in `coordinator/` names it."""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.settings import INT32_MAX, between, setting


@dataclass(frozen=True)
class ToySettings:
    toy_session_timeout_ms: int = setting(
        "toy.session.timeout.ms", 10_000, "How long a toy group keeps its members after their last join (tests only).",
        check=between(1, INT32_MAX))
