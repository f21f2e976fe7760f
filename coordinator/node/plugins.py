"""Plug-ins: features that live outside ``coordinator/``, named by the ``coordinator.plugins`` setting.

A plug-in is an importable Python module that offers one or both of:
- a group type (``core/registry.py``), hosted by every core this node builds (the owner's, a
  standby's once it takes over, a reload's), beside ``core.shard.GROUP_TYPES``: either
  ``GROUP_TYPE``, a ``GroupTypeDeclaration`` (name, ``register``, and the config struct whose
  ``setting(...)`` fields are the type's settings, as a built-in type declares them), or only
  ``register(ctx) -> GroupType`` for a type without settings. The settings are resolved with the
  configuration (``coordinator/config.py``: accepted from the file, the environment and
  ``--override``, validated in one line); the node builds the struct from them and every core hands
  it to the type (``ShardContext.settings(struct)``);
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
from ..config import PLUGIN_GROUP_TYPE, plugin_group_type
from ..core.registry import GroupTypeFactory
from ..runtime.shard import ShardRuntime
from ..runtime.startup_checks import StartupError

Declarations = Callable[[Callable[[], ShardRuntime | None]], Sequence[ApiDeclaration]]


@dataclass(frozen=True, slots=True)
class Plugins:
    group_types: tuple[GroupTypeFactory, ...] = ()
    declarations: tuple[Declarations, ...] = ()
    settings: tuple[type[Any], ...] = ()
    """The plug-in types' config structs (``Config.build`` makes each from the resolved values)."""

    def apis(self, shard: Callable[[], ShardRuntime | None]) -> list[ApiDeclaration]:
        return [declaration for declare in self.declarations for declaration in declare(shard)]


def load(names: Iterable[str]) -> Plugins:
    """The plug-ins named (module names, in order). Raises `StartupError` (one line)."""
    group_types: list[GroupTypeFactory] = []
    declarations: list[Declarations] = []
    settings: list[type[Any]] = []
    for name in names:
        module = _import(name)
        declared = plugin_group_type(module)
        if declared is None and getattr(module, PLUGIN_GROUP_TYPE, None) is not None:
            raise StartupError(f"coordinator.plugins: {name}.{PLUGIN_GROUP_TYPE} is not a GroupTypeDeclaration")
        register: Any = declared.register if declared is not None else getattr(module, "register", None)
        declare: Any = getattr(module, "declarations", None)
        if not callable(register) and not callable(declare):
            raise StartupError(f"coordinator.plugins: module {name} has neither register(ctx) nor declarations(shard)")
        if callable(register):
            group_types.append(register)
        if declared is not None and declared.settings is not None:
            settings.append(declared.settings)
        if callable(declare):
            declarations.append(declare)
    return Plugins(tuple(group_types), tuple(declarations), tuple(settings))


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # whatever the module raises, start-up says it in one line
        raise StartupError(f"coordinator.plugins: cannot import {name}: {type(exc).__name__}: {exc}") from None
