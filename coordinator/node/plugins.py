"""Plug-ins: features that live outside ``coordinator/``, named by the ``coordinator.plugins`` setting.

A plug-in is an importable Python module that offers one or both of:
- ``register(ctx) -> GroupType``: a group type (``core/registry.py``), hosted by every core this node
  builds (the owner's, a standby's once it takes over, a reload's), beside ``core.shard.GROUP_TYPES``;
- ``declarations(shard) -> Sequence[ApiDeclaration]``: the APIs it serves (``api/declaration.py``;
  ``shard`` is the getter of this node's shard runtime), checked closed and bound like the built-in
  ones (``node/apis.py``). A private API's schema is declared by the module itself when imported
  (``protocol.private.declare``).

Because the setting is read by every process from the same configuration, a standby and the shard
processes the supervisor starts load the same plug-ins. A module that cannot be imported, or that
offers neither function, stops start-up with one line.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..api.declaration import ApiDeclaration
from ..core.registry import GroupTypeFactory
from ..runtime.shard import ShardRuntime
from ..runtime.startup_checks import StartupError

Declarations = Callable[[Callable[[], ShardRuntime | None]], Sequence[ApiDeclaration]]


@dataclass(frozen=True, slots=True)
class Plugins:
    group_types: tuple[GroupTypeFactory, ...] = ()
    declarations: tuple[Declarations, ...] = ()

    def apis(self, shard: Callable[[], ShardRuntime | None]) -> list[ApiDeclaration]:
        return [declaration for declare in self.declarations for declaration in declare(shard)]


def load(names: Iterable[str]) -> Plugins:
    """The plug-ins named (module names, in order). Raises `StartupError` (one line)."""
    group_types: list[GroupTypeFactory] = []
    declarations: list[Declarations] = []
    for name in names:
        module = _import(name)
        register: Any = getattr(module, "register", None)
        declare: Any = getattr(module, "declarations", None)
        if not callable(register) and not callable(declare):
            raise StartupError(f"coordinator.plugins: module {name} has neither register(ctx) nor declarations(shard)")
        if callable(register):
            group_types.append(register)
        if callable(declare):
            declarations.append(declare)
    return Plugins(tuple(group_types), tuple(declarations))


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # whatever the module raises, start-up says it in one line
        raise StartupError(f"coordinator.plugins: cannot import {name}: {type(exc).__name__}: {exc}") from None
